"""The event stream of a run: one attrs class per event, and :class:`AgentEmitter`.

The seed events keep their order guarantees (see ``docs/engine.md#events``, generated from
the class docstrings below); additions such as ``policy_stop`` or ``gate`` slot in without
reordering them.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterable
from typing import Any, Literal, TypeAlias, get_args, overload

from attrs import cmp_using, field, frozen

from ._errors import error_name
from ._messages import AssistantMessage, ChatResult, ToolCall, ToolResult, Usage

__all__ = [
    "AgentEmitter",
    "AgentEvent",
    "BudgetExhaustedEvent",
    "CompressEndEvent",
    "CompressStartEvent",
    "ErrorEvent",
    "EventHandler",
    "EventType",
    "FinalEvent",
    "GateEvent",
    "LlmEndEvent",
    "LlmStartEvent",
    "PolicyNoteEvent",
    "PolicyStopEvent",
    "PolicyWarnEvent",
    "RedirectEvent",
    "RedirectSkippedEvent",
    "ReminderEvent",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
    "TurnEndEvent",
    "TextDeltaEvent",
    "ThinkingDeltaEvent",
    "TurnStartEvent",
]

logger = logging.getLogger("agentfsm.events")


@frozen(kw_only=True)
class TurnStartEvent:
    """Start of a turn; the first event of every turn."""

    turn: int
    """1-based turn number."""
    type: Literal["turn_start"] = "turn_start"


@frozen(kw_only=True)
class CompressStartEvent:
    """Compression begins (after ``turn_start``, before ``llm_start``)."""

    estimated_tokens: int
    """The history's token estimate that triggered compression."""
    type: Literal["compress_start"] = "compress_start"


@frozen(kw_only=True)
class CompressEndEvent:
    """Compression finished; always paired after ``compress_start``."""

    summary_chars: int
    """Length of the summary text; 0 when the summarizer failed and history is unchanged."""
    type: Literal["compress_end"] = "compress_end"


@frozen(kw_only=True)
class LlmStartEvent:
    """Just before the chat call; exactly one per LLM call."""

    turn: int
    """The turn making the call."""
    type: Literal["llm_start"] = "llm_start"


@frozen(kw_only=True)
class LlmEndEvent:
    """The chat call resolved; pairs with ``llm_start``, never fires when the call raised."""

    turn: int
    """The turn that made the call."""
    result: ChatResult
    """What the model answered."""
    type: Literal["llm_end"] = "llm_end"


@frozen(kw_only=True)
class ToolCallStartEvent:
    """Before a tool executes: after ``llm_end``, one call at a time in call order (a batch of
    concurrency-safe calls starts together)."""

    turn: int
    """The turn whose reply asked for the call."""
    call: ToolCall
    """The call about to run."""
    type: Literal["tool_call_start"] = "tool_call_start"


@frozen(kw_only=True)
class ToolCallEndEvent:
    """A tool resolved, pairing with its ``tool_call_start``; a call cut short has
    ``cancelled=True``, and one that never ran (last-turn budget, interrupt) has no start."""

    turn: int
    """The turn whose reply asked for the call."""
    call: ToolCall
    """The call."""
    result: ToolResult
    """Its result (for a skipped call, the reason it was skipped)."""
    cancelled: bool = False
    """The call never ran (last-turn budget) or was cut short (abort)."""
    type: Literal["tool_call_end"] = "tool_call_end"


@frozen(kw_only=True)
class FinalEvent:
    """A turn produced no tool calls and every final gate passed; at most once per run."""

    message: AssistantMessage
    """The final assistant message."""
    result: ChatResult
    """The chat result that carried it."""
    type: Literal["final"] = "final"


@frozen(kw_only=True)
class BudgetExhaustedEvent:
    """The run used all its turns while the model kept asking for tools; after the last
    ``tool_call_end``, before ``turn_end``."""

    turns_used: int
    """LLM calls made (equals ``max_turns``)."""
    type: Literal["budget_exhausted"] = "budget_exhausted"


@frozen(kw_only=True)
class TurnEndEvent:
    """Last event of a run's last turn: after ``final``, ``budget_exhausted`` or ``policy_stop``."""

    turn: int
    """The turn that ended the run."""
    type: Literal["turn_end"] = "turn_end"


def _same_error(a: BaseException, b: BaseException) -> bool:
    return error_name(a) == error_name(b) and str(a) == str(b)


@frozen(kw_only=True)
class ErrorEvent:
    """The chat call failed (logged, then re-raised) or the loop was aborted. Nothing follows;
    an outside cancel first closes each open call with a cancelled ``tool_call_end``."""

    error: BaseException = field(eq=cmp_using(eq=_same_error, require_same_type=False))
    """The error; compared by name and message."""
    type: Literal["error"] = "error"


@frozen(kw_only=True)
class PolicyStopEvent:
    """A turn gate stopped the run at the top of a turn: after ``turn_start``, no
    ``llm_start``; ``turn_end`` follows."""

    turn: int
    """The turn that did not start its LLM call."""
    policy: str
    """Which policy stopped the run."""
    reason: str
    """Why."""
    type: Literal["policy_stop"] = "policy_stop"


@frozen(kw_only=True)
class PolicyNoteEvent:
    """A policy reports what it will use or did (e.g. the verify gate's command): from a
    turn gate after ``turn_start``, before the turn's ``llm_start``; from a final gate (e.g.
    the verifier's verdict) at ``final_check``, after the turn's ``llm_end`` and before its
    ``gate`` or ``final``. Informational: the model is not told."""

    turn: int
    """The turn."""
    policy: str
    """Which policy reports."""
    reason: str
    """What it reports."""
    code: str | None = None
    """A stable identifier of the note (e.g. ``verify_command``)."""
    type: Literal["policy_note"] = "policy_note"


@frozen(kw_only=True)
class PolicyWarnEvent:
    """A turn gate warned at the top of a turn: after ``turn_start``, before the turn's
    ``llm_start``; the run goes on."""

    turn: int
    """The turn."""
    policy: str
    """Which policy warned."""
    reason: str
    """What looks wrong."""
    code: str | None = None
    """A stable identifier of the pattern, when the policy gave one."""
    type: Literal["policy_warn"] = "policy_warn"


@frozen(kw_only=True)
class ReminderEvent:
    """A policy queued a reminder for the next request (never stored in history): right after
    the point that asked (a turn gate after ``turn_start``, an observer after ``llm_end`` or a
    ``tool_call_end``); the next ``llm_start`` carries it."""

    turn: int
    """The turn that queued it."""
    policy: str
    """Which policy."""
    text: str
    """The reminder."""
    type: Literal["reminder"] = "reminder"


@frozen(kw_only=True)
class RedirectEvent:
    """A supervisor suggested new directions after a loop-health warning: after the
    ``policy_warn`` that triggered it, before the turn's ``llm_start``.

    Records sizes, cost and the evidence it saw, never the advice text itself (that is in
    the next request, and the history if the model repeats it).
    """

    turn: int
    """The turn whose request carries the directions."""
    reason: str
    """The warning that triggered it (e.g. ``oscillation_detected``)."""
    directions: int
    """How many directions came back (at most three)."""
    directions_chars: int
    """Their total length."""
    latency_ms: int
    """How long the supervisor call took."""
    usage: Usage | None
    """What the supervisor call cost (added to the run totals)."""
    evidence_event_ids: tuple[int, ...]
    """Sequence numbers of the events the evidence packet was built from."""
    type: Literal["redirect"] = "redirect"


@frozen(kw_only=True)
class RedirectSkippedEvent:
    """A warning could have triggered a redirection, but none was made: after ``turn_start``,
    before the turn's ``llm_start``; the run goes on."""

    turn: int
    """The turn."""
    trigger: str
    """The warning code."""
    reason: str
    """Why: ``disabled``, ``max_per_run``, ``empty_evidence``, ``error``, ``timeout``,
    ``empty``, ``unparseable``."""
    type: Literal["redirect_skipped"] = "redirect_skipped"


@frozen(kw_only=True)
class GateEvent:
    """A final gate refused a final answer: after ``llm_end``, before the next ``turn_start``,
    whose request carries the reminder."""

    turn: int
    """The turn whose answer was refused."""
    policy: str
    """Which gate refused."""
    reminder: str
    """The reminder the next request carries."""
    type: Literal["gate"] = "gate"


@frozen(kw_only=True)
class TextDeltaEvent:
    """A streamed piece of the answer text, between ``llm_start`` and ``llm_end``."""

    turn: int
    """The turn whose call is streaming."""
    text: str
    """The new characters."""
    type: Literal["text_delta"] = "text_delta"


@frozen(kw_only=True)
class ThinkingDeltaEvent:
    """A streamed piece of reasoning text, between ``llm_start`` and ``llm_end``."""

    turn: int
    """The turn whose call is streaming."""
    text: str
    """The new characters."""
    type: Literal["thinking_delta"] = "thinking_delta"


AgentEvent: TypeAlias = (
    TurnStartEvent
    | CompressStartEvent
    | CompressEndEvent
    | LlmStartEvent
    | LlmEndEvent
    | ToolCallStartEvent
    | ToolCallEndEvent
    | FinalEvent
    | BudgetExhaustedEvent
    | TurnEndEvent
    | ErrorEvent
    | PolicyStopEvent
    | GateEvent
    | PolicyWarnEvent
    | PolicyNoteEvent
    | ReminderEvent
    | RedirectEvent
    | RedirectSkippedEvent
    | TextDeltaEvent
    | ThinkingDeltaEvent
)
"""Any event of a run; ``type`` tells which."""

EventType: TypeAlias = Literal[
    "turn_start",
    "compress_start",
    "compress_end",
    "llm_start",
    "llm_end",
    "tool_call_start",
    "tool_call_end",
    "final",
    "budget_exhausted",
    "turn_end",
    "error",
    "policy_stop",
    "gate",
    "policy_warn",
    "policy_note",
    "reminder",
    "redirect",
    "redirect_skipped",
    "text_delta",
    "thinking_delta",
]

_KNOWN_TYPES = frozenset(get_args(EventType))


def _checked_type(event_type: str) -> str:
    """``event_type`` if it names an event (or is ``"*"``); else a ``ValueError`` naming
    the nearest event type."""
    if event_type == "*" or event_type in _KNOWN_TYPES:
        return event_type
    near = difflib.get_close_matches(str(event_type), sorted(_KNOWN_TYPES), n=1)
    guess = f"did you mean {near[0]!r}? " if near else ""
    known = ", ".join(sorted(_KNOWN_TYPES))
    raise ValueError(f"no event is called {event_type!r}: {guess}(events: {known}; '*': all)")


EventHandler: TypeAlias = Callable[[Any], object]
"""A subscriber: called with the event; its return value is ignored."""

_Entry: TypeAlias = tuple[str, EventHandler]


class AgentEmitter:
    """A typed event emitter.

    Handlers run synchronously in registration order. A handler that raises is logged and
    skipped; the others still run. Handlers may subscribe or unsubscribe while an event is
    being emitted: each emit iterates the subscriber list as it was when the emit began.

    ``parent`` gets every event too, before this emitter's handlers, and so does each of its
    own ancestors, the farthest first (an agent's per-run emitter forwards to
    ``Agent.events`` this way).
    """

    __slots__ = ("_by_type", "_entries", "_parent", "_star")

    def __init__(self, parent: AgentEmitter | None = None) -> None:
        self._parent = parent
        # Copy-on-write tuple: emit iterates it without copying, (un)subscribing replaces it.
        self._entries: tuple[_Entry, ...] = ()
        # Each subscribed event type's handlers in registration order ("*" ones included),
        # and the "*" handlers alone (any other type's): rebuilt when subscriptions change.
        self._by_type: dict[str, tuple[EventHandler, ...]] = {}
        self._star: tuple[EventHandler, ...] = ()

    def _subscribed(self, entries: tuple[_Entry, ...]) -> None:
        """Take ``entries`` as the subscriptions and index them by event type (one pass)."""
        self._entries = entries
        by_type: dict[str, tuple[EventHandler, ...]] = {}
        star: tuple[EventHandler, ...] = ()
        for event_type, handler in entries:
            if event_type == "*":
                star += (handler,)
                for known in by_type:  # the types seen so far get it too
                    by_type[known] += (handler,)
            else:  # a type seen first gets the "*" handlers registered before it
                by_type[event_type] = (*by_type.get(event_type, star), handler)
        self._by_type = by_type
        self._star = star

    # One overload per event type, so that a handler's parameter is typed with its event
    # class (tests/engine/test_typed_handlers.py checks that every event has one).
    @overload
    def on(
        self, event_type: Literal["turn_start"], handler: Callable[[TurnStartEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["compress_start"], handler: Callable[[CompressStartEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["compress_end"], handler: Callable[[CompressEndEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["llm_start"], handler: Callable[[LlmStartEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["llm_end"], handler: Callable[[LlmEndEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self,
        event_type: Literal["tool_call_start"],
        handler: Callable[[ToolCallStartEvent], object],
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["tool_call_end"], handler: Callable[[ToolCallEndEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["final"], handler: Callable[[FinalEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self,
        event_type: Literal["budget_exhausted"],
        handler: Callable[[BudgetExhaustedEvent], object],
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["turn_end"], handler: Callable[[TurnEndEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["error"], handler: Callable[[ErrorEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["policy_stop"], handler: Callable[[PolicyStopEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["policy_note"], handler: Callable[[PolicyNoteEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["policy_warn"], handler: Callable[[PolicyWarnEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["reminder"], handler: Callable[[ReminderEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["redirect"], handler: Callable[[RedirectEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self,
        event_type: Literal["redirect_skipped"],
        handler: Callable[[RedirectSkippedEvent], object],
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["gate"], handler: Callable[[GateEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["text_delta"], handler: Callable[[TextDeltaEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["thinking_delta"], handler: Callable[[ThinkingDeltaEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: Literal["*"], handler: Callable[[AgentEvent], object]
    ) -> Callable[[], None]: ...

    @overload
    def on(
        self, event_type: str, handler: Callable[[AgentEvent], object]
    ) -> Callable[[], None]: ...

    def on(self, event_type: str, handler: EventHandler) -> Callable[[], None]:
        """Subscribe ``handler`` to one event type, or to all with ``"*"``.

        Type checkers give the handler the event's class: ``on("tool_call_end", h)`` wants
        ``h(event: ToolCallEndEvent)``; ``on("*", h)`` wants ``h(event: AgentEvent)``.

        Returns a callable that unsubscribes this registration (calling it twice is harmless).

        Raises:
            ValueError: ``event_type`` names no event (the message names the nearest one).
        """
        entry: _Entry = (_checked_type(event_type), handler)
        self._subscribed((*self._entries, entry))

        def unsubscribe() -> None:
            entries = tuple(e for e in self._entries if e is not entry)
            if len(entries) != len(self._entries):
                self._subscribed(entries)

        return unsubscribe

    def on_many(
        self, handlers: Iterable[tuple[str, Callable[[Any], object]]]
    ) -> Callable[[], None]:
        """Subscribe several ``(event_type, handler)`` pairs at once, as :meth:`on` each.

        Returns one callable that unsubscribes all of them (calling it twice is harmless).
        Cheaper than one :meth:`on` per pair for an observer that listens to many types for
        one run (the session recorder).
        """
        added: tuple[_Entry, ...] = tuple(
            [(_checked_type(t), h) for t, h in handlers]
        )  # entries of its own
        before = self._entries
        combined = (*before, *added)
        self._subscribed(combined)
        ids = frozenset(map(id, added))

        def unsubscribe() -> None:
            if self._entries is combined:  # no (un)subscription since: back to before
                self._subscribed(before)
                return
            entries = tuple(e for e in self._entries if id(e) not in ids)
            if len(entries) != len(self._entries):
                self._subscribed(entries)

        return unsubscribe

    def emit(self, event: AgentEvent) -> None:
        """Deliver ``event`` to its subscribers."""
        event_type = event.type
        handlers = self._by_type.get(event_type, self._star)
        if self._parent is not None:
            self._parent.emit(event)  # every ancestor, the farthest first
        for handler in handlers:
            try:
                handler(event)
            except Exception:
                logger.exception("agentfsm: %s handler %r raised", event_type, handler)

    @property
    def has_subscribers(self) -> bool:
        """Whether anyone listens (here or at the parent)."""
        return bool(self._entries) or (self._parent is not None and self._parent.has_subscribers)

    def __len__(self) -> int:
        return len(self._entries)
