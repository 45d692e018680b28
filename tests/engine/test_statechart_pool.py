"""The statechart driver's machines: a run that reached a final state gives its machine to
the next run, restarted at the initial state, and no two live runs ever share one."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from statemachine.exceptions import TransitionNotAllowed

from agentfsm import AssistantMessage, ChatResult, LoopParams, ToolCall, UserMessage
from agentfsm.adapters.tools import ToolBox
from agentfsm.engine import stepper as stepper_module
from agentfsm.engine.loop import run_conversation
from agentfsm.engine.machine import GUARD_NAMES, AgentLoopMachine
from agentfsm.engine.stepper import MAX_IDLE_MACHINES, StatechartStepper
from agentfsm.testing import ScriptedChat


class Guards:
    def __init__(self, **values: bool) -> None:
        self.values = dict.fromkeys(GUARD_NAMES, False) | values

    def __getattr__(self, name: str) -> object:
        if name not in GUARD_NAMES:
            raise AttributeError(name)
        return lambda: self.values[name]


@pytest.fixture
def idle() -> Iterator[list[object]]:
    """The pool of finished machines, empty for the test and as it was afterwards."""
    pool = stepper_module._chart_support(AgentLoopMachine).idle
    saved = pool[:]
    pool.clear()
    yield pool  # type: ignore[misc]
    pool[:] = saved


def test_a_finished_machine_goes_to_the_next_run_at_the_initial_state(
    idle: list[object],
) -> None:
    first = StatechartStepper(Guards(interrupted=True))  # type: ignore[arg-type]
    machine = first.machine
    assert machine is not None
    assert first.send("begin") == "compress_check"
    assert first.send("check") == "llm_start"
    assert idle == []
    assert first.send("raised") == "aborted"
    # back in the pool, restarted; the finished stepper refuses what the stopped machine would
    assert first.machine is None
    assert len(idle) == 1
    with pytest.raises(TransitionNotAllowed):
        first.send("begin")
    assert first.state == "aborted"

    second = StatechartStepper(Guards(compression_needed=True))  # type: ignore[arg-type]
    assert second.machine is machine
    assert idle == []
    assert second.state == "turn_start"
    assert machine.configuration_values == {"turn_start"}
    # it decides with the second run's guards, not the first run's
    assert second.send("begin") == "compress_check"
    assert second.send("check") == "compress"
    assert second.send("compressed") == "llm_start"
    assert second.send("replied") == "llm_end"


def test_live_runs_never_share_a_machine_and_unfinished_runs_keep_theirs(
    idle: list[object],
) -> None:
    live = [StatechartStepper(Guards()) for _ in range(3)]  # type: ignore[arg-type]
    assert len({id(s.machine) for s in live}) == 3
    live[0].send("begin")  # never finishes: its machine is not given back
    del live[0]
    assert idle == []


def test_the_pool_keeps_at_most_max_idle_machines(idle: list[object]) -> None:
    steppers = [
        StatechartStepper(Guards(abort_requested=True))  # type: ignore[arg-type]
        for _ in range(MAX_IDLE_MACHINES + 3)
    ]
    for stepper in steppers:
        assert stepper.send("begin") == "aborted"
    assert len(idle) == MAX_IDLE_MACHINES


def _script(turns: int) -> ScriptedChat:
    replies = [
        ChatResult(
            AssistantMessage("", tool_calls=(ToolCall(f"c{i}", "echo", {"text": f"m{i}"}),)),
            finish_reason="tool_calls",
        )
        for i in range(turns)
    ]
    return ScriptedChat([*replies, ChatResult(AssistantMessage("done"))])


async def echo(text: str) -> str:
    """Return the text."""
    return text


async def test_concurrent_and_repeated_runs_on_pooled_machines_end_as_the_compiled_driver(
    idle: list[object],
) -> None:
    tools = ToolBox([echo])

    async def run(stepper: str, turns: int, max_turns: int) -> tuple[str, int, int]:
        outcome = await run_conversation(
            _script(turns),
            tools,
            [UserMessage("go")],
            LoopParams(max_turns=max_turns),
            stepper=stepper,  # type: ignore[arg-type]
        )
        return outcome.stopped_reason, outcome.turns_used, len(outcome.messages)

    shapes = [(turns, max_turns) for turns in range(5) for max_turns in (2, 4, 6)] * 3
    for _ in range(2):  # the second round runs on machines the first gave back
        compiled = await asyncio.gather(*(run("compiled", t, m) for t, m in shapes))
        charted = await asyncio.gather(*(run("statechart", t, m) for t, m in shapes))
        assert charted == compiled
        assert {reason for reason, _, _ in charted} == {"final", "budget"}
        assert 0 < len(idle) <= MAX_IDLE_MACHINES
