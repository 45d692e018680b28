"""Loop health (A-D, two tiers) and redirection, each rule with a scripted scenario."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from agentfsm import LoopParams, UserMessage, run_conversation
from agentfsm.engine._events import PolicyWarnEvent, RedirectEvent, RedirectSkippedEvent
from agentfsm.engine._messages import (
    AssistantMessage,
    ChatResult,
    Message,
    SystemMessage,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from agentfsm.policies import loop_health, redirect
from agentfsm.policies._redirect import SUPERVISOR_PROMPT, build_evidence, parse_directions
from agentfsm.testing import ScriptedChat, ScriptedTools

from ..helpers import Recorder


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def edit(path: str, old: str, new: str) -> ToolResult:
    return ToolResult(
        True,
        f"edited {path}",
        metadata={"path": path, "before_sha": sha(old), "after_sha": sha(new)},
    )


def workspace_tools() -> ScriptedTools:
    specs = [
        ToolSpec("read", "Read a file.", concurrency_safe=True),
        ToolSpec("edit", "Edit a file.", destructive=True),
    ]
    return ScriptedTools(
        {
            "read": lambda path: f"contents of {path}",
            "edit": lambda path, old, new: edit(path, old, new),
        },
        specs=specs,
    )


def calls(*items: tuple[str, dict[str, Any]], reasoning: str | None = None) -> AssistantMessage:
    return AssistantMessage(
        "",
        tool_calls=[ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(items)],
        reasoning=reasoning,
    )


async def run(
    script: Sequence[Any], policy: loop_health, recorder: Recorder, max_turns: int = 30
) -> Any:
    return await run_conversation(
        ScriptedChat(script),
        workspace_tools(),
        [UserMessage("fix the bug")],
        LoopParams(max_turns=max_turns),
        emitter=recorder.emitter,
        policies=[policy],
    )


def warns(recorder: Recorder) -> list[tuple[int, str | None]]:
    return [(e.turn, e.code) for e in recorder.of(PolicyWarnEvent)]


async def test_a_repeated_identical_calls_warn_then_stop(
    recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    same = calls(("read", {"path": "a.py"}))
    outcome = await run([same] * 10, loop_health(), recorder)
    # The third identical call warns at the top of turn 4; the sixth stops turn 7.
    assert warns(recorder) == [
        (4, "repeated_identical_tool"),
        (5, "repeated_identical_tool"),
        (6, "repeated_identical_tool"),
    ]
    assert outcome.stopped_reason == "policy"
    assert outcome.stop is not None
    assert (
        outcome.stop.reason
        == "Loop stopped: repeated_identical_tool: 6 identical read calls among the last 10"
    )
    assert outcome.turns_used == 6
    assert len(outcome.messages) == 1 + 6 * 2  # all history kept
    assert recorder.view() == snapshot


async def test_a_different_arguments_do_not_count(recorder: Recorder) -> None:
    script = [calls(("read", {"path": f"f{i}.py"})) for i in range(6)] + ["done"]
    outcome = await run(script, loop_health(), recorder)
    assert outcome.stopped_reason == "final"
    assert warns(recorder) == []


def test_a_identical_calls_whatever_their_key_order() -> None:
    """Identical is the same name and the same arguments, whatever their key order; a call is
    kept as it was when seen, so changing its arguments dict afterwards changes nothing."""
    from agentfsm import RunContext
    from agentfsm.engine._context import ToolOutcome

    policy = loop_health()
    ctx = RunContext(params=LoopParams(max_turns=100), history=[])

    def see(arguments: dict[str, Any], name: str = "grep") -> int:
        call = ToolCall("g", name, arguments)
        policy.on_tool_result(ctx, ToolOutcome(call, ToolResult(True, "no match")))
        return policy.state(ctx).repeated

    first = {"pattern": "x", "path": "src"}
    assert see(first) == 1
    assert see({"path": "src", "pattern": "x"}) == 2  # the same arguments, other key order
    first["pattern"] = "y"  # what the first call was does not change with its dict
    assert see({"pattern": "x", "path": "src"}) == 3
    assert see({"pattern": "x", "path": "src", "limit": 5}) == 1
    assert see({"pattern": "x", "path": "src"}, name="find") == 1


async def test_b_five_reads_in_a_turn_are_not_stagnation(recorder: Recorder) -> None:
    five = calls(*[("read", {"path": f"f{i}.py"}) for i in range(5)])
    outcome = await run([five, "done"], loop_health(stagnant_turns=2), recorder)
    assert outcome.stopped_reason == "final"
    assert warns(recorder) == []


async def test_b_stagnation_warns_but_never_stops(
    recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    script = [calls(("read", {"path": f"f{i}.py"})) for i in range(8)]
    policy = loop_health(stagnant_turns=2)
    outcome = await run(script, policy, recorder, max_turns=8)
    assert outcome.stopped_reason == "budget"  # never a loop stop, even at 3x the threshold
    # At the threshold and at each further multiple of it (2, 4, 6 turns without a change,
    # read at the top of turns 3, 5, 7), not on every turn in between.
    assert [w for w in warns(recorder) if w[1] == "no_progress"] == [
        (t, "no_progress") for t in (3, 5, 7)
    ]
    assert recorder.view() == snapshot


async def test_b_stagnation_warns_again_at_each_multiple_and_after_a_reset(
    recorder: Recorder,
) -> None:
    read = [calls(("read", {"path": f"f{i}.py"})) for i in range(7)]
    change = [calls(("edit", {"path": "a", "old": "x", "new": "y"}))]
    more = [calls(("read", {"path": f"g{i}.py"})) for i in range(4)]
    policy = loop_health(stagnant_turns=3)
    await run([*read, *change, *more, "done"], policy, recorder)
    # 3 and 6 turns without a change (turns 4 and 7), then the edit of turn 8 resets the
    # count: 3 turns again at turn 12.
    assert [w for w in warns(recorder) if w[1] == "no_progress"] == [
        (4, "no_progress"),
        (7, "no_progress"),
        (12, "no_progress"),
    ]


async def test_b_stagnation_and_another_pattern_are_both_reported(recorder: Recorder) -> None:
    same = calls(("read", {"path": "same.py"}))
    script = [calls(("read", {"path": f"f{i}.py"})) for i in range(4)] + [same] * 4 + ["done"]
    policy = loop_health(stagnant_turns=2, repeated_calls=3)
    outcome = await run(script, policy, recorder)
    assert outcome.stopped_reason == "final"
    assert warns(recorder) == [
        (3, "no_progress"),
        (5, "no_progress"),
        (7, "no_progress"),
        (8, "repeated_identical_tool"),  # 3 identical calls among the last 10
        (9, "repeated_identical_tool"),  # 4: a new level of a pattern that stops at 6
        (9, "no_progress"),  # 8 turns without a change
    ]


async def test_b_a_file_change_resets_stagnation(recorder: Recorder) -> None:
    script = [
        calls(("read", {"path": "a"})),
        calls(("edit", {"path": "a", "old": "x", "new": "y"})),
        calls(("read", {"path": "b"})),
        "done",
    ]
    policy = loop_health(stagnant_turns=2)
    await run(script, policy, recorder)
    assert warns(recorder) == []


async def test_c_oscillation_scores_only_reverts(
    recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    x_to_y = ("edit", {"path": "a.py", "old": "X", "new": "Y"})
    y_to_x = ("edit", {"path": "a.py", "old": "Y", "new": "X"})
    script = [calls(x_to_y), calls(y_to_x), calls(x_to_y), calls(y_to_x), calls(x_to_y), "never"]
    outcome = await run(script, loop_health(repeated_calls=100), recorder)
    # Edit 2 reverts edit 1 (score 1); edit 3 reverts 2 (score 2: warn); edit 4 (3: warn
    # again); edit 5 (4 = 2x: stop).
    assert warns(recorder) == [(4, "oscillation_detected"), (5, "oscillation_detected")]
    assert outcome.stopped_reason == "policy"
    assert outcome.stop is not None
    assert outcome.stop.reason.startswith("Loop stopped: oscillation_detected")
    assert recorder.view() == snapshot


async def test_c_no_op_failed_and_unrelated_edits_never_count(recorder: Recorder) -> None:
    def broken(path: str, old: str, new: str) -> ToolResult:
        return ToolResult(
            False,
            "",
            "no match",
            metadata={"path": path, "before_sha": sha(old), "after_sha": sha(new)},
        )

    tools = ScriptedTools(
        {"edit": lambda path, old, new: edit(path, old, new), "broken": broken},
        specs=[ToolSpec("edit", "e", destructive=True), ToolSpec("broken", "b", destructive=True)],
    )
    script: list[Any] = [
        calls(("edit", {"path": "a", "old": "X", "new": "X"})),  # no-op
        calls(("broken", {"path": "a", "old": "X", "new": "Y"})),  # failed
        calls(("edit", {"path": "a", "old": "Y", "new": "X"})),  # would "revert" the failed one
        calls(("edit", {"path": "b", "old": "X", "new": "Y"})),
        calls(("edit", {"path": "c", "old": "Y", "new": "X"})),  # other file: no revert
        "done",
    ]
    await run_conversation(
        ScriptedChat(script),
        tools,
        [UserMessage("x")],
        LoopParams(max_turns=10),
        emitter=recorder.emitter,
        policies=[loop_health(oscillations=1)],
    )
    assert warns(recorder) == []


async def test_c_oscillation_score_falls_as_reverts_leave_the_window() -> None:
    from agentfsm import RunContext
    from agentfsm.engine._context import ToolOutcome

    policy = loop_health()
    ctx = RunContext(params=LoopParams(max_turns=100), history=[])

    def apply(path: str, old: str, new: str) -> None:
        call = ToolCall("e", "edit", {"path": path, "old": old, "new": new})
        policy.on_tool_result(ctx, ToolOutcome(call, edit(path, old, new)))

    apply("a", "X", "Y")
    apply("a", "Y", "X")
    assert policy.state(ctx).oscillation == 1
    for i in range(29):
        apply(f"other{i}", "p", f"q{i}")
    assert policy.state(ctx).oscillation == 1  # the revert is still in the 30-edit window
    apply("z", "p", "q")
    assert policy.state(ctx).oscillation == 0  # pushed out: the score falls again


async def test_d_repeated_reasoning(recorder: Recorder) -> None:
    thought = "I should read the config file again to find the bug in the parser"
    script = [calls(("read", {"path": f"f{i}"}), reasoning=thought) for i in range(8)]
    outcome = await run(script, loop_health(), recorder)
    assert [w for w in warns(recorder) if w[1] == "repeated_reasoning"] == [
        (5, "repeated_reasoning"),
        (6, "repeated_reasoning"),
        (7, "repeated_reasoning"),
    ]
    assert outcome.stopped_reason == "policy"
    assert outcome.stop is not None
    assert outcome.stop.reason.startswith("Loop stopped: repeated_reasoning")
    # Repeated reasoning is not a redirection trigger: nothing is even recorded as skipped.
    assert all(e.trigger != "repeated_reasoning" for e in recorder.of(RedirectSkippedEvent))


async def test_counters_are_per_run(recorder: Recorder) -> None:
    policy = loop_health()
    same = calls(("read", {"path": "a.py"}))
    await run([same, same, "done"], policy, Recorder())
    await run([same, same, "done"], policy, recorder)
    assert warns(recorder) == []  # 2 + 2 identical calls, but never 3 in one run


# -- redirection ---------------------------------------------------------------------------


def supervised(answer: Any) -> Any:
    """A model that repeats one call forever and answers supervisor calls with ``answer``."""
    seen: dict[str, Any] = {"supervisor": 0, "requests": []}

    async def model(messages: Sequence[Message]) -> Any:
        if messages[0] == SystemMessage(SUPERVISOR_PROMPT):
            seen["supervisor"] += 1
            if isinstance(answer, BaseException):
                raise answer
            if answer == "slow":
                await asyncio.sleep(5)
            return ChatResult(AssistantMessage(answer), Usage(120, 30))
        seen["requests"].append(list(messages))
        return ChatResult(calls(("read", {"path": "a.py"})), Usage(1000, 10))

    return model, seen


async def test_redirect_fires_on_a_warn(recorder: Recorder, snapshot: SnapshotAssertion) -> None:
    model, seen = supervised(
        "1. Read the failing test first\n2. Search for the error text\n- Ask the user"
    )
    policy = loop_health(redirect=redirect(enabled=True, max_per_run=1))
    chat = ScriptedChat(model)
    outcome = await run_conversation(
        chat,
        workspace_tools(),
        [UserMessage("fix")],
        LoopParams(max_turns=7),
        emitter=recorder.emitter,
        policies=[policy],
    )
    (fired,) = recorder.of(RedirectEvent)
    # One small, tool-less, non-streamed call to the run's own model.
    (supervisor,) = [r for r in chat.requests if r.messages[0] == SystemMessage(SUPERVISOR_PROMPT)]
    assert supervisor.tools == ()
    assert supervisor.max_tokens == 400
    assert fired.turn == 4
    assert fired.reason == "repeated_identical_tool"
    assert fired.directions == 3
    assert fired.directions_chars == len("Read the failing test first") + len(
        "Search for the error text"
    ) + len("Ask the user")
    assert fired.usage == Usage(120, 30)
    assert fired.evidence_event_ids
    assert all(isinstance(i, int) for i in fired.evidence_event_ids)
    # The advice goes into the next request only, as a reminder, never into the history.
    fourth = seen["requests"][3][-1].content
    assert "<system-reminder>" in fourth
    assert "Read the failing test first" in fourth
    assert "Read the failing test" not in repr(fired)  # the event does not carry the advice
    assert all("Read the failing test" not in m.content for m in outcome.messages)
    # Its tokens are in the run totals.
    assert outcome.usage.input_tokens == 7 * 1000 + 120
    # After firing, the counter and its window were reset: no warn until 3 new repeats.
    assert warns(recorder)[:2] == [(4, "repeated_identical_tool"), (7, "repeated_identical_tool")]
    assert recorder.view() == snapshot


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (RuntimeError("supervisor down"), "error"),
        ("   ", "empty"),
        ("Just keep going, you are doing fine.", "unparseable"),
    ],
)
async def test_redirect_fails_closed(
    answer: Any, reason: str, recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    model, seen = supervised(answer)
    policy = loop_health(redirect=redirect(enabled=True))
    outcome = await run_conversation(
        ScriptedChat(model),
        workspace_tools(),
        [UserMessage("fix")],
        LoopParams(max_turns=5),
        emitter=recorder.emitter,
        policies=[policy],
    )
    skipped = recorder.of(RedirectSkippedEvent)
    assert [(e.turn, e.trigger, e.reason) for e in skipped] == [
        (4, "repeated_identical_tool", reason),
        (5, "repeated_identical_tool", reason),
    ]
    assert recorder.of(RedirectEvent) == []
    assert all("<system-reminder>" not in r[-1].content for r in seen["requests"])
    assert outcome.stopped_reason == "budget"  # the run went on exactly as it would have
    assert recorder.view() == snapshot


async def test_redirect_times_out(recorder: Recorder) -> None:
    model, _ = supervised("slow")
    policy = loop_health(redirect=redirect(enabled=True, timeout=0.05))
    await run_conversation(
        ScriptedChat(model),
        workspace_tools(),
        [UserMessage("fix")],
        LoopParams(max_turns=4),
        emitter=recorder.emitter,
        policies=[policy],
    )
    assert [e.reason for e in recorder.of(RedirectSkippedEvent)] == ["timeout"]


async def test_redirect_needs_evidence(recorder: Recorder) -> None:
    from agentfsm import RunContext

    ctx = RunContext(params=LoopParams(max_turns=3), history=[])
    ctx.chat = ScriptedChat(["1. anything"])
    verdicts = await redirect(enabled=True).consider(ctx, "no_progress", "3 turns")
    assert [v.event.reason for v in verdicts] == ["empty_evidence"]  # type: ignore[union-attr]


async def test_redirect_disabled_by_default_and_by_env(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch, snapshot: SnapshotAssertion
) -> None:
    monkeypatch.setenv("AGENTFSM_DISABLE_REDIRECT", "1")
    model, seen = supervised("1. x")
    policy = loop_health(redirect=redirect(enabled=True))
    await run_conversation(
        ScriptedChat(model),
        workspace_tools(),
        [UserMessage("fix")],
        LoopParams(max_turns=6),
        emitter=recorder.emitter,
        policies=[policy],
    )
    # Recorded once per run as skipped, reason "disabled"; the supervisor is never asked.
    assert [(e.turn, e.reason) for e in recorder.of(RedirectSkippedEvent)] == [(4, "disabled")]
    assert seen["supervisor"] == 0
    assert recorder.view() == snapshot
    monkeypatch.delenv("AGENTFSM_DISABLE_REDIRECT")
    default = Recorder()
    await run_conversation(
        ScriptedChat(model),
        workspace_tools(),
        [UserMessage("fix")],
        LoopParams(max_turns=6),
        emitter=default.emitter,
        policies=[loop_health()],
    )
    assert [e.reason for e in default.of(RedirectSkippedEvent)] == ["disabled"]


async def test_redirect_capped_per_run(recorder: Recorder, snapshot: SnapshotAssertion) -> None:
    model, seen = supervised("1. try another file")
    policy = loop_health(redirect=redirect(enabled=True, max_per_run=2))
    await run_conversation(
        ScriptedChat(model),
        workspace_tools(),
        [UserMessage("fix")],
        LoopParams(max_turns=13),
        emitter=recorder.emitter,
        policies=[policy],
    )
    assert [e.turn for e in recorder.of(RedirectEvent)] == [4, 7]
    assert [e.reason for e in recorder.of(RedirectSkippedEvent)][:1] == ["max_per_run"]
    assert seen["supervisor"] == 2
    assert recorder.view() == snapshot


def test_evidence_is_bounded_and_pure() -> None:
    from agentfsm.engine._events import LlmEndEvent, ToolCallEndEvent

    events = [
        (
            i,
            ToolCallEndEvent(
                turn=1,
                call=ToolCall("c", "read", {"path": "x" * 500}),
                result=ToolResult(True, "y" * 5000),
            ),
        )
        for i in range(1, 60)
    ] + [(60, LlmEndEvent(turn=2, result=ChatResult(AssistantMessage("thinking"))))]
    first = build_evidence(events, "no_progress", "9 turns", max_events=20, max_chars=2000)
    again = build_evidence(events, "no_progress", "9 turns", max_events=20, max_chars=2000)
    assert first == again
    assert len(first.text) <= 2000 + 100
    assert first.event_ids[-1] == 60
    assert list(first.event_ids) == sorted(first.event_ids)
    assert build_evidence([], "no_progress", "x").text == ""


def test_parse_directions() -> None:
    assert parse_directions("1. a\n2) b\n- c\n* d") == ["a", "b", "c"]
    assert parse_directions("no list here") == []
