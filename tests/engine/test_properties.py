"""Property tests: random models, budgets, abort points and gates always follow the machine;
every run is held to python-statemachine's engine event by event (``tests/oracle.py``)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import event as label
from hypothesis import strategies as st

from agentfsm import (
    AbortController,
    AssistantMessage,
    LoopOutcome,
    LoopParams,
    Message,
    Retry,
    RunContext,
    Stop,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
    run_conversation,
)
from agentfsm.engine._compression import COMPRESSION_SYSTEM_PROMPT
from agentfsm.engine._errors import ContextOverflowUnresolved
from agentfsm.engine._events import ToolCallEndEvent
from agentfsm.engine._policy import Policy
from agentfsm.policies import compress
from agentfsm.testing import ScriptedChat, ScriptedTools

from ..helpers import Recorder
from ..oracle import held_to_the_oracle

LETTERS = {
    "turn_start": "T",
    "compress_start": "C",
    "compress_end": "c",
    "llm_start": "L",
    "llm_end": "l",
    "tool_call_start": "S",
    "final": "F",
    "budget_exhausted": "B",
    "turn_end": "D",
    "error": "R",
    "policy_stop": "P",
    "gate": "G",
}
# The machine's grammar: turns that go on, then exactly one ending.
GRAMMAR = re.compile(
    r"(T(Cc)?(LCc)*Ll((SE)+|G))*"
    r"(TR|TPD|T(Cc)?(LCc)*LR|T(Cc)?(LCc)*LlFD|T(Cc)?(LCc)*LlX+BD)"
)


def word(recorder: Recorder) -> str:
    letters = []
    for event in recorder.events:
        if isinstance(event, ToolCallEndEvent):
            letters.append("X" if event.cancelled else "E")
        else:
            letters.append(LETTERS[event.type])
    return "".join(letters)


class Boom(Exception):
    pass


class Overflow(Exception):
    kind = "context_overflow"


tool_specs = st.lists(st.sampled_from(["ok", "fail", "raise", "unknown"]), min_size=1, max_size=3)
reply_specs = st.one_of(
    st.sampled_from(["text", "text", "text", "error", "overflow", "overflow"]),
    tool_specs,
    tool_specs,
)


class StopAtTurn:
    name = "stop_at_turn"

    def __init__(self, turn: int) -> None:
        self.turn = turn

    def check_turn(self, ctx: RunContext) -> Stop | None:
        return Stop(f"reached turn {self.turn}") if ctx.turn >= self.turn else None


class RefuseTimes:
    name = "refuse_times"

    def __init__(self, times: int) -> None:
        self.left = times

    async def check_final(self, ctx: RunContext) -> Retry | None:
        if self.left > 0:
            self.left -= 1
            return Retry("not done yet")
        return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(reply_specs, min_size=1, max_size=12),
    max_turns=st.integers(1, 8),
    abort_at=st.none() | st.integers(0, 40),
    budget=st.none() | st.integers(5, 200),
    summarizer_fails=st.booleans(),
    stop_turn=st.none() | st.integers(1, 8),
    compactor=st.booleans(),
    refusals=st.integers(0, 3),
    history_size=st.integers(0, 12),
)
async def test_event_stream_follows_the_machine(
    specs: list[Any],
    max_turns: int,
    abort_at: int | None,
    budget: int | None,
    summarizer_fails: bool,
    stop_turn: int | None,
    compactor: bool,
    refusals: int,
    history_size: int,
) -> None:
    calls = {"n": 0}

    def model(messages: Sequence[Message]) -> Any:
        if messages and messages[0] == SystemMessage(COMPRESSION_SYSTEM_PROMPT):
            if summarizer_fails:
                raise Boom("summarizer failed")
            return "summary"
        spec = specs[calls["n"] % len(specs)]
        calls["n"] += 1
        if spec == "text":
            return "an answer"
        if spec == "error":
            return Boom("provider failed")
        if spec == "overflow":
            return Overflow("prompt is too long")
        names = {"ok": "ok", "fail": "fail", "raise": "crash", "unknown": "missing"}
        return AssistantMessage(
            "", tool_calls=[ToolCall(f"c{i}", names[s], {}) for i, s in enumerate(spec)]
        )

    def crash() -> str:
        raise RuntimeError("tool crashed")

    tools = ScriptedTools(
        {"ok": lambda: "fine", "fail": lambda: ToolResult(False, "", "failed"), "crash": crash}
    )
    controller = AbortController()
    recorder = Recorder()
    if abort_at is not None:
        counter = {"n": 0}

        def maybe_abort(event: Any) -> None:
            counter["n"] += 1
            if counter["n"] == abort_at:
                controller.abort()

        recorder.emitter.on("*", maybe_abort)
    caller: list[Message] = [
        UserMessage(f"message {i} " * 5) if i % 2 == 0 else AssistantMessage(f"reply {i} " * 5)
        for i in range(history_size)
    ]
    caller.append(UserMessage("task"))
    caller_copy = list(caller)
    policies: list[Policy] = [RefuseTimes(refusals)]
    if stop_turn is not None:
        policies.append(StopAtTurn(stop_turn))
    if compactor:
        policies.append(compress(budget or 10**9))

    outcome: LoopOutcome | None = None
    raised: BaseException | None = None
    with held_to_the_oracle() as oracle:
        try:
            outcome = await run_conversation(
                ScriptedChat(model),
                tools,
                caller,
                LoopParams(
                    max_turns=max_turns,
                    context_budget_tokens=budget,
                    signal=controller.signal,
                    system_prompt="system",
                ),
                emitter=recorder.emitter,
                policies=policies,
            )
        except (Boom, Overflow, ContextOverflowUnresolved) as exc:
            raised = exc
    assert oracle.runs == 1
    assert oracle.disagreements == []

    events = word(recorder)
    label(f"ended: {'raised' if raised else outcome and outcome.stopped_reason}")
    label(f"compressed: {'C' in events}")
    assert GRAMMAR.fullmatch(events), events
    assert caller == caller_copy
    turns = events.count("T")
    assert [e.turn for e in recorder.events if e.type == "turn_start"] == list(range(1, turns + 1))
    assert turns <= max_turns
    overflow_retries = events.count("LC")
    label(f"overflow compactions: {overflow_retries > 0}")
    assert events.count("L") == events.count("l") + overflow_retries + (1 if raised else 0)
    if not compactor:
        assert overflow_retries == 0
    if raised is not None:
        assert events.endswith("LR")
        if isinstance(raised, ContextOverflowUnresolved):
            assert compactor
            assert events.endswith("LCcLCcLCcLR")
            assert isinstance(raised.__cause__, Overflow)
        elif isinstance(raised, Overflow):
            assert not compactor
        else:
            assert str(raised) == "provider failed"
        return
    assert outcome is not None
    reason = outcome.stopped_reason
    if reason == "final":
        assert events.endswith("FD")
        assert outcome.turns_used == turns
        assert outcome.final is not None
        assert outcome.final == outcome.messages[-1]
    elif reason == "budget":
        assert events.endswith("BD")
        assert outcome.turns_used == max_turns == turns
        assert outcome.final is None
    elif reason == "aborted":
        assert events.endswith("TR")
        assert outcome.turns_used == turns - 1
        assert outcome.result is None
    else:
        assert reason == "policy"
        assert events.endswith("TPD")
        assert outcome.turns_used == turns - 1
        assert outcome.stop is not None
        assert outcome.stop.policy == "stop_at_turn"
    # Every tool call the model asked for was answered in the history, in order (compression
    # may have summarized an assistant message away while keeping some of its answers).
    answered = [m.tool_call_id for m in outcome.messages if m.role == "tool"]
    asked = [
        c.id for m in outcome.messages if isinstance(m, AssistantMessage) for c in m.tool_calls
    ]
    if outcome.messages and "[context summary" in outcome.messages[1].content:
        assert answered[len(answered) - len(asked) :] == asked
    else:
        assert answered == asked


ENGINE_GRAMMAR = re.compile(
    r"(T(Cc)?Ld*l((SE)+|G))*"
    r"(TR|TPD|T(Cc)?LR|T(Cc)?Ld*lFD|T(Cc)?Ld*lX+BD|T(Cc)?Ld*l(SE)*(SX)?X*R)"
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(reply_specs, min_size=1, max_size=8),
    max_turns=st.integers(1, 6),
    interrupt_at=st.none() | st.integers(1, 40),
    refusals=st.integers(0, 2),
)
async def test_engine_interrupts_follow_the_machine(
    specs: list[Any], max_turns: int, interrupt_at: int | None, refusals: int
) -> None:
    from agentfsm import Agent

    calls = {"n": 0}

    def model(messages: Sequence[Message]) -> Any:
        spec = specs[calls["n"] % len(specs)]
        calls["n"] += 1
        if spec == "text":
            return "an answer"
        if spec == "error":
            return Boom("provider failed")
        return AssistantMessage(
            "", tool_calls=[ToolCall(f"c{i}", "ok", {}) for i, _ in enumerate(spec)]
        )

    engine = Agent(
        ScriptedChat(model),
        ScriptedTools({"ok": lambda: "fine"}),
        policies=[RefuseTimes(refusals)],
        max_turns=max_turns,
    )
    recorder = Recorder(engine.events)
    if interrupt_at is not None:
        seen = {"n": 0}

        def maybe_interrupt(event: Any) -> None:
            seen["n"] += 1
            if seen["n"] == interrupt_at:
                engine.interrupt()

        engine.events.on("*", maybe_interrupt)
    outcome: LoopOutcome | None = None
    with held_to_the_oracle() as oracle, contextlib.suppress(Boom):
        outcome = await engine.run("task")
    assert oracle.runs == 1
    assert oracle.disagreements == []
    letters = []
    for item in recorder.events:
        if isinstance(item, ToolCallEndEvent):
            letters.append("X" if item.cancelled else "E")
        elif item.type.endswith("_delta"):
            letters.append("d")
        else:
            letters.append(LETTERS[item.type])
    events = "".join(letters)
    assert ENGINE_GRAMMAR.fullmatch(events), events
    if outcome is not None:
        answered = [m.tool_call_id for m in outcome.messages if isinstance(m, ToolMessage)]
        asked = [
            c.id for m in outcome.messages if isinstance(m, AssistantMessage) for c in m.tool_calls
        ]
        assert answered == asked
        if outcome.stopped_reason == "aborted":
            assert events.endswith("R")
