"""The narrow seams the loop depends on: chat function, tool runner, signal, policy hooks.

The loop never imports a provider or a tool executor; it talks to these protocols only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from attrs import frozen

from .messages import ChatResult, Message, ToolCall, ToolResult, ToolSpec

if TYPE_CHECKING:
    from .context import RunContext

__all__ = [
    "ChatDelta",
    "ChatFn",
    "DeltaHandler",
    "FinalGate",
    "Retry",
    "Stop",
    "SupportsAbort",
    "ToolRunner",
    "TurnGate",
    "policy_name",
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


@frozen
class Stop:
    """A turn gate's verdict: end the run before this turn's LLM call."""

    reason: str
    """Why the run stops (shown to users, recorded in the outcome)."""


@frozen
class Retry:
    """A final gate's verdict: refuse the final answer and take one more turn."""

    reminder: str
    """Text the next request carries as a ``<system-reminder>`` (never stored in history)."""


@runtime_checkable
class TurnGate(Protocol):
    """Consulted at ``turn_start`` (after the abort check); may stop the run."""

    def check_turn(self, ctx: RunContext) -> Stop | None:
        """Return :class:`Stop` to end the run, ``None`` to go on. Must not mutate ``ctx``."""
        ...


@runtime_checkable
class FinalGate(Protocol):
    """Consulted at ``final_check`` when a reply has no tool calls; may ask for one more turn."""

    async def check_final(self, ctx: RunContext) -> Retry | None:
        """Return :class:`Retry` to refuse the answer, ``None`` to accept it."""
        ...


def policy_name(policy: object) -> str:
    """The name a policy is reported under: its ``name`` attribute, else its ``repr``."""
    name = getattr(policy, "name", None)
    return name if isinstance(name, str) else repr(policy)
