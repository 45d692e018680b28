"""``Router``: fail over from one provider to the next."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from agentfsm.engine import (
    ChatDelta,
    ChatFn,
    ChatResult,
    DeltaHandler,
    Message,
    SupportsAbort,
    ToolSpec,
)

from ._errors import ProviderError
from ._spans import ERROR_TYPE, FAILOVER_EVENT, span_event

__all__ = ["FAILOVER_KINDS", "Router"]

logger = logging.getLogger("agentfsm.providers")

FAILOVER_KINDS = frozenset(
    {
        "rate_limit",
        "quota",
        "overloaded",
        "server",
        "connection",
        "timeout",
        "bad_response",
        "too_large",
    }
)
"""Failures that send a call to the next provider (after that provider's own retries).
Quota is one: another account or vendor may still have some; so are replies that break the
wire format or its bounds (``bad_response``, ``too_large``)."""


class Router:
    """A :class:`ChatFn` that tries providers in order.

    Each provider retries on its own first; when it still fails with a failover kind, the
    next one is asked. Walking stops as soon as the signal is aborted, and never once any
    output was streamed (that would duplicate text). The last error is raised when all fail.
    """

    def __init__(self, providers: Sequence[ChatFn], *, name: str = "router") -> None:
        if not providers:
            raise ValueError("Router needs at least one provider")
        self.providers = tuple(providers)
        self.name = name
        self.attempts: list[str] = []
        """Which providers the latest call tried, in order (for tests and traces)."""

    def __repr__(self) -> str:
        return f"Router({list(self.providers)!r})"

    async def __call__(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        signal: SupportsAbort | None = None,
        on_delta: DeltaHandler | None = None,
    ) -> ChatResult:
        self.attempts = []
        last: ProviderError | None = None
        for provider in self.providers:
            if signal is not None and signal.aborted:
                raise ProviderError(
                    "aborted", "aborted before the next provider", provider=self.name
                )
            streamed = [False]

            def forward(delta: ChatDelta, streamed: list[bool] = streamed) -> None:
                streamed[0] = True
                if on_delta is not None:
                    on_delta(delta)

            label = getattr(provider, "name", None) or repr(provider)
            self.attempts.append(str(label))
            try:
                return await provider(
                    messages,
                    tools,
                    temperature=temperature,
                    max_tokens=max_tokens,
                    signal=signal,
                    on_delta=forward if on_delta is not None else None,
                )
            except ProviderError as error:
                if error.kind not in FAILOVER_KINDS or streamed[0] or error.response_started:
                    raise
                logger.warning("agentfsm: %s failed (%s); trying the next provider", label, error)
                span_event(
                    FAILOVER_EVENT, {"agentfsm.provider": str(label), ERROR_TYPE: error.kind}
                )
                last = error
        assert last is not None
        raise last
