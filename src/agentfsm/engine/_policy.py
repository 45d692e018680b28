"""Policy hooks: small protocols consulted at fixed states of the machine.

A policy is a plain object implementing any subset of them (:data:`Policy` is their union,
so the type checker sees a policy that implements none). Each reads the one
:class:`~agentfsm.engine._context.RunContext` of the run; only the engine changes it (a policy
keeps scratch state through ``ctx.state(self, factory)``, durable state through
``ctx.durable_state(self, factory)``, which the agent persists with the session).

Every hook may be sync or async. The runner checks each answer: a value the hook does not
allow is a :class:`~agentfsm.engine._errors.PolicyVerdictError` (a ``TypeError``) naming the
policy and the hook; a hook that raises ends the run with an ``error`` event and a
:class:`~agentfsm.engine._errors.PolicyError` naming the policy; an immediate interrupt
(``Agent``) cuts a running async hook short, and it answers nothing (:func:`consult` is the
one way a hook is called). An object that implements no
hook, or has a method one letter off a hook's name (``check_trun``), is a ``TypeError``
when the policies are given (``Agent(...)``, ``run_conversation(...)``).

=================  ==================  ==============================================
hook               state               may return
=================  ==================  ==============================================
``turn_budget``    whole run           an ``int`` attribute: the run's turn limit
``check_turn``     ``turn_start``      :class:`Stop`, :class:`Warn`, :class:`Remind`,
                                       :class:`Notice` (or several; may be async)
``should_compress`` ``compress_check`` ``bool``; ``compress`` (``compress``) rewrites
``shape_request``  ``llm_start``       the messages to send (never stored)
``shape_reply``    ``llm_end``         a replacement :class:`ChatResult`
``on_llm_end``     ``llm_end``         :class:`Remind`
``on_tool_result`` ``run_tools``       :class:`Remind`
``on_turn_end``    end of a turn       :class:`Remind`
``check_final``    ``final_check``     :class:`Retry`, :class:`Notice` (or both)
``shape_outcome``  final states        a replacement :class:`LoopOutcome`
=================  ==================  ==============================================
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeAlias, runtime_checkable

from attrs import frozen

from ._compression import Compression, CompressionResult
from ._errors import PolicyError, PolicyVerdictError, RunRefused
from ._messages import ChatResult, Message
from ._params import LoopOutcome
from ._policy_check import HOOK_NAMES, check_policies, hooks_of, policy_name

if TYPE_CHECKING:
    from ._context import RunContext, ToolOutcome
    from ._params import LoopParams
    from ._protocols import ChatFn


__all__ = [
    "HOOK_NAMES",
    "Compressor",
    "FinalGate",
    "FinalVerdict",
    "LlmObserver",
    "Notice",
    "OutcomeShaper",
    "Policy",
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
    "check_policies",
    "consult",
    "hook_failed",
    "loop_policies",
    "policy_name",
]


@frozen
class Stop:
    """End the run before this turn's LLM call (``stopped_reason="policy"``)."""

    reason: str
    """Why (shown to users, recorded in ``LoopOutcome.stop``)."""


@frozen
class Warn:
    """Something looks wrong; the run goes on and a ``policy_warn`` event reports it.

    The warning reaches only the event stream (your hooks, the CLI's output, the session
    file): the model never sees it and the conversation is unchanged. To tell the model,
    return :class:`Remind` (one request) as well, or instead.
    """

    reason: str
    """What looks wrong."""
    code: str | None = None
    """A stable identifier of the pattern (e.g. ``repeated_identical_tool``)."""


@frozen
class Notice:
    """Ask the engine to emit ``event`` (for policies that report what they did)."""

    event: Any
    """An :data:`~agentfsm.AgentEvent`."""


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

FinalVerdict: TypeAlias = Retry | Notice
"""What a final gate may return; a gate may also return both (a sequence), or be async."""


@runtime_checkable
class TurnBudget(Protocol):
    """Tightens the run's turn limit below ``LoopParams.max_turns`` /
    ``Agent(max_turns=...)`` (the tightest budget wins)."""

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
class Compressor(Protocol):
    """Decides when history is compressed (``compress_check``) and compresses it.

    A compressor also arms recovery from context-overflow errors unless it sets
    ``recovers_overflow = False``.
    """

    def should_compress(self, ctx: RunContext) -> bool | Awaitable[bool]:
        """Whether this turn compresses before its LLM call."""
        ...

    def compress(
        self, ctx: RunContext, chat: ChatFn
    ) -> CompressionResult | Awaitable[CompressionResult]:
        """Rewrite ``ctx.history`` (returned, not applied: the engine refills the history)."""
        ...


@runtime_checkable
class RequestShaper(Protocol):
    """Shapes what is sent at ``llm_start``; the history itself is left as it is."""

    def shape_request(
        self, ctx: RunContext, messages: Sequence[Message]
    ) -> Sequence[Message] | Awaitable[Sequence[Message]]:
        """The messages to send this turn."""
        ...


@runtime_checkable
class ReplyShaper(Protocol):
    """Rewrites a reply at ``llm_end`` before it enters the history."""

    def shape_reply(
        self, ctx: RunContext, result: ChatResult
    ) -> ChatResult | Awaitable[ChatResult | None] | None:
        """A replacement result, or ``None`` to keep it."""
        ...


@runtime_checkable
class LlmObserver(Protocol):
    """Told after each LLM call of a turn."""

    def on_llm_end(self, ctx: RunContext) -> Remind | Awaitable[Remind | None] | None:
        """Observe; may queue a reminder."""
        ...


@runtime_checkable
class ToolObserver(Protocol):
    """Told after each tool result."""

    def on_tool_result(
        self, ctx: RunContext, outcome: ToolOutcome
    ) -> Remind | Awaitable[Remind | None] | None:
        """Observe; may queue a reminder."""
        ...


@runtime_checkable
class TurnObserver(Protocol):
    """Told when a turn's work is done (after its tools, or before its final check)."""

    def on_turn_end(self, ctx: RunContext) -> Remind | Awaitable[Remind | None] | None:
        """Observe; may queue a reminder."""
        ...


@runtime_checkable
class FinalGate(Protocol):
    """Consulted at ``final_check`` when a reply has no tool calls."""

    def check_final(
        self, ctx: RunContext
    ) -> FinalVerdict | Sequence[FinalVerdict] | Awaitable[Any] | None:
        """Return :class:`Retry` to refuse the answer, ``None`` to accept it; a
        :class:`Notice` (alone, or in a list with the :class:`Retry`) reports what the gate
        found, e.g. a reviewer's verdict."""
        ...


@runtime_checkable
class OutcomeShaper(Protocol):
    """Adjusts the outcome when the run reaches a final state."""

    def shape_outcome(
        self, ctx: RunContext, outcome: LoopOutcome
    ) -> LoopOutcome | Awaitable[LoopOutcome | None] | None:
        """A replacement outcome, or ``None`` to keep it."""
        ...


Policy: TypeAlias = (
    TurnGate
    | Compressor
    | RequestShaper
    | ReplyShaper
    | LlmObserver
    | ToolObserver
    | TurnObserver
    | FinalGate
    | OutcomeShaper
    | TurnBudget
)
"""Anything that implements at least one hook: what ``policies=[...]`` takes."""

_TURN_VERDICTS = (Stop, Warn, Remind, Notice)


def _expect_turn_verdicts(value: object) -> bool:
    if value is None or isinstance(value, _TURN_VERDICTS):
        return True
    return isinstance(value, (list, tuple)) and all(
        v is None or isinstance(v, _TURN_VERDICTS) for v in value
    )


def _expect_remind(value: object) -> bool:
    return value is None or isinstance(value, Remind)


def _expect_final_verdicts(value: object) -> bool:
    if value is None or isinstance(value, (Retry, Notice)):
        return True
    return isinstance(value, (list, tuple)) and all(
        v is None or isinstance(v, (Retry, Notice)) for v in value
    )


def _expect_bool(value: object) -> bool:
    return isinstance(value, bool)


def _expect_messages(value: object) -> bool:
    return isinstance(value, (list, tuple))


def _expect_reply(value: object) -> bool:
    return value is None or isinstance(value, ChatResult)


def _expect_compression(value: object) -> bool:
    return isinstance(value, CompressionResult)


def _expect_outcome(value: object) -> bool:
    return value is None or isinstance(value, LoopOutcome)


EXPECTED: dict[str, tuple[Callable[[object], bool], str]] = {
    "check_turn": (
        _expect_turn_verdicts,
        "None, Stop, Warn, Remind or Notice (or a list of them)",
    ),
    "should_compress": (_expect_bool, "a bool"),
    "compress": (_expect_compression, "a CompressionResult"),
    "shape_request": (_expect_messages, "a list of messages"),
    "shape_reply": (_expect_reply, "a ChatResult or None"),
    "on_llm_end": (_expect_remind, "Remind or None"),
    "on_tool_result": (_expect_remind, "Remind or None"),
    "on_turn_end": (_expect_remind, "Remind or None"),
    "check_final": (_expect_final_verdicts, "None, Retry or Notice (or a list of them)"),
    "shape_outcome": (_expect_outcome, "a LoopOutcome or None"),
}
"""What each hook may return, checked on every answer."""


def hook_failed(policy: object, hook: str, exc: Exception) -> NoReturn:
    """Raise what :func:`consult` raises when ``policy``'s ``hook`` raised ``exc``: a policy
    error or refusal as it is, anything else as :class:`PolicyError` naming the policy."""
    if isinstance(exc, (PolicyError, PolicyVerdictError, RunRefused)):
        raise exc
    raise PolicyError(policy_name(policy), hook, exc) from exc


async def consult(
    policy: object,
    hook: str,
    *args: Any,
    wait: Callable[[Awaitable[Any]], Awaitable[Any]] | None = None,
    passthrough: tuple[type[BaseException], ...] = (),
) -> Any:
    """Call ``policy.<hook>(*args)``, sync or async, and check its answer: the one way a
    policy hook is called.

    ``wait`` awaits an async answer (the runner passes its interruptible wait); exceptions
    of the ``passthrough`` types propagate as they are, any other becomes a
    :class:`PolicyError` naming the policy (a :class:`PolicyError`,
    :class:`PolicyVerdictError` or :class:`RunRefused` propagates as it is). An answer the
    hook does not allow is a :class:`PolicyVerdictError`.
    """
    try:
        answer = getattr(policy, hook)(*args)
        if inspect.isawaitable(answer):
            answer = await (wait(answer) if wait is not None else answer)
    except passthrough:
        raise
    except Exception as exc:
        hook_failed(policy, hook, exc)
    check, expected = EXPECTED[hook]
    if not check(answer):
        raise PolicyVerdictError(policy_name(policy), hook, answer, expected)
    return answer


class PolicySet:
    """Policies sorted by the hooks they implement (done once per set: an agent keeps one
    for all its runs)."""

    __slots__ = ("all", "by_hook", "keys")

    def __init__(self, policies: Sequence[Policy] | Sequence[object] = ()) -> None:
        self.all = check_policies(policies)
        by_hook: dict[str, list[Any]] = {hook: [] for hook in HOOK_NAMES}
        for policy in self.all:
            for hook in hooks_of(policy):
                by_hook[hook].append(policy)
        self.by_hook = {hook: tuple(found) for hook, found in by_hook.items()}
        """The policies implementing each hook (by name, every name of :data:`HOOK_NAMES`),
        in the set's order."""
        keys: dict[int, str] = {}
        seen: dict[str, int] = {}
        for policy in self.all:
            name = policy_name(policy)
            seen[name] = seen.get(name, 0) + 1
            keys[id(policy)] = name if seen[name] == 1 else f"{name}#{seen[name]}"
        self.keys = keys
        """Each policy's key in ``RunContext.policy_state``: its name, with ``#2``, ``#3``
        … for later policies of the same name."""

    @property
    def compressors(self) -> tuple[Compressor, ...]:
        """The policies that compress (``should_compress`` and ``compress``)."""
        return self.by_hook["should_compress"]

    def with_compressor(self, compressor: object) -> PolicySet:
        """This set with ``compressor`` added (the params' compression, when no policy
        compresses)."""
        return PolicySet([*self.all, compressor])

    def max_turns(self, default: int) -> int:
        """The run's turn limit: ``default`` (the params'), tightened by any policy's
        ``turn_budget``."""
        budgets: tuple[TurnBudget, ...] = self.by_hook["turn_budget"]
        return min([default, *(p.turn_budget for p in budgets)])


def loop_policies(policies: Sequence[Policy] | Sequence[object], params: LoopParams) -> PolicySet:
    """The run's policy set: ``policies`` checked (a ``TypeError`` for an object that is no
    policy), plus the compressor ``params.context_budget_tokens`` builds when no policy
    compresses (a compressor policy replaces the params' compression: one compressor decides).

    Raises:
        TypeError: an object implements no hook, or names one a letter off.
    """
    policy_set = PolicySet(policies)
    if params.context_budget_tokens is None or policy_set.compressors:
        return policy_set
    return policy_set.with_compressor(
        Compression(
            params.context_budget_tokens,
            params.compress_threshold,
            measured=False,
            recovers_overflow=False,
        )
    )
