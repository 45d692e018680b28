"""A reply whose tool calls repeat an id: every call is closed exactly once when the run
stops from outside (task cancel), on an interrupt, or through an ``AbortController``."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentfsm import AbortController, ToolCall, ToolMessage
from agentfsm.agent import Agent
from agentfsm.engine._cancellation import (
    CANCELLED_BEFORE_TOOL,
    CANCELLED_DURING_TOOL,
    open_calls,
)
from agentfsm.engine._context import ToolOutcome
from agentfsm.engine._messages import ToolResult, ToolSpec
from agentfsm.testing import EventRecorder, ScriptedChat, ScriptedTools, tool_reply


def _tools(started: asyncio.Event, *, safe: bool) -> ScriptedTools:
    async def slow(n: int) -> str:
        started.set()
        await asyncio.sleep(30)
        return f"never {n}"

    async def quick(n: int) -> str:
        return f"quick {n}"

    specs = None
    if safe:
        specs = [
            ToolSpec("slow", "s", concurrency_safe=True),
            ToolSpec("quick", "q", concurrency_safe=True),
        ]
    return ScriptedTools({"slow": slow, "quick": quick}, specs=specs)


def _reply(*calls: tuple[str, str, int]) -> ScriptedChat:
    built = [ToolCall(call_id, name, {"n": n}) for call_id, name, n in calls]
    return ScriptedChat([tool_reply(*built), "unreachable"])


def _ends(recorder: EventRecorder) -> list[tuple[int, bool, str | None]]:
    return [
        (e.call.arguments["n"], e.cancelled, e.result.error)
        for e in recorder.of_type("tool_call_end")
    ]


def _starts(recorder: EventRecorder) -> list[int]:
    return [e.call.arguments["n"] for e in recorder.of_type("tool_call_start")]


CASES: list[tuple[str, list[tuple[str, str, int]], bool]] = [
    ("alone, both open", [("dup", "slow", 1), ("dup", "quick", 2)], False),
    (
        "alone, the first answered",
        [("dup", "quick", 1), ("dup", "slow", 2), ("dup", "quick", 3)],
        False,
    ),
    ("batch", [("dup", "slow", 1), ("dup", "slow", 2), ("other", "slow", 3)], True),
    ("batch after an answered one", [("dup", "quick", 1), ("x", "quick", 2)], True),
]


@pytest.mark.parametrize(("label", "calls", "safe"), CASES, ids=[c[0] for c in CASES])
async def test_outside_cancel_closes_every_call_once(
    label: str, calls: list[tuple[str, str, int]], safe: bool
) -> None:
    started = asyncio.Event()
    engine = Agent(_reply(*calls), _tools(started, safe=safe))
    recorder = EventRecorder.attach(engine.events)
    task = asyncio.create_task(engine.run("go"))
    if any(name == "slow" for _, name, _ in calls):
        await asyncio.wait_for(started.wait(), 5)
        task.cancel()
    else:  # every call is quick: cancel as the last one starts
        last = calls[-1][2]
        engine.events.on(
            "tool_call_start", lambda e: task.cancel() if e.call.arguments["n"] == last else None
        )
    with pytest.raises(asyncio.CancelledError):
        await task
    ends = _ends(recorder)
    assert sorted(n for n, _, _ in ends) == [n for _, _, n in calls]  # each once
    starts = set(_starts(recorder))
    for n, cancelled, error in ends:
        if cancelled:
            expected = CANCELLED_DURING_TOOL if n in starts else CANCELLED_BEFORE_TOOL
            assert error == expected, (label, n)
    # The open ones were running slow tools or had not started.
    assert all(cancelled for n, cancelled, _ in ends if calls[n - 1][1] == "slow")
    assert recorder.types[-1] == "error"


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        # The first of two same-id calls answered: the second still closes.
        (("quick", "slow"), [(1, False, None), (2, True, CANCELLED_DURING_TOOL)]),
        # A not-started same-id call says it did not run.
        (
            ("slow", "quick"),
            [(1, True, CANCELLED_DURING_TOOL), (2, True, CANCELLED_BEFORE_TOOL)],
        ),
    ],
    ids=["first answered", "second not started"],
)
async def test_each_of_two_same_id_calls_closes_once(
    kinds: tuple[str, str], expected: list[tuple[int, bool, str | None]]
) -> None:
    started = asyncio.Event()
    calls = [("dup", kind, n) for n, kind in enumerate(kinds, start=1)]
    engine = Agent(_reply(*calls), _tools(started, safe=False))
    recorder = EventRecorder.attach(engine.events)
    task = asyncio.create_task(engine.run("go"))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _ends(recorder) == expected


@pytest.mark.parametrize("safe", [False, True])
async def test_interrupt_closes_every_same_id_call(safe: bool) -> None:
    started = asyncio.Event()
    engine = Agent(
        _reply(("dup", "slow", 1), ("dup", "slow", 2), ("dup", "quick", 3)),
        _tools(started, safe=safe),
    )
    recorder = EventRecorder.attach(engine.events)
    task = asyncio.create_task(engine.run("go"))
    await asyncio.wait_for(started.wait(), 5)
    engine.interrupt()
    outcome = await asyncio.wait_for(task, 5)
    assert outcome.stopped_reason == "aborted"
    ends = _ends(recorder)
    # In a batch the quick call finished before the interrupt; alone, it never started.
    assert [(n, cancelled) for n, cancelled, _ in ends] == [(1, True), (2, True), (3, not safe)]
    answers = [m for m in outcome.messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in answers] == ["dup"] * 3


async def test_abort_controller_closes_every_same_id_call() -> None:
    started = asyncio.Event()
    controller = AbortController()
    engine = Agent(_reply(("dup", "slow", 1), ("dup", "slow", 2)), _tools(started, safe=True))
    recorder = EventRecorder.attach(engine.events)
    task = asyncio.create_task(engine.run("go", signal=controller.signal))
    await asyncio.wait_for(started.wait(), 5)
    controller.abort()
    outcome = await asyncio.wait_for(task, 5)
    assert outcome.stopped_reason == "aborted"
    assert [(n, c) for n, c, _ in _ends(recorder)] == [(1, True), (2, True)]


def _outcome(call: ToolCall) -> ToolOutcome:
    return ToolOutcome(call, ToolResult(ok=True, output="x"))


def test_open_calls_counts_answers_per_id_and_started_by_position() -> None:
    a1, a2, b, a3 = (
        ToolCall("a", "t", {"n": 1}),
        ToolCall("a", "t", {"n": 2}),
        ToolCall("b", "t", {}),
        ToolCall("a", "t", {"n": 3}),
    )
    calls = [a1, a2, b, a3]
    left = open_calls(calls, [_outcome(a1)], {0, 1})
    assert [(c.arguments.get("n"), json.dumps(r.error)) for c, r in left] == [
        (2, json.dumps(CANCELLED_DURING_TOOL)),
        (None, json.dumps(CANCELLED_BEFORE_TOOL)),
        (3, json.dumps(CANCELLED_BEFORE_TOOL)),
    ]
    assert open_calls(calls, [_outcome(c) for c in calls], {0, 1, 2, 3}) == []
    assert [r.error for _, r in open_calls(calls, [], set())] == [CANCELLED_BEFORE_TOOL] * 4
