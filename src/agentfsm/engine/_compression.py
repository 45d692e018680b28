"""History compression: summarize the older part of the history with the run's own model.

Compression is an optimization, never a correctness requirement: when the summarizer
fails, the history is returned unchanged and the run goes on.

The kept messages form a valid provider history on their own: a tool result among them
whose assistant call was summarized away (at most the head of the kept slice) becomes a
user message ``[result of tool call <id>]\n<content>`` in its place, so no chat function,
shipped or the user's own, ever receives a tool message without its call.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from attrs import frozen

from ._messages import AssistantMessage, Message, SystemMessage, ToolMessage, Usage, UserMessage
from ._protocols import ChatFn, SupportsAbort
from ._tokens import tool_calls_json

if TYPE_CHECKING:
    from ._context import RunContext

__all__ = [
    "COMPRESSION_SYSTEM_PROMPT",
    "KEEP_RECENT_TURNS",
    "SUMMARY_PREFIX",
    "SUMMARY_SUFFIX",
    "TRANSCRIPT_MAX_CHARS",
    "Compression",
    "CompressionResult",
    "compress_messages",
    "detach_orphaned_results",
    "render_transcript",
    "should_compress",
]

logger = logging.getLogger("agentfsm.engine")

COMPRESSION_SYSTEM_PROMPT = (
    "You compress agent conversation history into terse factual summaries. Preserve: goals, "
    "decisions, file paths, commands run, errors, open questions. Output plain text only."
)
"""The summarizer's system prompt."""

KEEP_RECENT_TURNS = 8
"""Non-system messages kept verbatim at the end of the history."""

TRANSCRIPT_MAX_CHARS = 24_000
"""The rendered transcript sent to the summarizer is cut at this length."""

SUMMARY_PREFIX = "[context summary of earlier turns]\n"
SUMMARY_SUFFIX = "\n[end summary]"


def should_compress(
    estimated_tokens: int,
    non_system_count: int,
    budget_tokens: int | None,
    threshold: float,
) -> bool:
    """The compression gate.

    Skipped when there is no budget, when the estimate is below ``budget * threshold``, or
    when the history has :data:`KEEP_RECENT_TURNS` or fewer non-system messages.
    """
    if budget_tokens is None:
        return False
    if estimated_tokens < budget_tokens * threshold:
        return False
    return non_system_count > KEEP_RECENT_TURNS


def render_transcript(messages: Sequence[Message]) -> str:
    """One ``[role] content tool_calls=…`` line per message, cut at 24,000 characters."""
    lines = []
    for message in messages:
        line = f"[{message.role}] {message.content}"
        if isinstance(message, AssistantMessage) and message.tool_calls:
            line += f" tool_calls={tool_calls_json(message.tool_calls)}"
        lines.append(line)
    return "\n".join(lines)[:TRANSCRIPT_MAX_CHARS]


def detach_orphaned_results(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with every tool result whose call is not in the assistant message before
    it turned into a user message ``[result of tool call <id>]\n<content>`` (the text the
    shipped adapters used to send for it)."""
    out: list[Message] = []
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, AssistantMessage):
            open_calls = {call.id for call in message.tool_calls}
        elif isinstance(message, ToolMessage) and message.tool_call_id not in open_calls:
            message = UserMessage(
                f"[result of tool call {message.tool_call_id}]\n{message.content}"
            )
        elif not isinstance(message, ToolMessage):
            open_calls = set()
        out.append(message)
    return out


@frozen
class CompressionResult:
    """What :func:`compress_messages` produced."""

    messages: list[Message]
    """``[*system, summary, *recent]``, or the input unchanged when summarizing failed."""
    summary_chars: int
    """Length of the summary text; 0 on fallback."""
    usage: Usage | None = None
    """Tokens the summarizer call used."""


async def compress_messages(
    chat: ChatFn,
    messages: Sequence[Message],
    *,
    signal: SupportsAbort | None = None,
    pinned: int = 0,
) -> CompressionResult:
    """Summarize all but the last :data:`KEEP_RECENT_TURNS` non-system messages.

    The older slice goes to ``chat`` with :data:`COMPRESSION_SYSTEM_PROMPT`; its answer
    becomes one user message between the system messages and the recent ones; a recent
    tool result whose call was in the older slice becomes a user message (see
    :func:`detach_orphaned_results`). The first ``pinned`` non-system messages are kept as
    they are, between the system messages and the summary (``RunContext.pinned``). Any
    error (or an empty summary) is logged as a warning and the input comes back unchanged.
    """
    system = [m for m in messages if isinstance(m, SystemMessage)]
    rest = [m for m in messages if not isinstance(m, SystemMessage)]
    kept_first, rest = rest[:pinned], rest[pinned:]
    if len(rest) <= KEEP_RECENT_TURNS:
        return CompressionResult(list(messages), 0)
    older, recent = rest[:-KEEP_RECENT_TURNS], rest[-KEEP_RECENT_TURNS:]
    request: list[Message] = [
        SystemMessage(COMPRESSION_SYSTEM_PROMPT),
        UserMessage(render_transcript(older)),
    ]
    try:
        result = await chat(request, (), signal=signal)
    except Exception as exc:
        logger.warning("agentfsm: compression failed, keeping history unchanged: %s", exc)
        return CompressionResult(list(messages), 0)
    summary = result.message.content.strip()
    if not summary:
        logger.warning("agentfsm: compression returned an empty summary, keeping history")
        return CompressionResult(list(messages), 0, result.usage)
    summary_message = UserMessage(f"{SUMMARY_PREFIX}{summary}{SUMMARY_SUFFIX}")
    kept = detach_orphaned_results(recent)
    return CompressionResult(
        [*system, *kept_first, summary_message, *kept], len(summary), result.usage
    )


class Compression:
    """The compressor: summarize older history once the context reaches
    ``budget_tokens * threshold``. The one implementation behind both ways of asking for it.

    ``LoopParams(context_budget_tokens=..., compress_threshold=...)`` builds one with the core
    loop's rules (``measured=False, recovers_overflow=False``: the history's estimate decides,
    and a context-overflow error fails the run). The ``compress`` policy is this class with
    the coding agent's rules: the context is the last call's measured input tokens when the
    provider reported them (the larger of that and the estimate), and a ``context_overflow``
    error compresses and resends, at most ``MAX_OVERFLOW_COMPACTIONS`` times in one turn.
    A run compresses through one of them: a compressor policy replaces the params' one.
    """

    def __init__(
        self,
        budget_tokens: int,
        threshold: float = 0.8,
        *,
        measured: bool = True,
        recovers_overflow: bool = True,
    ) -> None:
        if isinstance(budget_tokens, bool) or budget_tokens < 1 or not 0 < threshold <= 1:
            raise ValueError("compression needs budget_tokens >= 1 and 0 < threshold <= 1")
        self.budget_tokens = budget_tokens
        self.threshold = threshold
        self.measured = measured
        self.recovers_overflow = recovers_overflow

    @property
    def name(self) -> str:
        """How the compressor is reported (its repr)."""
        return repr(self)

    def should_compress(self, ctx: RunContext) -> bool:
        """The estimate (or the measured context) reached the threshold, with more than
        :data:`KEEP_RECENT_TURNS` non-system messages."""
        tokens = ctx.token_estimate
        if self.measured:
            measured = ctx.context_tokens
            if measured is not None and measured > tokens:
                tokens = measured
        if tokens < self.budget_tokens * self.threshold:
            return False  # the usual answer, without counting the messages
        return should_compress(tokens, ctx.non_system_count, self.budget_tokens, self.threshold)

    async def compress(self, ctx: RunContext, chat: ChatFn) -> CompressionResult:
        """:func:`compress_messages` of the run's history (its pinned messages kept)."""
        return await compress_messages(
            chat, ctx.history, signal=ctx.params.signal, pinned=ctx.pinned
        )

    def __repr__(self) -> str:
        return f"compress({self.budget_tokens}, threshold={self.threshold})"
