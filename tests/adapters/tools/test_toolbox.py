"""ToolBox: schemas from signatures, validation errors, failures as data, truncation, paging."""

from __future__ import annotations

import asyncio
import enum
from typing import Literal

import pytest
from pydantic import BaseModel

from agentfsm import AbortController, ToolCall, ToolResult
from agentfsm.adapters.tools import OutputStore, ToolBox, tool
from agentfsm.adapters.tools._truncate import truncate_for_model


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


class Point(BaseModel):
    x: float
    y: float


@tool(concurrency_safe=True)
def weather(city: str, unit: Unit = Unit.C, days: int = 1) -> str:
    """Forecast for a city.

    Args:
        city: The city name.
        unit: Temperature unit.
        days: How many days ahead.
    """
    return f"{city}: 20 {unit.value} for {days} day(s)"


@tool(destructive=True)
async def move(
    to: Point, mode: Literal["walk", "run"] = "walk", tags: list[str] | None = None
) -> dict[str, object]:
    """Move somewhere."""
    return {"to": [to.x, to.y], "mode": mode, "tags": tags or []}


def test_schemas_from_signatures_and_docstrings() -> None:
    box = ToolBox([weather, move])
    specs = {s.name: s for s in box.specs()}
    forecast = specs["weather"]
    assert forecast.description == "Forecast for a city."
    assert forecast.concurrency_safe
    assert not forecast.destructive
    params = forecast.parameters
    assert params["required"] == ["city"]
    assert params["properties"]["city"] == {"type": "string", "description": "The city name."}
    assert params["properties"]["days"] == {
        "type": "integer",
        "default": 1,
        "description": "How many days ahead.",
    }
    assert params["additionalProperties"] is False
    unit = params["properties"]["unit"]
    assert unit.get("default") == "celsius"
    assert "$defs" in params
    assert params["$defs"]["Unit"]["enum"] == ["celsius", "fahrenheit"]
    moving = specs["move"].parameters
    assert specs["move"].destructive
    assert moving["properties"]["mode"]["enum"] == ["walk", "run"]
    assert moving["$defs"]["Point"]["required"] == ["x", "y"]
    assert "read_output" in specs
    assert specs["read_output"].concurrency_safe


async def test_valid_calls_sync_and_async() -> None:
    box = ToolBox([weather, move])
    assert await box.run(
        ToolCall("1", "weather", {"city": "Oslo", "unit": "fahrenheit", "days": "3"})
    ) == ToolResult(True, "Oslo: 20 fahrenheit for 3 day(s)")
    moved = await box.run(ToolCall("2", "move", {"to": {"x": 1, "y": 2.5}, "tags": ["a"]}))
    assert moved == ToolResult(True, '{"to": [1.0, 2.5], "mode": "walk", "tags": ["a"]}')


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (
            ToolCall("1", "nope", {}),
            "unknown tool 'nope'; available tools: move, read_output, weather",
        ),
        (ToolCall("1", "weather", {}, raw_arguments='{"city": "Os'), "were not valid JSON"),
        (ToolCall("1", "weather", {}), "'city': Field required"),
        (
            ToolCall("1", "weather", {"city": "Oslo", "days": "many"}),
            "'days': Input should be a valid integer",
        ),
        (
            ToolCall("1", "weather", {"city": "Oslo", "unit": "kelvin"}),
            "'unit': Input should be 'celsius' or 'fahrenheit'",
        ),
        (
            ToolCall("1", "weather", {"city": "Oslo", "wind": True}),
            "'wind': is not a parameter of this tool",
        ),
        (ToolCall("1", "move", {"to": {"x": 1}}), "'to.y': Field required"),
    ],
)
async def test_bad_calls_come_back_as_data(call: ToolCall, expected: str) -> None:
    result = await ToolBox([weather, move]).run(call)
    assert not result.ok
    assert expected in (result.error or "")


async def test_exceptions_inside_tools_are_failed_results() -> None:
    def explode(n: int) -> str:
        raise ZeroDivisionError(f"cannot divide {n} by zero")

    result = await ToolBox([explode]).run(ToolCall("1", "explode", {"n": 3}))
    assert result == ToolResult(False, "", "ZeroDivisionError: cannot divide 3 by zero")


def test_registration_errors() -> None:
    def variadic(*args: int) -> None: ...

    with pytest.raises(TypeError, match="args"):
        ToolBox([variadic])
    with pytest.raises(ValueError, match="already registered"):
        ToolBox([weather, weather])


async def test_abort_cancels_a_running_tool() -> None:
    started = asyncio.Event()
    finished: list[str] = []

    async def slow() -> str:
        started.set()
        await asyncio.sleep(10)
        finished.append("slow")
        return "late"

    controller = AbortController()
    box = ToolBox([slow])
    task = asyncio.create_task(box.run(ToolCall("1", "slow", {}), signal=controller.signal))
    await started.wait()
    controller.abort()
    result = await asyncio.wait_for(task, 2)
    assert not result.ok
    assert "cancelled" in (result.error or "")
    assert finished == []


def test_truncation_boundaries() -> None:
    assert truncate_for_model("x" * 1000, 1000, "out_1") == "x" * 1000
    text = "\n".join(f"line {i:05d}" for i in range(5000))
    cut = truncate_for_model(text, 2000, "out_7")
    assert len(cut) <= 2100
    assert cut.startswith("line 00000\n")
    assert cut.endswith("line 04999")
    assert "characters" in cut
    assert "read_output(id='out_7'" in cut
    head, _, tail = cut.partition("[…")
    assert head.endswith("\n")
    assert tail.split("…]\n", 1)[1].startswith("line ")


async def test_long_output_is_cut_for_the_model_and_paged() -> None:
    big = "".join(f"{i:06d}\n" for i in range(20_000))  # 140,000 characters

    @tool
    def dump() -> str:
        """Print a lot."""
        return big

    box = ToolBox([dump], max_output_chars=5000, store=OutputStore())
    result = await box.run(ToolCall("1", "dump", {}))
    assert result.ok
    assert len(result.output) <= 5100
    assert result.display_output == big  # the full text, for people
    output_id = result.metadata["output_id"]
    page = await box.run(
        ToolCall("2", "read_output", {"id": output_id, "offset": 7000, "limit": 21})
    )
    assert page.ok
    assert page.output.splitlines()[1:] == ["001000", "001001", "001002"]
    assert f"next: read_output(id='{output_id}', offset=7021)" in page.output
    missing = await box.run(ToolCall("3", "read_output", {"id": "out_999"}))
    assert not missing.ok


def test_output_store_drops_the_oldest() -> None:
    store = OutputStore(max_entries=2)
    a, b, c = store.put("a"), store.put("b"), store.put("c")
    assert store.get(a) is None
    assert (store.get(b), store.get(c)) == ("b", "c")


def test_output_store_is_bounded_by_memory_and_least_recently_used() -> None:
    store = OutputStore(max_bytes=64 * 1024, max_entry_bytes=16 * 1024)
    first = store.store("a" * 10_000)
    assert first.whole
    for _ in range(5):
        store.put("b" * 10_000)
    assert store.get(first.id) is not None  # used: now the most recent
    for _ in range(3):
        store.put("c" * 10_000)
    assert store.bytes <= 64 * 1024
    assert store.get(first.id) is not None
    big = store.store("d" * 100_000)
    assert not big.whole
    kept = store.get(big.id)
    assert kept is not None
    assert "excerpt" not in kept  # the kept text's own marker says what is missing
    assert "not kept" in kept
    assert big.chars == len(kept) < 16 * 1024


async def test_long_errors_are_cut_and_kept() -> None:
    @tool
    def fail() -> str:
        """Fail with a long message."""
        raise ValueError("line\n" * 10_000 + "the cause")

    box = ToolBox([fail], max_output_chars=2000)
    result = await box.run(ToolCall("1", "fail", {}))
    assert not result.ok
    assert result.error is not None
    assert len(result.error) < 2200
    assert result.error.endswith("the cause")
    error_id = result.metadata["error_id"]
    assert f"read_output(id='{error_id}'" in result.error
    page = await box.run(ToolCall("2", "read_output", {"id": error_id, "limit": 10**9}))
    assert page.ok
    assert len(page.output) <= 2000
