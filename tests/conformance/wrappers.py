"""A forwarding chat function: tests subclass it to break one behaviour of an adapter."""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm.engine._messages import ChatResult, Message, ToolSpec
from agentfsm.engine._protocols import ChatFn, DeltaHandler, SupportsAbort

__all__ = ["Wrapper"]


class Wrapper:
    """Forwards to the project's adapter; subclasses break one behaviour."""

    def __init__(self, inner: ChatFn) -> None:
        self.inner = inner

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
        return await self.inner(
            messages,
            tools,
            temperature=temperature,
            max_tokens=max_tokens,
            signal=signal,
            on_delta=on_delta,
        )

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if callable(close):
            await close()
