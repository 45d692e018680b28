"""``compress``: history compression as a policy, with recovery from context overflow."""

from __future__ import annotations

from agentfsm.engine.compaction import CompressionResult, compress_messages, should_compress
from agentfsm.engine.context import RunContext
from agentfsm.engine.protocols import ChatFn

__all__ = ["compress"]


class compress:
    """Compress older history once the context reaches ``budget_tokens * threshold``.

    The context is the last call's measured input tokens when known (a provider's own count),
    else the history's estimate. Being a compactor, this policy also arms overflow recovery:
    when a call fails with a ``context_overflow`` error, the history is compacted and the call
    sent once more, at most ``MAX_OVERFLOW_COMPACTIONS`` times in one turn.
    """

    def __init__(self, budget_tokens: int, threshold: float = 0.8) -> None:
        if budget_tokens < 1 or not 0 < threshold <= 1:
            raise ValueError("compress needs budget_tokens >= 1 and 0 < threshold <= 1")
        self.budget_tokens = budget_tokens
        self.threshold = threshold

    @property
    def name(self) -> str:
        return repr(self)

    def should_compress(self, ctx: RunContext) -> bool:
        measured = ctx.context_tokens
        tokens = max(measured, ctx.token_estimate) if measured is not None else ctx.token_estimate
        return should_compress(tokens, ctx.non_system_count, self.budget_tokens, self.threshold)

    async def compress(self, ctx: RunContext, chat: ChatFn) -> CompressionResult:
        return await compress_messages(chat, ctx.history, signal=ctx.params.signal)

    def __repr__(self) -> str:
        return f"compress({self.budget_tokens}, threshold={self.threshold})"
