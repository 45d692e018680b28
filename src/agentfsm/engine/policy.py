"""Policy hooks: small protocols consulted at fixed states of the machine.

A policy is a plain object implementing any subset of them. Each reads the one
:class:`~agentfsm.engine.context.RunContext` of the run; only the engine changes it (a policy
keeps state of its own in ``ctx.policy_state[name]``, which the engine persists).

=================  ==================  ==============================================
hook               state               may return
=================  ==================  ==============================================
``turn_budget``    whole run           an ``int`` attribute: the run's turn limit
``check_turn``     ``turn_start``      :class:`Stop`, :class:`Warn`, :class:`Remind`,
                                       :class:`Notice` (or several; may be async)
``should_compress`` ``compress_check`` ``bool``; ``compress`` does the rewrite
``shape_request``  ``llm_start``       the messages to send (never stored)
``shape_reply``    ``llm_end``         a replacement :class:`ChatResult`
``on_llm_end``     ``llm_end``         :class:`Remind`
``on_tool_result`` ``run_tools``       :class:`Remind`
``on_turn_end``    end of a turn       :class:`Remind`
``check_final``    ``final_check``     :class:`Retry`
``shape_outcome``  final states        a replacement :class:`LoopOutcome`
=================  ==================  ==============================================
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from attrs import frozen

from .messages import ChatResult, Message

if TYPE_CHECKING:
    from .compaction import CompressionResult
    from .context import RunContext, ToolOutcome
    from .params import LoopOutcome
    from .protocols import ChatFn

__all__ = [
    "Compactor",
    "FinalGate",
    "LlmObserver",
    "Notice",
    "OutcomeShaper",
    "PolicySet",
    "Remind",
    "ReplyShaper",
    "RequestShaper",
    "Retry",
    "Stop",
    "ToolObserver",
    "TurnBudget",
    "TurnGate",
    "TurnObserver",
    "TurnVerdict",
    "Warn",
    "policy_name",
]


@frozen
class Stop:
    """End the run before this turn's LLM call (``stopped_reason="policy"``)."""

    reason: str
    """Why (shown to users, recorded in ``LoopOutcome.stop``)."""


@frozen
class Warn:
    """Something looks wrong; the run goes on (a ``policy_warn`` event reports it)."""

    reason: str
    """What looks wrong."""
    code: str | None = None
    """A stable identifier of the pattern (e.g. ``repeated_identical_tool``)."""


@frozen
class Notice:
    """Ask the engine to emit ``event`` (for policies that report what they did)."""

    event: Any
    """An :data:`~agentfsm.engine.events.AgentEvent`."""


@frozen
class Remind:
    """Queue a ``<system-reminder>`` for the next request only (never stored in history)."""

    text: str
    """The reminder."""


@frozen
class Retry:
    """Refuse the final answer and take one more turn, with a reminder."""

    reminder: str
    """Text the next request carries as a ``<system-reminder>``."""


TurnVerdict: TypeAlias = Stop | Warn | Remind | Notice
"""What a turn gate may return; a gate may also return several (a sequence), or be async."""


@runtime_checkable
class TurnBudget(Protocol):
    """Limits the number of turns (LLM calls) of a run."""

    @property
    def turn_budget(self) -> int:
        """The most turns the run may take."""
        ...


@runtime_checkable
class TurnGate(Protocol):
    """Consulted at ``turn_start`` (after the abort check).

    A gate that only warns or reminds may set ``can_stop = False``: diagrams then do not
    list it on the ``policy_stop`` edge.
    """

    def check_turn(
        self, ctx: RunContext
    ) -> TurnVerdict | Sequence[TurnVerdict] | Awaitable[Any] | None:
        """Stop the run, warn, queue a reminder, emit a notice, or ``None`` to go on."""
        ...


@runtime_checkable
class Compactor(Protocol):
    """Decides when history is compressed (``compress_check``) and compresses it."""

    def should_compress(self, ctx: RunContext) -> bool:
        """Whether this turn compresses before its LLM call."""
        ...

    async def compress(self, ctx: RunContext, chat: ChatFn) -> CompressionResult:
        """Rewrite ``ctx.history`` (returned, not applied: the engine refills the history)."""
        ...


@runtime_checkable
class RequestShaper(Protocol):
    """Shapes what is sent at ``llm_start``; the history itself is left as it is."""

    def shape_request(self, ctx: RunContext, messages: Sequence[Message]) -> Sequence[Message]:
        """The messages to send this turn."""
        ...


@runtime_checkable
class ReplyShaper(Protocol):
    """Rewrites a reply at ``llm_end`` before it enters the history."""

    def shape_reply(self, ctx: RunContext, result: ChatResult) -> ChatResult | None:
        """A replacement result, or ``None`` to keep it."""
        ...


@runtime_checkable
class LlmObserver(Protocol):
    """Told after each LLM call of a turn."""

    def on_llm_end(self, ctx: RunContext) -> Remind | None:
        """Observe; may queue a reminder."""
        ...


@runtime_checkable
class ToolObserver(Protocol):
    """Told after each tool result."""

    def on_tool_result(self, ctx: RunContext, outcome: ToolOutcome) -> Remind | None:
        """Observe; may queue a reminder."""
        ...


@runtime_checkable
class TurnObserver(Protocol):
    """Told when a turn's work is done (after its tools, or before its final check)."""

    def on_turn_end(self, ctx: RunContext) -> Remind | None:
        """Observe; may queue a reminder."""
        ...


@runtime_checkable
class FinalGate(Protocol):
    """Consulted at ``final_check`` when a reply has no tool calls."""

    async def check_final(self, ctx: RunContext) -> Retry | None:
        """Return :class:`Retry` to refuse the answer, ``None`` to accept it."""
        ...


@runtime_checkable
class OutcomeShaper(Protocol):
    """Adjusts the outcome when the run reaches a final state."""

    def shape_outcome(self, ctx: RunContext, outcome: LoopOutcome) -> LoopOutcome | None:
        """A replacement outcome, or ``None`` to keep it."""
        ...


def policy_name(policy: object) -> str:
    """The name a policy is reported under: its ``name`` attribute, else its ``repr``."""
    name = getattr(policy, "name", None)
    return name if isinstance(name, str) else repr(policy)


class PolicySet:
    """Policies sorted by the hooks they implement (done once per run)."""

    __slots__ = (
        "all",
        "compactors",
        "final_gates",
        "llm_observers",
        "outcome_shapers",
        "reply_shapers",
        "request_shapers",
        "tool_observers",
        "turn_budgets",
        "turn_gates",
        "turn_observers",
    )

    def __init__(self, policies: Sequence[object] = ()) -> None:
        self.all = tuple(policies)
        self.turn_budgets = [p for p in self.all if isinstance(p, TurnBudget)]
        self.turn_gates = [p for p in self.all if isinstance(p, TurnGate)]
        self.compactors = [p for p in self.all if isinstance(p, Compactor)]
        self.request_shapers = [p for p in self.all if isinstance(p, RequestShaper)]
        self.reply_shapers = [p for p in self.all if isinstance(p, ReplyShaper)]
        self.llm_observers = [p for p in self.all if isinstance(p, LlmObserver)]
        self.tool_observers = [p for p in self.all if isinstance(p, ToolObserver)]
        self.turn_observers = [p for p in self.all if isinstance(p, TurnObserver)]
        self.final_gates = [p for p in self.all if isinstance(p, FinalGate)]
        self.outcome_shapers = [p for p in self.all if isinstance(p, OutcomeShaper)]

    def max_turns(self, default: int) -> int:
        """The tightest turn limit: ``default`` and every policy's ``turn_budget``."""
        return min([default, *(p.turn_budget for p in self.turn_budgets)])
