"""Stop conditions: composition, reprs, each condition, stop_when and require."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from agentfsm import LoopParams, RunContext, UserMessage, run_conversation
from agentfsm.engine._messages import AssistantMessage, ChatResult, Usage
from agentfsm.policies import (
    StopCondition,
    elapsed_over,
    require,
    stop_all,
    stop_any,
    stop_not,
    stop_when,
    text_matches,
    tokens_over,
    tool_called,
    turns_at_least,
)
from agentfsm.policies._stop import as_condition
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from ..helpers import Recorder


class Fixed(StopCondition):
    def __init__(self, name: str, value: bool) -> None:
        self.name, self.value = name, value

    def __call__(self, ctx: RunContext) -> bool:
        return self.value

    def __repr__(self) -> str:
        return self.name


def context(**fields: Any) -> RunContext:
    ctx = RunContext(params=LoopParams(max_turns=10), history=[])
    for key, value in fields.items():
        setattr(ctx, key, value)
    return ctx


@pytest.mark.parametrize(("a", "b"), list(itertools.product([False, True], repeat=2)))
def test_truth_tables(a: bool, b: bool) -> None:
    ctx = context()
    x, y = Fixed("x", a), Fixed("y", b)
    assert (x | y)(ctx) is (a or b)
    assert (x & y)(ctx) is (a and b)
    assert (~x)(ctx) is (not a)
    assert (~(x | y))(ctx) is (not (a or b))
    assert (x & ~y | ~x & y)(ctx) is (a != b)
    assert ((lambda c: a) | y)(ctx) is (a or b)
    assert (x & (lambda c: b))(ctx) is (a and b)


def test_reprs_read_like_code() -> None:
    assert repr(tool_called("submit") | tokens_over(200000)) == (
        "tool_called('submit') | tokens_over(200000)"
    )
    a, b, c = tool_called("a"), turns_at_least(3), text_matches(r"done\b")
    assert (
        repr((a | b) & ~c) == "(tool_called('a') | turns_at_least(3)) & ~text_matches('done\\\\b')"
    )
    assert repr(a | b & c) == "tool_called('a') | turns_at_least(3) & text_matches('done\\\\b')"
    assert repr(~(a & b)) == "~(tool_called('a') & turns_at_least(3))"
    assert repr(a | b | c) == repr(stop_any(a, b, c))  # flattened
    assert len(stop_all(a, stop_all(b, c)).conditions) == 3

    def budget_ok(ctx: RunContext) -> bool:
        return True

    assert repr(stop_when(budget_ok | elapsed_over(60))) == (
        "stop_when(budget_ok | elapsed_over(60))"
    )
    assert repr(require(tool_called("test"), reminder="run the tests")) == (
        "require(tool_called('test'), max_retries=3)"
    )
    assert repr(stop_not(a)) == "~tool_called('a')"


def test_plain_callables_and_rejects() -> None:
    assert as_condition(lambda ctx: True)(context())
    with pytest.raises(TypeError, match="callable"):
        as_condition(42)  # type: ignore[arg-type]


def test_each_condition() -> None:
    assert not tool_called("x")(context())
    assert tool_called("x")(context(tool_counts={"x": 1}))
    reply = ChatResult(AssistantMessage("VERDICT: PASS"))
    assert text_matches(r"VERDICT: (PASS|FAIL)")(context(last_result=reply))
    assert not text_matches("nope")(context(last_result=reply))
    assert not text_matches("x")(context())
    assert turns_at_least(2)(context(turns_used=2))
    assert not turns_at_least(2)(context(turns_used=1))
    assert tokens_over(100)(context(usage=Usage(90, 11)))
    assert not tokens_over(100)(context(usage=Usage(90, 10)))
    now = {"t": 100.0}
    ctx = RunContext(params=LoopParams(max_turns=1), history=[], clock=lambda: now["t"])
    assert not elapsed_over(5)(ctx)
    now["t"] = 105.5
    assert elapsed_over(5)(ctx)


async def test_stop_when_scenario(recorder: Recorder, snapshot: SnapshotAssertion) -> None:
    chat = ScriptedChat(
        [tool_reply(("search", {})), tool_reply(("submit", {"answer": 42})), "never asked"]
    )
    tools = ScriptedTools({"search": lambda: "found", "submit": lambda answer: "submitted"})
    outcome = await run_conversation(
        chat,
        tools,
        [UserMessage("go")],
        LoopParams(max_turns=10),
        emitter=recorder.emitter,
        policies=[stop_when(tool_called("submit") | tokens_over(200_000))],
    )
    assert outcome.stopped_reason == "policy"
    assert outcome.stop is not None
    assert outcome.stop.policy == "stop_when(tool_called('submit') | tokens_over(200000))"
    assert outcome.stop.reason == "tool_called('submit') | tokens_over(200000) holds"
    assert outcome.turns_used == 2
    assert recorder.types[-3:] == ["turn_start", "policy_stop", "turn_end"]
    assert recorder.view() == snapshot


async def test_require_scenario(recorder: Recorder, snapshot: SnapshotAssertion) -> None:
    chat = ScriptedChat(["I think it works", "Probably fine", "VERDICT: PASS"])
    gate = require(text_matches(r"VERDICT: \w+"), reminder="End with a VERDICT line.")
    outcome = await run_conversation(
        chat,
        None,
        [UserMessage("check")],
        LoopParams(max_turns=5),
        emitter=recorder.emitter,
        policies=[gate],
    )
    assert outcome.final is not None
    assert outcome.final.content == "VERDICT: PASS"
    assert recorder.types.count("gate") == 2
    reminders = [r.messages[-1].content for r in chat.requests[1:]]
    assert all("End with a VERDICT line." in text for text in reminders)
    assert recorder.view() == snapshot


async def test_require_gives_up_after_max_retries() -> None:
    chat = ScriptedChat(["a", "b", "c"])
    gate = require(tool_called("tests"), reminder="Run the tests first.", max_retries=2)
    outcome = await run_conversation(
        chat, None, [UserMessage("x")], LoopParams(max_turns=10), policies=[gate]
    )
    assert outcome.final == AssistantMessage("c")
    assert chat.calls == 3
    # Counters are per run: the same policy object refuses again in the next run.
    chat2 = ScriptedChat(["a", "b", "c"])
    await run_conversation(
        chat2, None, [UserMessage("x")], LoopParams(max_turns=10), policies=[gate]
    )
    assert chat2.calls == 3
