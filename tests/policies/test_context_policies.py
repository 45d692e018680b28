"""compress (with overflow recovery), prune_tool_results, reminders, text tool calls."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from agentfsm import Agent, LoopParams, UserMessage, run_conversation
from agentfsm.engine._compression import COMPRESSION_SYSTEM_PROMPT
from agentfsm.engine._errors import ContextOverflowUnresolved
from agentfsm.engine._messages import (
    AssistantMessage,
    ChatResult,
    Message,
    ToolCall,
    ToolMessage,
    Usage,
)
from agentfsm.policies import (
    compress,
    presets,
    prune_tool_results,
    remind_when,
    text_tool_calls,
    turns_at_least,
)
from agentfsm.policies._prune import prune_marker
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from ..helpers import Recorder


class Overflow(Exception):
    """What a provider adapter raises when the request does not fit the window."""

    kind = "context_overflow"


def long_history(n: int = 12) -> list[Message]:
    return [
        UserMessage(f"question {i} " * 20) if i % 2 == 0 else AssistantMessage(f"answer {i}")
        for i in range(n)
    ]


def is_summary_call(messages: Sequence[Message]) -> bool:
    return bool(messages) and messages[0].content == COMPRESSION_SYSTEM_PROMPT


async def test_compress_policy_uses_measured_context(recorder: Recorder) -> None:
    calls: list[int] = []

    def model(messages: Sequence[Message]) -> Any:
        if is_summary_call(messages):
            return ChatResult(AssistantMessage("summary"), Usage(50, 5))
        calls.append(len(messages))
        # The provider reports a context far above the estimate.
        return ChatResult(
            tool_reply(("t", {})) if len(calls) < 2 else AssistantMessage("done"), Usage(9_000, 10)
        )

    outcome = await run_conversation(
        ScriptedChat(model),
        ScriptedTools({"t": lambda: "x"}),
        long_history(),
        LoopParams(max_turns=5),
        emitter=recorder.emitter,
        policies=[compress(10_000)],
    )
    # Turn 1: estimate ~130 tokens, nothing measured yet: no compression. Turn 2: the
    # measured 9,000 >= 8,000 compresses.
    assert recorder.types.count("compress_start") == 1
    assert recorder.types.index("compress_start") > recorder.types.index("tool_call_end")
    assert outcome.stopped_reason == "final"


async def test_overflow_compacts_and_sends_once_more(
    recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    sent: list[int] = []

    def model(messages: Sequence[Message]) -> Any:
        if is_summary_call(messages):
            return "summary of the early part"
        sent.append(len(messages))
        if len(sent) == 1:
            raise Overflow("prompt is too long: 210000 tokens > 200000 maximum")
        return "answer"

    outcome = await run_conversation(
        ScriptedChat(model),
        None,
        long_history(),
        LoopParams(max_turns=3),
        emitter=recorder.emitter,
        policies=[compress(1_000_000)],
    )
    assert outcome.stopped_reason == "final"
    assert outcome.turns_used == 1
    assert sent == [12, 1 + 8]  # the retry went out with [summary, recent 8]
    assert recorder.types == [
        "turn_start",
        "llm_start",
        "compress_start",
        "compress_end",
        "llm_start",
        "llm_end",
        "final",
        "turn_end",
    ]
    assert recorder.view() == snapshot


async def test_overflow_gives_up_after_three_compactions(recorder: Recorder) -> None:
    original = Overflow("context_length_exceeded")

    def model(messages: Sequence[Message]) -> Any:
        if is_summary_call(messages):
            return "summary"
        raise original

    with pytest.raises(ContextOverflowUnresolved, match="after 3 compactions") as raised:
        await run_conversation(
            ScriptedChat(model),
            None,
            long_history(40),
            LoopParams(max_turns=3),
            emitter=recorder.emitter,
            policies=[compress(1_000_000)],
        )
    assert raised.value.__cause__ is original
    assert recorder.types == [
        "turn_start",
        *["llm_start", "compress_start", "compress_end"] * 3,
        "llm_start",
        "error",
    ]


async def test_overflow_without_a_compactor_fails_as_is() -> None:
    original = Overflow("too long")
    with pytest.raises(Overflow):
        await run_conversation(
            ScriptedChat([original]),
            None,
            long_history(),
            LoopParams(max_turns=2, context_budget_tokens=10**6),
        )


def tool_turn(call_id: str, content: str) -> list[Message]:
    return [
        AssistantMessage("", tool_calls=(ToolCall(call_id, "read", {}),)),
        ToolMessage(call_id, content),
    ]


async def test_prune_state_across_turns(snapshot: SnapshotAssertion) -> None:
    prior: list[Message] = [
        UserMessage("start"),
        *tool_turn("old_a", "a" * 5000),
        *tool_turn("old_b", "b" * 3000),
        *tool_turn("old_c", "c" * 1000),
        AssistantMessage("read them all"),
        UserMessage("continue"),
    ]
    outputs = iter(["d" * 4000, "e" * 6000])
    tools = ScriptedTools({"read": lambda: next(outputs)})
    chat = ScriptedChat(
        [tool_reply(ToolCall("r1", "read", {})), tool_reply(ToolCall("r2", "read", {})), "done"]
    )
    outcome = await run_conversation(
        chat, tools, prior, LoopParams(max_turns=5), policies=[prune_tool_results(8000)]
    )

    def tool_contents(request_index: int) -> dict[str, str]:
        return {
            m.tool_call_id + ("" if m.content[0] != "[" else "*"): m.content
            for m in chat.requests[request_index].messages
            if isinstance(m, ToolMessage)
        }

    first, second, third = (tool_contents(i) for i in range(3))
    # Request 1: 9,000 chars of fresh results, over 8,000: the largest (a) is replaced.
    assert first["old_a*"] == prune_marker("a" * 5000)
    assert first["old_b"] == "b" * 3000
    # Request 2: the new 4,000-char result is protected (latest), b and c are frozen now,
    # so nothing more is pruned even though the total is over budget.
    assert second["old_a*"] == first["old_a*"]  # re-sent byte for byte
    assert second["old_b"] == "b" * 3000
    assert second["r1"] == "d" * 4000
    # Request 3: the 4,000 result was sent whole once: frozen, never shrunk later.
    assert third["r1"] == "d" * 4000
    assert third["r2"] == "e" * 6000
    assert third["old_a*"] == first["old_a*"]
    # The history itself is never rewritten.
    assert all(not m.content.startswith("[tool result pruned") for m in outcome.messages)
    assert [sorted(tool_contents(i)) for i in range(3)] == snapshot


async def test_prune_state_survives_resume(tmp_path: Path) -> None:
    prior: list[Message] = [
        UserMessage("start"),
        *tool_turn("old", "o" * 7000),
        AssistantMessage("noted"),
    ]
    outputs = iter(["B" * 6000, "C" * 100])
    chat = ScriptedChat(
        [tool_reply(("read", {})), tool_reply(ToolCall("c2", "read", {})), "done", "resumed"]
    )
    engine = Agent(
        chat,
        ScriptedTools({"read": lambda: next(outputs)}),
        session_dir=tmp_path,
        policies=[prune_tool_results(5000)],
    )
    await engine.run("go", history=prior)
    await engine.run("again", resume="latest")
    resumed = {
        m.tool_call_id: m.content for m in chat.requests[-1].messages if isinstance(m, ToolMessage)
    }
    # "old" was replaced in the first run: the resumed run re-sends the same marker.
    assert resumed["old"] == prune_marker("o" * 7000)
    # B was sent whole (frozen): after resume it must stay whole, although the total is over
    # budget and, without the recorded state, B would now be the largest fresh result.
    assert resumed["call_1"] == "B" * 6000
    session = sorted(tmp_path.glob("*.jsonl"))[0].read_text("utf-8")
    assert '"policy_state"' in session


async def test_reminders_reach_one_request_and_no_session_record(tmp_path: Path) -> None:
    chat = ScriptedChat([tool_reply(("t", {})), tool_reply(("t", {})), "done"])
    engine = Agent(
        chat,
        ScriptedTools({"t": lambda: "x"}),
        session_dir=tmp_path,
        policies=[remind_when(turns_at_least(1), "Double-check the file paths.")],
    )
    recorder = Recorder(engine.events)
    outcome = await engine.run("go")
    carrying = ["Double-check" in r.messages[-1].content for r in chat.requests]
    assert carrying == [False, True, False]
    assert recorder.types.count("reminder") == 1
    text = Path(outcome.session_path or "").read_text("utf-8")
    assert "Double-check" not in text
    assert "system-reminder" not in text


async def test_text_tool_call_fallback(recorder: Recorder) -> None:
    calls = [{"name": "read", "arguments": json.dumps({"path": "a.py"})}, {"name": "ls"}]
    block = f"[TOOL_CALLS]{json.dumps(calls)}[/TOOL_CALLS]"
    chat = ScriptedChat([f"Let me look.\n{block}", "done"])
    tools = ScriptedTools({"read": lambda path: f"contents of {path}", "ls": lambda: "a.py"})
    outcome = await run_conversation(
        chat,
        tools,
        [UserMessage("go")],
        LoopParams(max_turns=3),
        emitter=recorder.emitter,
        policies=[text_tool_calls()],
    )
    first = outcome.messages[1]
    assert isinstance(first, AssistantMessage)
    assert first.content == "Let me look."
    assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [
        ("text_call_1_1", "read", {"path": "a.py"}),
        ("text_call_1_2", "ls", {}),
    ]
    assert [m.content for m in outcome.messages if isinstance(m, ToolMessage)] == [
        "contents of a.py",
        "a.py",
    ]
    assert outcome.final == AssistantMessage("done")


@pytest.mark.parametrize(
    "text",
    [
        "[TOOL_CALLS] not json [/TOOL_CALLS]",
        '[TOOL_CALLS][{"arguments": {}}][/TOOL_CALLS]',
        '[TOOL_CALLS][{"name": "x", "arguments": "{broken"}][/TOOL_CALLS]',
        "no block at all",
    ],
)
async def test_malformed_text_tool_calls_stay_text(text: str) -> None:
    outcome = await run_conversation(
        ScriptedChat([text]),
        None,
        [UserMessage("go")],
        LoopParams(max_turns=2),
        policies=[text_tool_calls()],
    )
    assert outcome.final == AssistantMessage(text)


def test_coding_agent_preset() -> None:
    names = [
        repr(p) for p in presets.coding_agent(context_budget_tokens=100_000, spend_tokens=10**6)
    ]
    assert names == [
        "wrap_up()",
        "prune_tool_results(200000)",
        "text_tool_calls()",
        "loop_health(repeated_calls=3, stagnant_turns=8, oscillations=2, similar_reasoning=3)",
        "verify('auto')",
        "verifier(max_turns=15)",
        "compress(100000, threshold=0.8)",
        "spend_limit(1000000)",
    ]
    assert presets.minimal() == []
    without_review = presets.coding_agent(review=False)
    assert "verifier(max_turns=15)" not in [repr(p) for p in without_review]
