"""Compression: estimates, gating, partition, transcript, summary message and fallback."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from agentfsm import (
    AssistantMessage,
    ChatResult,
    LoopParams,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    run_conversation,
)
from agentfsm.engine._compression import (
    COMPRESSION_SYSTEM_PROMPT,
    KEEP_RECENT_TURNS,
    TRANSCRIPT_MAX_CHARS,
    compress_messages,
    render_transcript,
    should_compress,
)
from agentfsm.engine._events import CompressEndEvent, CompressStartEvent
from agentfsm.engine._tokens import (
    estimate_message_tokens,
    estimate_messages_tokens,
    estimate_text_tokens,
)
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from ..helpers import Recorder
from ..oracle import Oracle


def test_compression_system_prompt_is_verbatim() -> None:
    assert COMPRESSION_SYSTEM_PROMPT == (
        "You compress agent conversation history into terse factual summaries. Preserve: "
        "goals, decisions, file paths, commands run, errors, open questions. Output plain "
        "text only."
    )


@pytest.mark.parametrize(("chars", "tokens"), [(0, 0), (1, 1), (4, 1), (5, 2), (8, 2), (9, 3)])
def test_estimate_text_tokens_is_ceil_chars_over_four(chars: int, tokens: int) -> None:
    assert estimate_text_tokens("x" * chars) == tokens


def test_message_estimates() -> None:
    call = ToolCall("c1", "read", {"path": "a.py"})
    calls_json = '[{"id":"c1","name":"read","arguments":{"path":"a.py"}}]'
    assert estimate_message_tokens(UserMessage("abcdefgh")) == 2
    assert estimate_message_tokens(AssistantMessage("abcd")) == 1
    assert estimate_message_tokens(AssistantMessage("abcd", tool_calls=(call,))) == 1 + (
        -(-len(calls_json) // 4)
    )
    assert estimate_message_tokens(ToolMessage("c1", "abcd")) == 1 + 8
    assert estimate_messages_tokens([UserMessage("abcd"), ToolMessage("c", "")]) == 1 + 8


def test_gate_skips_without_budget() -> None:
    assert not should_compress(10**9, 100, None, 0.8)


def test_gate_compares_estimate_with_budget_times_threshold() -> None:
    assert not should_compress(79, 20, 100, 0.8)
    assert should_compress(80, 20, 100, 0.8)
    assert should_compress(50, 20, 100, 0.5)


def test_gate_needs_more_than_eight_non_system_messages() -> None:
    assert not should_compress(1000, KEEP_RECENT_TURNS, 100, 0.8)
    assert should_compress(1000, KEEP_RECENT_TURNS + 1, 100, 0.8)


def conversation(n: int) -> list[Message]:
    history: list[Message] = [SystemMessage("sys")]
    for i in range(n):
        history.append(UserMessage(f"u{i}") if i % 2 == 0 else AssistantMessage(f"a{i}"))
    return history


def test_transcript_lines_and_truncation() -> None:
    call = ToolCall("c1", "read", {"path": "a.py"})
    text = render_transcript(
        [UserMessage("hi"), AssistantMessage("", tool_calls=(call,)), ToolMessage("c1", "body")]
    )
    assert text == (
        "[user] hi\n"
        '[assistant]  tool_calls=[{"id":"c1","name":"read","arguments":{"path":"a.py"}}]\n'
        "[tool] body"
    )
    long = render_transcript([UserMessage("x" * 30_000)])
    assert len(long) == TRANSCRIPT_MAX_CHARS == 24_000


async def test_compress_messages_partitions_and_summarizes(snapshot: SnapshotAssertion) -> None:
    history = conversation(12)
    chat = ScriptedChat([ChatResult(AssistantMessage("  the summary  "), Usage(50, 5))])
    result = await compress_messages(chat, history)
    (request,) = chat.requests
    assert request.messages[0] == SystemMessage(COMPRESSION_SYSTEM_PROMPT)
    assert request.messages[1] == UserMessage(render_transcript(history[1:5]))
    assert request.tools == ()
    assert result.messages == [
        SystemMessage("sys"),
        UserMessage("[context summary of earlier turns]\nthe summary\n[end summary]"),
        *history[-8:],
    ]
    assert result.summary_chars == len("the summary")
    assert result.usage == Usage(50, 5)
    assert [m.content for m in request.messages] == snapshot


async def test_compress_messages_falls_back_on_error(caplog: pytest.LogCaptureFixture) -> None:
    history = conversation(12)
    chat = ScriptedChat([RuntimeError("summarizer down")])
    with caplog.at_level(logging.WARNING, logger="agentfsm"):
        result = await compress_messages(chat, history)
    assert result.messages == history
    assert result.summary_chars == 0
    assert any(
        r.levelno == logging.WARNING and "summarizer down" in r.getMessage() for r in caplog.records
    )


def summarizing(reply: Any) -> Any:
    """A scripted model that answers summarizer calls with ``summary`` and others by ``reply``."""

    def script(messages: Sequence[Message]) -> Any:
        if messages and messages[0] == SystemMessage(COMPRESSION_SYSTEM_PROMPT):
            return ChatResult(AssistantMessage("goals: test"), Usage(30, 3))
        return reply(messages)

    return script


async def test_compression_in_the_loop(
    oracle: Oracle, recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    history = conversation(11)  # 11 non-system messages, 11 tokens
    seen: list[list[str]] = []

    def reply(messages: Sequence[Message]) -> Any:
        seen.append([m.role for m in messages])
        return ChatResult(AssistantMessage("done"), Usage(10, 1))

    outcome = await run_conversation(
        ScriptedChat(summarizing(reply)),
        ScriptedTools({}),
        history,
        LoopParams(max_turns=2, context_budget_tokens=20, compress_threshold=0.5),
        emitter=recorder.emitter,
    )
    assert recorder.types == [
        "turn_start",
        "compress_start",
        "compress_end",
        "llm_start",
        "llm_end",
        "final",
        "turn_end",
    ]
    start = recorder.of(CompressStartEvent)[0]
    assert start.estimated_tokens == estimate_messages_tokens(history)
    assert recorder.of(CompressEndEvent)[0].summary_chars == len("goals: test")
    # The model's call saw [system, summary, recent 8].
    assert seen == [["system", "user", *[m.role for m in history[-8:]]]]
    assert outcome.messages[1].content.startswith("[context summary of earlier turns]\n")
    assert len(outcome.messages) == 1 + 1 + 8 + 1
    # The summarizer's tokens count in the run totals.
    assert outcome.usage == Usage(40, 4)
    assert history == conversation(11)  # the caller's list is untouched
    assert recorder.view() == snapshot


async def test_compression_fallback_in_the_loop(
    oracle: Oracle,
    recorder: Recorder,
    snapshot: SnapshotAssertion,
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = conversation(11)

    def script(messages: Sequence[Message]) -> Any:
        if messages[0] == SystemMessage(COMPRESSION_SYSTEM_PROMPT):
            raise ConnectionError("summarizer unreachable")
        return "done"

    with caplog.at_level(logging.WARNING, logger="agentfsm"):
        outcome = await run_conversation(
            ScriptedChat(script),
            None,
            history,
            LoopParams(max_turns=2, context_budget_tokens=20, compress_threshold=0.5),
            emitter=recorder.emitter,
        )
    assert recorder.types == [
        "turn_start",
        "compress_start",
        "compress_end",
        "llm_start",
        "llm_end",
        "final",
        "turn_end",
    ]
    assert recorder.of(CompressEndEvent)[0].summary_chars == 0
    assert outcome.stopped_reason == "final"
    assert outcome.messages[:-1] == history  # unchanged, then the answer
    assert "summarizer unreachable" in caplog.text
    assert recorder.view() == snapshot


async def test_no_compression_without_budget_or_below_threshold(oracle: Oracle) -> None:
    for params in (
        LoopParams(max_turns=1),
        LoopParams(max_turns=1, context_budget_tokens=10_000),
    ):
        recorder = Recorder()
        await run_conversation(
            ScriptedChat(["ok"]),
            None,
            conversation(20),
            params,
            emitter=recorder.emitter,
        )
        assert "compress_start" not in recorder.types


async def test_no_compression_with_eight_or_fewer_non_system_messages(
    oracle: Oracle,
) -> None:
    recorder = Recorder()
    history: list[Message] = [SystemMessage("s"), *[UserMessage("x" * 400) for _ in range(8)]]
    await run_conversation(
        ScriptedChat(["ok"]),
        None,
        history,
        LoopParams(max_turns=1, context_budget_tokens=10),
        emitter=recorder.emitter,
    )
    assert "compress_start" not in recorder.types


async def test_compression_refills_the_same_list(oracle: Oracle) -> None:
    ids: list[int] = []

    def reply(messages: Sequence[Message]) -> Any:
        ids.append(id(messages))
        return tool_reply(("noop", {})) if len(ids) < 3 else "done"

    recorder = Recorder()
    outcome = await run_conversation(
        ScriptedChat(summarizing(reply)),
        ScriptedTools({"noop": lambda: "x" * 200}),
        conversation(11),
        LoopParams(max_turns=5, context_budget_tokens=40),
        emitter=recorder.emitter,
    )
    assert [e.summary_chars for e in recorder.of(CompressEndEvent)][:1] == [len("goals: test")]
    assert len(set(ids)) == 1
    assert ids[0] == id(outcome.messages)
