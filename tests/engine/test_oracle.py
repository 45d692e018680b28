"""The differential test of the runtime driver: the table compiled from
:class:`AgentLoopMachine` and python-statemachine's own engine on a real ``AgentLoopMachine``
get the same events with the same guards and must go through the same states, on random
event sequences and on random runs (``tests/oracle.py``)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statemachine.exceptions import TransitionNotAllowed

from agentfsm import (
    Agent,
    AgentEmitter,
    AssistantMessage,
    ChatResult,
    LoopParams,
    ToolCall,
    UserMessage,
    run_conversation,
)
from agentfsm.adapters.tools import ToolBox
from agentfsm.engine._machine import GUARD_NAMES, AgentLoopMachine
from agentfsm.engine._stepper import CompiledStepper, compile_machine
from agentfsm.testing import ScriptedChat

from ..oracle import ChartStepper, Lockstep, Oracle, OracleDisagrees, held_to_the_oracle


class Guards:
    """Guard values chosen by the test."""

    def __init__(self, **values: bool) -> None:
        self.values = dict.fromkeys(GUARD_NAMES, False) | values

    def __getattr__(self, name: str) -> object:
        if name not in GUARD_NAMES:
            raise AttributeError(name)
        return lambda: self.values[name]


EVENTS = ["begin", "check", "compressed", "replied", "raised", "route", "tools_done"]
EVENTS += ["decide", "retried", "no_such_event"]


def _send(stepper: CompiledStepper | ChartStepper, event: str) -> str:
    try:
        return stepper.send(event)
    except TransitionNotAllowed:
        return "refused"


def test_the_table_and_the_engine_go_through_the_same_states_on_random_events() -> None:
    """300 random sequences of up to 40 events (a fixed seed). Each step sends, two times in
    three, an event the current state declares (so runs get deep into the chart), otherwise
    any event (undeclared ones too), with each guard drawn apart (true three times in ten);
    after a final state every event is refused by both. Every state is reached, so no
    comparison is vacuous."""
    rnd = random.Random(20260)
    declared_by_state = compile_machine(AgentLoopMachine).transitions
    sent, reached = 0, set()
    for _ in range(300):
        guards = Guards()
        table, engine = CompiledStepper(guards), ChartStepper(guards)  # type: ignore[arg-type]
        assert table.state == engine.state
        for _ in range(rnd.randint(0, 40)):
            declared = sorted(declared_by_state.get(table.state, {}))
            event = rnd.choice(declared if declared and rnd.random() < 2 / 3 else EVENTS)
            guards.values.update({name: rnd.random() < 0.3 for name in GUARD_NAMES})
            before = table.state
            assert _send(table, event) == _send(engine, event), (before, event, guards.values)
            assert table.state == engine.state
            sent += 1
            reached.add(table.state)
    assert reached == {state.id for state in AgentLoopMachine.states}
    print(f"\n{sent} random events sent to the table and the engine alike")


def test_the_oracle_catches_a_table_that_decides_otherwise() -> None:
    """A table whose ``route`` options are out of declaration order takes ``final_check``
    where the engine takes ``run_tools``: the lockstep driver fails there."""
    oracle = Oracle()
    lockstep = Lockstep(Guards(has_tool_calls=True), oracle)
    table = lockstep.table._transitions
    mutant = {state: dict(by_event) for state, by_event in table.items()}
    mutant["llm_end"]["route"] = tuple(reversed(mutant["llm_end"]["route"]))
    lockstep.table._transitions = mutant
    for event in ("begin", "check", "replied"):
        lockstep.send(event)
    with pytest.raises(OracleDisagrees, match="'route' from llm_end: table final_check"):
        lockstep.send("route")
    assert oracle.disagreements == ["'route' from llm_end: table final_check, engine run_tools"]


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


async def _run(replies: list[Reply], max_turns: int) -> tuple[Any, ...]:
    seen: list[str] = []
    emitter = AgentEmitter()
    emitter.on("*", lambda event: seen.append(event.type))
    outcome = await run_conversation(
        _chat(replies),
        ToolBox([echo]),
        [UserMessage("go")],
        LoopParams(max_turns=max_turns),
        emitter=emitter,
    )
    return outcome.stopped_reason, outcome.turns_used, len(outcome.messages), seen


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["tool", "text", "empty"]), st.integers(1, 3)), max_size=6),
    st.integers(1, 6),
)
def test_random_conversations_go_through_the_same_states(
    replies: list[Reply], max_turns: int
) -> None:
    with held_to_the_oracle() as oracle:
        alone = asyncio.run(_run(replies, max_turns))
    assert oracle.runs == 1
    assert oracle.disagreements == []
    assert oracle.events >= 3  # begin, check, and the reply's event at least
    assert asyncio.run(_run(replies, max_turns)) == alone  # the oracle changed nothing


async def test_concurrent_runs_each_get_their_own_machine_and_agree() -> None:
    replies: list[list[Reply]] = [[("tool", 1)] * turns for turns in range(5)]
    shapes = [(r, m) for r in replies for m in (2, 4, 6)] * 2
    with held_to_the_oracle() as oracle:
        held = await asyncio.gather(*(_run(r, m) for r, m in shapes))
    assert oracle.runs == len(shapes)
    assert oracle.disagreements == []
    assert held == [await _run(r, m) for r, m in shapes]
    assert {outcome[0] for outcome in held} == {"final", "budget"}


async def test_agent_runs_interrupted_mid_tool_agree() -> None:
    """``Agent``'s immediate interrupt takes the ``interrupted`` edges, which
    ``run_conversation`` never does."""
    started = asyncio.Event()

    async def slow() -> str:
        """Wait."""
        started.set()
        await asyncio.sleep(30)
        return "late"

    agent = Agent(
        ScriptedChat([ChatResult(AssistantMessage("", tool_calls=(ToolCall("c", "slow", {}),)))]),
        ToolBox([slow]),
    )
    with held_to_the_oracle() as oracle:
        run = asyncio.create_task(agent.run("go"))
        await asyncio.wait_for(started.wait(), 30)  # a guard against a hang, not a timing
        agent.interrupt()
        outcome = await run
    assert outcome.stopped_reason == "aborted"
    assert oracle.runs == 1
    assert oracle.disagreements == []
