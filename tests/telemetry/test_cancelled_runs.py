"""A run whose task is cancelled (``task.cancel()``) is recorded as cancelled everywhere the
caller's ``CancelledError`` is: the session's ``run_end``, the ``stop`` hook and the
``invoke_agent`` span. Also when the cancellation comes with the run's very last event, as
the run returns (the task then ends cancelled although the loop finished)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentfsm import Agent, AssistantMessage, ChatResult, Usage
from agentfsm.agent import Hooks, RunStop
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from .conftest import Otel


def _run_end(folder: Path) -> dict[str, Any]:
    [session] = folder.glob("*.jsonl")
    ends = [
        record["meta"]
        for record in map(json.loads, session.read_text("utf-8").splitlines())
        if record.get("kind") == "meta" and record["meta"].get("event") == "run_end"
    ]
    [end] = ends
    return dict(end)


LAST_TIME = {"turn_start": 2, "llm_start": 2, "llm_end": 2}
"""The last turn's occurrence of the events that come every turn (the run has two)."""


@pytest.mark.parametrize(
    "event",
    ["turn_start", "llm_start", "llm_end", "tool_call_start", "tool_call_end", "final", "turn_end"],
)
async def test_a_cancelled_run_is_recorded_cancelled_everywhere(
    tmp_path: Path, otel: Otel, event: str
) -> None:
    stops: list[RunStop] = []
    chat = ScriptedChat(
        [
            ChatResult(tool_reply(("echo", {"text": "a"})), Usage(10, 2)),
            ChatResult(AssistantMessage("done"), Usage(12, 1)),
        ]
    )
    tools = ScriptedTools({"echo": lambda text: text})
    agent = Agent(
        chat,
        tools,
        session_dir=tmp_path,
        hooks=Hooks(stop=stops.append),
        instrument=otel.instrumentation(),
    )
    task: asyncio.Task[Any] | None = None
    seen: list[str] = []

    def cancel(fired: Any) -> None:
        seen.append(fired.type)
        if task is not None and len(seen) == LAST_TIME.get(event, 1):
            task.cancel()

    agent.events.on(event, cancel)
    task = asyncio.ensure_future(agent.run("go"))
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    end = _run_end(tmp_path)
    assert end["stopped_reason"] == "cancelled", end
    assert end["error"]["name"] == "CancelledError"
    assert [stop.stopped_reason for stop in stops] == ["cancelled"]
    [span] = [s for s in otel.spans() if s.name.startswith("invoke_agent")]
    assert span.attributes is not None
    assert span.attributes["error.type"] == "cancelled"
    assert span.status.status_code.name == "ERROR"


async def test_a_run_that_returns_is_not_cancelled(tmp_path: Path, otel: Otel) -> None:
    stops: list[RunStop] = []
    agent = Agent(
        ScriptedChat(["done"]),
        session_dir=tmp_path,
        hooks=Hooks(stop=stops.append),
        instrument=otel.instrumentation(),
    )
    outcome = await agent.run("go")
    assert outcome.stopped_reason == "final"
    assert _run_end(tmp_path)["stopped_reason"] == "final"
    assert [stop.stopped_reason for stop in stops] == ["final"]


async def _cancelled_in(tmp_path: Path, otel: Otel, where: str) -> tuple[list[RunStop], Path]:
    """A run cancelled while ``where`` (an async hook, or the preamble) awaits."""
    stops: list[RunStop] = []
    entered = asyncio.Event()

    async def waits(_: object = None) -> None:
        entered.set()
        await asyncio.sleep(30)

    async def stop(info: RunStop) -> None:
        stops.append(info)
        if where == "stop":
            await waits()

    class Preamble:
        async def render(self) -> str:
            await waits()
            return "never"

    hooks = Hooks(
        session_start=waits if where == "session_start" else None,
        user_prompt_submit=waits if where == "user_prompt_submit" else None,
        stop=stop,
    )
    agent = Agent(
        ScriptedChat(["done"]),
        session_dir=tmp_path,
        hooks=hooks,
        preamble=Preamble() if where == "preamble" else None,
        instrument=otel.instrumentation(),
    )
    task = asyncio.ensure_future(agent.run("go"))
    await asyncio.wait_for(entered.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return stops, tmp_path


@pytest.mark.parametrize("where", ["session_start", "user_prompt_submit", "preamble"])
async def test_a_run_cancelled_before_its_start_is_recorded_nowhere_but_the_stop_hook(
    tmp_path: Path, otel: Otel, where: str
) -> None:
    stops, folder = await _cancelled_in(tmp_path, otel, where)
    assert [(s.stopped_reason, type(s.error).__name__) for s in stops] == [
        ("cancelled", "CancelledError")
    ]
    assert list(folder.glob("*.jsonl")) == []  # nothing was recorded: no empty session left
    assert [s for s in otel.spans() if s.name.startswith("invoke_agent")] == []


async def test_a_cancellation_during_the_stop_hook_records_the_run_cancelled(
    tmp_path: Path, otel: Otel
) -> None:
    # The hook was told the run's end and is itself cancelled; the session and the span
    # say what the caller gets.
    stops, folder = await _cancelled_in(tmp_path, otel, "stop")
    assert [s.stopped_reason for s in stops] == ["final"]
    assert _run_end(folder)["stopped_reason"] == "cancelled"
    [span] = [s for s in otel.spans() if s.name.startswith("invoke_agent")]
    assert span.attributes is not None
    assert span.attributes["error.type"] == "cancelled"
