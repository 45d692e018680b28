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
