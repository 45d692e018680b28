"""A durable run records each effect as a step; a replay of the record gives the same run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentfsm import Agent, Message
from agentfsm.adapters.durable import (
    DurableEvent,
    DurableRuntime,
    RunSpec,
    StepFailed,
    fork,
    list_runs,
    listen,
    register_agent_factory,
    result,
    submit,
)
from agentfsm.engine._events import AgentEvent
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

DELTAS = ("text_delta", "thinking_delta")
CALLS: dict[str, int] = {}


def _model(messages: Sequence[Message]) -> Any:
    CALLS["chat"] = CALLS.get("chat", 0) + 1
    answered = sum(m.role == "assistant" for m in messages)
    return tool_reply(("t", {"i": answered}), ("t", {"i": -answered})) if answered < 2 else "done"


def _tool(i: int) -> str:
    CALLS["tool"] = CALLS.get("tool", 0) + 1
    return f"ok {i}"


def _factory(spec: RunSpec) -> Agent:
    return Agent(ScriptedChat(_model), ScriptedTools({"t": _tool}), max_turns=5)


register_agent_factory("tests.scripted", _factory)


def _records(path: Path) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    for record in records:
        record.pop("ts")
    return records


def _spec(tmp_path: Path) -> RunSpec:
    return RunSpec(prompt="go", factory="tests.scripted", session_path=str(tmp_path / "s.jsonl"))


async def test_a_replay_of_a_recorded_run_gives_the_same_events(
    runtime: DurableRuntime, tmp_path: Path
) -> None:
    CALLS.clear()
    original: list[DurableEvent] = []
    run_id = await submit(_spec(tmp_path), on_event=original.append)
    outcome = await result(run_id)
    assert outcome.stopped_reason == "final"
    assert CALLS == {"chat": 3, "tool": 4}
    assert not any(e.replayed for e in original)
    first_session = _records(tmp_path / "s.jsonl")

    replayed: list[DurableEvent] = []
    unsubscribe = listen(replayed.append)
    try:
        again = await result(await fork(run_id))
    finally:
        unsubscribe()
    assert CALLS == {"chat": 3, "tool": 4}  # nothing paid again
    assert again.stopped_reason == "final"
    assert again.final == outcome.final
    assert all(e.replayed for e in replayed)

    def live(events: list[DurableEvent]) -> list[AgentEvent]:
        return [e.event for e in events if e.event.type not in DELTAS]

    assert live(replayed) == live(original)
    assert _records(tmp_path / "s.jsonl") == first_session


async def test_submitting_a_finished_run_again_runs_nothing(
    runtime: DurableRuntime, tmp_path: Path
) -> None:
    CALLS.clear()
    run_id = await submit(_spec(tmp_path))
    first = await result(run_id)
    assert await submit(_spec(tmp_path)) == run_id
    assert (await result(run_id)).final == first.final
    assert CALLS == {"chat": 3, "tool": 4}
    [info] = await asyncio.to_thread(list_runs, unfinished=False)
    assert (info.run_id, info.status, info.prompt, info.steps) == (run_id, "SUCCESS", "go", 7)
    assert await asyncio.to_thread(list_runs) == []


class _Unpicklable(Exception):
    def __init__(self, a: int, b: int) -> None:
        super().__init__(f"{a}/{b}")


def _failing(spec: RunSpec) -> Agent:
    def model(messages: Sequence[Message]) -> Any:
        raise _Unpicklable(1, 2)

    return Agent(ScriptedChat(model))


register_agent_factory("tests.failing", _failing)


async def test_an_error_that_does_not_pickle_is_recorded_by_name(
    runtime: DurableRuntime, tmp_path: Path
) -> None:
    spec = RunSpec(prompt="go", factory="tests.failing", session_path=str(tmp_path / "f.jsonl"))
    run_id = await submit(spec)
    with pytest.raises(StepFailed, match="_Unpicklable: 1/2"):
        await result(run_id)
    with pytest.raises(StepFailed, match="_Unpicklable: 1/2"):
        await result(await fork(run_id))


def test_provider_errors_survive_the_record() -> None:
    import pickle

    from agentfsm.adapters.providers import ProviderError

    error = ProviderError("context_overflow", "too long", status=400, provider_code="c")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is ProviderError
    assert vars(copy) == vars(error)
    assert str(copy) == str(error)
