"""The policy seam: turn gates (`policy_stop`) and final gates (`gate_retry`)."""

from __future__ import annotations

from syrupy.assertion import SnapshotAssertion

from agentfsm import LoopParams, Retry, RunContext, Stop, UserMessage, run_conversation
from agentfsm.engine._reminders import RETRY_TURN
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from ..helpers import Recorder
from ..oracle import Oracle


class StopAfter:
    name = "stop_after"

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.seen: list[int] = []

    def check_turn(self, ctx: RunContext) -> Stop | None:
        self.seen.append(ctx.turn)
        return Stop(f"{ctx.turns_used} turns are enough") if ctx.turns_used >= self.turns else None


class RequireWord:
    name = "require_word"

    def __init__(self, word: str) -> None:
        self.word = word

    async def check_final(self, ctx: RunContext) -> Retry | None:
        assert ctx.last_result is not None
        if self.word in ctx.last_result.message.content:
            return None
        return Retry(f"Your answer must mention {self.word!r}.")


async def test_turn_gate_stops_the_run(
    oracle: Oracle, recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    gate = StopAfter(1)
    chat = ScriptedChat([tool_reply(("t", {})), "never"])
    outcome = await run_conversation(
        chat,
        ScriptedTools({"t": lambda: "ok"}),
        [UserMessage("x")],
        LoopParams(max_turns=5),
        emitter=recorder.emitter,
        policies=[gate],
    )
    assert outcome.stopped_reason == "policy"
    assert outcome.stop is not None
    assert (outcome.stop.policy, outcome.stop.reason) == ("stop_after", "1 turns are enough")
    assert outcome.turns_used == 1
    assert chat.calls == 1
    assert recorder.types[-3:] == ["turn_start", "policy_stop", "turn_end"]
    assert recorder.view() == snapshot


async def test_abort_wins_over_a_turn_gate(oracle: Oracle, recorder: Recorder) -> None:
    from agentfsm import AbortController

    controller = AbortController()
    controller.abort()
    gate = StopAfter(0)
    outcome = await run_conversation(
        ScriptedChat([]),
        None,
        [UserMessage("x")],
        LoopParams(max_turns=2, signal=controller.signal),
        emitter=recorder.emitter,
        policies=[gate],
    )
    assert outcome.stopped_reason == "aborted"
    assert recorder.types == ["turn_start", "error"]


async def test_final_gate_retries_with_a_reminder(
    oracle: Oracle, recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    chat = ScriptedChat(["draft", "final answer with banana"])
    history_in = [UserMessage("x")]
    outcome = await run_conversation(
        chat,
        None,
        history_in,
        LoopParams(max_turns=3),
        emitter=recorder.emitter,
        policies=[RequireWord("banana")],
    )
    assert outcome.stopped_reason == "final"
    assert outcome.turns_used == 2
    assert recorder.types == [
        "turn_start",
        "llm_start",
        "llm_end",
        "gate",
        "turn_start",
        "llm_start",
        "llm_end",
        "final",
        "turn_end",
    ]
    # A neutral user turn follows the refused answer in the history (so no two assistant
    # messages follow each other); the next request carries the reminder on it, once.
    reminder = "<system-reminder>\nYour answer must mention 'banana'.\n</system-reminder>"
    second = chat.requests[1].messages
    assert second[-1] == UserMessage(f"{RETRY_TURN}\n\n{reminder}")
    assert [m.content for m in outcome.messages] == [
        "x",
        "draft",
        RETRY_TURN,
        "final answer with banana",
    ]
    assert [m.role for m in outcome.messages] == ["user", "assistant", "user", "assistant"]
    assert recorder.view() == snapshot


async def test_final_gate_cannot_extend_the_budget(oracle: Oracle, recorder: Recorder) -> None:
    chat = ScriptedChat(["draft", "still no"])
    outcome = await run_conversation(
        chat,
        None,
        [UserMessage("x")],
        LoopParams(max_turns=2),
        emitter=recorder.emitter,
        policies=[RequireWord("banana")],
    )
    # On the last allowed turn a refused answer still ends the run as final.
    assert outcome.stopped_reason == "final"
    assert outcome.turns_used == 2
    assert recorder.types.count("gate") == 1
    assert outcome.final is not None
    assert outcome.final.content == "still no"
