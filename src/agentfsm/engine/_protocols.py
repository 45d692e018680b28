"""The narrow seams the loop depends on: chat function, tool runner, abort signal.

The loop never imports a provider or a tool executor; it talks to these protocols only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, Protocol, runtime_checkable

from attrs import frozen

from ._messages import ChatResult, Message, ToolCall, ToolResult, ToolSpec

__all__ = [
    "ChatDelta",
    "ChatFn",
    "DeltaHandler",
    "SupportsAbort",
    "ToolRunner",
]


@runtime_checkable
class SupportsAbort(Protocol):
    """Anything with an ``aborted`` flag, such as :class:`agentfsm.AbortController`'s signal."""

    @property
    def aborted(self) -> bool:
        """Whether cancellation was requested."""
        ...


@frozen
class ChatDelta:
    """A piece of a streamed answer."""

    kind: Literal["text", "thinking"]
    """Visible text or reasoning text."""
    text: str
    """The new characters."""


DeltaHandler = Callable[[ChatDelta], object]
"""Receives streamed pieces while a chat call is in flight."""


class ChatFn(Protocol):
    """One call to a chat model.

    Implementations must not mutate ``messages``; they raise on failure (after their own
    retries), and the loop treats that as fatal.
    """

    async def __call__(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        signal: SupportsAbort | None = None,
        on_delta: DeltaHandler | None = None,
    ) -> ChatResult: ...


class ToolRunner(Protocol):
    """Executes tool calls. ``run`` never raises: failures come back as ``ok=False``."""

    def specs(self) -> Sequence[ToolSpec]:
        """The tools offered to the model."""
        ...

    async def run(self, call: ToolCall, *, signal: SupportsAbort | None = None) -> ToolResult:
        """Run one call."""
        ...
