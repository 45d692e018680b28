"""The turn budget (wrap-up, capped text, a policy's tighter budget), spend_limit,
presets.minimal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from agentfsm import (
    AbortController,
    LoopParams,
    Policy,
    ToolMessage,
    UserMessage,
    render_diagram,
    run_conversation,
)
from agentfsm.cli._render import last_words
from agentfsm.engine._compression import COMPRESSION_SYSTEM_PROMPT
from agentfsm.engine._messages import AssistantMessage, ChatResult, Message, ToolCall, Usage
from agentfsm.policies import presets, spend_limit, wrap_up
from agentfsm.policies._limits import WRAP_UP_REMINDER
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from ..helpers import Recorder


def tools() -> ScriptedTools:
    return ScriptedTools({"t": lambda: "ok"})


async def test_wrap_up_on_the_last_turn_and_note_on_the_capped_text(
    recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    chat = ScriptedChat([tool_reply(("t", {})), tool_reply(("t", {})), "Summary: did two steps."])
    outcome = await run_conversation(
        chat,
        tools(),
        [UserMessage("go")],
        LoopParams(max_turns=3),
        emitter=recorder.emitter,
        policies=[wrap_up()],
    )
    # Only the last allowed turn's request carries the wrap-up reminder.
    carries = [WRAP_UP_REMINDER in r.messages[-1].content for r in chat.requests]
    assert carries == [False, False, True]
    assert all(WRAP_UP_REMINDER not in m.content for m in outcome.messages)
    assert outcome.stopped_reason == "final"
    assert outcome.final == AssistantMessage(
        "Summary: did two steps.\n\n[Stopped at the limit of 3 turns.]"
    )
    assert outcome.messages[-1] == AssistantMessage("Summary: did two steps.")
    assert recorder.view() == snapshot


async def test_capped_run_that_still_calls_tools() -> None:
    chat = ScriptedChat([ChatResult(tool_reply(("t", {}), content="Still working on it."))] * 2)
    outcome = await run_conversation(
        chat, tools(), [UserMessage("go")], LoopParams(max_turns=2), policies=[wrap_up()]
    )
    assert outcome.stopped_reason == "budget"
    assert outcome.turns_used == 2
    assert outcome.final is None  # final is set only when the run ended "final"
    assert outcome.result is not None
    assert outcome.result.message.content == "Still working on it."
    assert last_words(outcome) == "Still working on it."


async def test_an_early_final_answer_gets_no_note() -> None:
    outcome = await run_conversation(
        ScriptedChat(["done"]),
        tools(),
        [UserMessage("go")],
        LoopParams(max_turns=3),
        policies=[wrap_up()],
    )
    assert outcome.final == AssistantMessage("done")


class Budget:
    """A policy that only tightens the run's turn limit."""

    def __init__(self, turns: int) -> None:
        self.turn_budget = turns


async def test_a_policy_turn_budget_tightens_the_run_budget_never_loosens_it() -> None:
    chat = ScriptedChat([tool_reply(("t", {}))] * 5)
    outcome = await run_conversation(
        chat, tools(), [UserMessage("go")], LoopParams(max_turns=3), policies=[Budget(4)]
    )
    assert outcome.turns_used == 3
    assert outcome.stopped_reason == "budget"
    chat = ScriptedChat([tool_reply(("t", {})), "Summary."])
    outcome = await run_conversation(
        chat,
        tools(),
        [UserMessage("go")],
        LoopParams(max_turns=9),
        policies=[Budget(2), wrap_up()],
    )
    assert outcome.turns_used == 2
    assert outcome.final == AssistantMessage("Summary.\n\n[Stopped at the limit of 2 turns.]")
    assert WRAP_UP_REMINDER in chat.requests[1].messages[-1].content


async def test_spend_breaker(recorder: Recorder, snapshot: SnapshotAssertion) -> None:
    def model(messages: Sequence[Message]) -> Any:
        if messages[0].content == COMPRESSION_SYSTEM_PROMPT:
            return ChatResult(AssistantMessage("summary"), Usage(400, 50))
        return ChatResult(tool_reply(("t", {})), Usage(300, 20))

    history: list[Message] = [UserMessage(f"m{i}") for i in range(12)]
    outcome = await run_conversation(
        ScriptedChat(model),
        tools(),
        history,
        LoopParams(max_turns=10, context_budget_tokens=10),
        emitter=recorder.emitter,
        policies=[spend_limit(1000)],
    )
    # Each turn compresses (450 tokens, an auxiliary call) and calls the model (320): after
    # turn 1 the run spent 770 < 1000 and goes on; after turn 2, 1540: stop at turn 3's top.
    assert outcome.stopped_reason == "policy"
    assert outcome.stop is not None
    assert outcome.usage == Usage(1400, 140)
    assert outcome.stop.reason == "spend limit reached: 1540 of 1000 tokens"
    assert outcome.turns_used == 2
    assert recorder.view() == snapshot


SCENARIOS: list[tuple[str, list[Any], int, bool]] = [
    ("scenario_a", [tool_reply(("t", {})), "done"], 5, False),
    ("final_turn_one", ["hello"], 3, False),
    ("three_calls", [tool_reply(("t", {}), ("t", {}), ("t", {})), "ok"], 2, False),
    ("budget", [tool_reply(("t", {})), tool_reply(ToolCall("x", "t", {}))], 2, False),
    ("abort", ["never"], 3, True),
]


@pytest.mark.parametrize(("name", "script", "turns", "aborted"), SCENARIOS)
async def test_minimal_preset_is_the_core_loop(
    name: str, script: list[Any], turns: int, aborted: bool
) -> None:
    def run(params: LoopParams, policies: list[Policy]) -> Any:
        recorder = Recorder()
        return recorder, run_conversation(
            ScriptedChat(list(script)),
            tools(),
            [UserMessage("go")],
            params,
            emitter=recorder.emitter,
            policies=policies,
        )

    controller = AbortController()
    if aborted:
        controller.abort()
    seed_rec, seed_run = run(LoopParams(max_turns=turns, signal=controller.signal), [])
    seed = await seed_run
    policy_rec, policy_run = run(
        LoopParams(max_turns=turns, signal=controller.signal), presets.minimal()
    )
    via_policy = await policy_run
    assert policy_rec.view() == seed_rec.view()
    assert via_policy == seed


async def test_minimal_with_a_turn_count_stops_as_the_runs_own_budget_does() -> None:
    """``presets.minimal(10)`` under ``max_turns=50`` is the seed loop's ``max_turns=10``:
    the same events (the budget's included) and the same history, the skipped calls of the
    last turn answered ``turn_budget_exhausted``."""

    async def run(params: LoopParams, policies: list[Policy]) -> tuple[Recorder, Any]:
        recorder = Recorder()
        outcome = await run_conversation(
            ScriptedChat([tool_reply(("t", {}), ("t", {"n": 2}))] * 60),
            tools(),
            [UserMessage("go")],
            params,
            emitter=recorder.emitter,
            policies=policies,
        )
        return recorder, outcome

    seed_rec, seed = await run(LoopParams(max_turns=10), [])
    rec, outcome = await run(LoopParams(max_turns=50), presets.minimal(10))
    assert seed.stopped_reason == outcome.stopped_reason == "budget"
    assert seed.turns_used == outcome.turns_used == 10
    assert rec.events == seed_rec.events
    assert [e.type for e in rec.events][-2:] == ["budget_exhausted", "turn_end"]
    assert outcome.messages == seed.messages
    skipped = [m for m in outcome.messages[-2:] if isinstance(m, ToolMessage)]
    assert len(skipped) == 2
    assert all("turn_budget_exhausted" in m.content for m in skipped)
    # The tightest budget wins: the run's own when it is the smaller.
    _, short = await run(LoopParams(max_turns=3), presets.minimal(10))
    assert short.turns_used == 3


def test_minimal_turn_budget_reads_as_code_and_is_checked() -> None:
    (budget,) = presets.minimal(10)
    assert repr(budget) == "turn_budget(10)"
    assert render_diagram("mermaid", policies=presets.minimal(10)).count("turn_budget(10)") >= 1
    assert presets.minimal() == presets.minimal(None) == []
    for bad in (0, -1, True, 2.5, "10"):
        with pytest.raises(ValueError, match="max_turns must be an int >= 1"):
            presets.minimal(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        presets.minimal(turns=10)  # type: ignore[call-arg]
