"""The statechart driver builds a machine per run, the public way, and decides as the
compiled driver does: both drivers, chosen as a run chooses them, go through the same
states on random event sequences and random runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statemachine.exceptions import TransitionNotAllowed

from agentfsm import AgentEmitter, AssistantMessage, ChatResult, LoopParams, ToolCall, UserMessage
from agentfsm.adapters.tools import ToolBox
from agentfsm.engine._loop import run_conversation
from agentfsm.engine._machine import GUARD_NAMES, AgentLoopMachine
from agentfsm.engine._stepper import StatechartStepper, compile_machine, make_stepper
from agentfsm.testing import ScriptedChat


class Guards:
    def __init__(self, **values: bool) -> None:
        self.values = dict.fromkeys(GUARD_NAMES, False) | values

    def __getattr__(self, name: str) -> object:
        if name not in GUARD_NAMES:
            raise AttributeError(name)
        return lambda: self.values[name]


def test_each_run_builds_its_own_machine_and_a_finished_one_refuses() -> None:
    first = StatechartStepper(Guards(interrupted=True))  # type: ignore[arg-type]
    machine = first.machine
    assert isinstance(machine, AgentLoopMachine)
    assert first.send("begin") == "compress_check"
    assert first.send("check") == "llm_start"
    assert first.send("raised") == "aborted"
    assert first.machine is None
    with pytest.raises(TransitionNotAllowed):
        first.send("begin")
    assert first.state == "aborted"

    second = StatechartStepper(Guards(compression_needed=True))  # type: ignore[arg-type]
    assert second.machine is not machine
    assert second.state == "turn_start"
    assert second.machine.configuration_values == {"turn_start"}
    assert second.send("begin") == "compress_check"
    assert second.send("check") == "compress"
    assert second.send("compressed") == "llm_start"
    assert second.send("replied") == "llm_end"


def test_live_runs_never_share_a_machine() -> None:
    live = [StatechartStepper(Guards()) for _ in range(3)]  # type: ignore[arg-type]
    assert len({id(s.machine) for s in live}) == 3


EVENTS = ["begin", "check", "compressed", "replied", "raised", "route", "tools_done"]
EVENTS += ["decide", "retried", "no_such_event"]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_both_drivers_go_through_the_same_states_on_random_events(data: st.DataObject) -> None:
    """Each step sends, mostly, an event the current state declares (so runs get deep into
    the chart), sometimes any event, with random guard values."""
    guards = Guards()
    drivers = [make_stepper(kind, guards) for kind in ("compiled", "statechart")]  # type: ignore[arg-type]
    table = compile_machine(AgentLoopMachine)
    for _ in range(data.draw(st.integers(0, 40))):
        declared = sorted(table.transitions.get(drivers[0].state, {}))
        choices = st.sampled_from(EVENTS)
        if declared:
            choices = st.one_of(st.sampled_from(declared), st.sampled_from(declared), choices)
        event = data.draw(choices)
        guards.values.update(
            data.draw(st.fixed_dictionaries({n: st.booleans() for n in GUARD_NAMES}))
        )
        outcomes = []
        for driver in drivers:
            try:
                outcomes.append(driver.send(event))
            except TransitionNotAllowed:
                outcomes.append("refused")
        assert outcomes[0] == outcomes[1], (event, guards.values)
        assert drivers[0].state == drivers[1].state
    if drivers[0].state in table.final:
        assert drivers[1].machine is None  # type: ignore[union-attr]


async def echo(text: str) -> str:
    """Return the text."""
    return text


Reply = tuple[str, int]  # ("tool", n calls) | ("text", 0) | ("empty", 0)


def _chat(replies: list[Reply]) -> ScriptedChat:
    script: list[ChatResult] = []
    for turn, (kind, calls) in enumerate(replies):
        if kind == "tool":
            tool_calls = tuple(
                ToolCall(f"c{turn}_{i}", "echo" if i % 2 == 0 else "nope", {"text": "x"})
                for i in range(calls)
            )
            script.append(ChatResult(AssistantMessage("", tool_calls=tool_calls)))
        else:
            script.append(ChatResult(AssistantMessage("done" if kind == "text" else "")))
    script.append(ChatResult(AssistantMessage("last")))
    return ScriptedChat(script)


async def _run(stepper: str, replies: list[Reply], max_turns: int) -> tuple[Any, ...]:
    seen: list[str] = []
    emitter = AgentEmitter()
    emitter.on("*", lambda event: seen.append(event.type))
    outcome = await run_conversation(
        _chat(replies),
        ToolBox([echo]),
        [UserMessage("go")],
        LoopParams(max_turns=max_turns),
        emitter=emitter,
        stepper=stepper,  # type: ignore[arg-type]
    )
    return outcome.stopped_reason, outcome.turns_used, len(outcome.messages), seen


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["tool", "text", "empty"]), st.integers(1, 3)), max_size=6),
    st.integers(1, 6),
)
def test_both_drivers_run_random_conversations_alike(replies: list[Reply], max_turns: int) -> None:
    async def both() -> list[tuple[Any, ...]]:
        return [await _run(kind, replies, max_turns) for kind in ("compiled", "statechart")]

    compiled, charted = asyncio.run(both())
    assert charted == compiled


async def test_concurrent_runs_on_the_statechart_driver_end_as_on_the_compiled_one() -> None:
    replies: list[list[Reply]] = [[("tool", 1)] * turns for turns in range(5)]
    shapes = [(r, m) for r in replies for m in (2, 4, 6)] * 2
    compiled = await asyncio.gather(*(_run("compiled", r, m) for r, m in shapes))
    charted = await asyncio.gather(*(_run("statechart", r, m) for r, m in shapes))
    assert charted == compiled
    assert {outcome[0] for outcome in charted} == {"final", "budget"}
