"""``EventRecorder``: keeps the events of a run, for assertions in tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Self, TypeVar, overload

from agentfsm.engine import (
    AgentEmitter,
    AgentEvent,
    BudgetExhaustedEvent,
    CompressEndEvent,
    CompressStartEvent,
    ErrorEvent,
    FinalEvent,
    GateEvent,
    LlmEndEvent,
    LlmStartEvent,
    PolicyNoteEvent,
    PolicyStopEvent,
    PolicyWarnEvent,
    RedirectEvent,
    RedirectSkippedEvent,
    ReminderEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)

__all__ = ["EventRecorder"]

_E = TypeVar("_E")


class EventRecorder:
    """A test double that keeps every event it is given, in order.

    An instance is an event handler: subscribe it to all events with ``emitter.on("*",
    recorder)``, or build and subscribe one with :meth:`attach`. Then look at
    :attr:`events`, :attr:`types` or :meth:`of_type`::

        from agentfsm import AgentEmitter, LoopParams, UserMessage, run_conversation
        from agentfsm.testing import EventRecorder, ScriptedChat, ScriptedTools, tool_reply

        emitter = AgentEmitter()
        recorder = EventRecorder.attach(emitter)  # or: emitter.on("*", EventRecorder())
        await run_conversation(
            ScriptedChat([tool_reply(("echo", {"text": "hi"})), "done"]),
            ScriptedTools({"echo": lambda text: text}),
            [UserMessage("go")],
            LoopParams(max_turns=3),
            emitter=emitter,
        )
        assert recorder.types[-2:] == ["final", "turn_end"]
        (end,) = recorder.of_type("tool_call_end")  # a ToolCallEndEvent
        assert end.result.output == "hi"
    """

    __slots__ = ("_unsubscribe", "events")

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []
        """Every event received, oldest first."""
        self._unsubscribe: list[Callable[[], None]] = []

    @classmethod
    def attach(cls, emitter: AgentEmitter) -> Self:
        """A new recorder subscribed to every event of ``emitter`` (undo with :meth:`detach`)."""
        recorder = cls()
        recorder._unsubscribe.append(emitter.on("*", recorder))
        return recorder

    def detach(self) -> None:
        """Stop receiving events from the emitters :meth:`attach` subscribed to."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()

    def __call__(self, event: AgentEvent) -> None:
        """Keep ``event``: this is what makes the recorder an event handler."""
        self.events.append(event)

    @property
    def types(self) -> list[str]:
        """The ``type`` of every event, in order (e.g. ``["turn_start", "llm_start", ...]``)."""
        return [event.type for event in self.events]

    @overload
    def of_type(self, kind: type[_E]) -> list[_E]: ...

    @overload
    def of_type(self, kind: Literal["turn_start"]) -> list[TurnStartEvent]: ...

    @overload
    def of_type(self, kind: Literal["compress_start"]) -> list[CompressStartEvent]: ...

    @overload
    def of_type(self, kind: Literal["compress_end"]) -> list[CompressEndEvent]: ...

    @overload
    def of_type(self, kind: Literal["llm_start"]) -> list[LlmStartEvent]: ...

    @overload
    def of_type(self, kind: Literal["llm_end"]) -> list[LlmEndEvent]: ...

    @overload
    def of_type(self, kind: Literal["tool_call_start"]) -> list[ToolCallStartEvent]: ...

    @overload
    def of_type(self, kind: Literal["tool_call_end"]) -> list[ToolCallEndEvent]: ...

    @overload
    def of_type(self, kind: Literal["final"]) -> list[FinalEvent]: ...

    @overload
    def of_type(self, kind: Literal["budget_exhausted"]) -> list[BudgetExhaustedEvent]: ...

    @overload
    def of_type(self, kind: Literal["turn_end"]) -> list[TurnEndEvent]: ...

    @overload
    def of_type(self, kind: Literal["error"]) -> list[ErrorEvent]: ...

    @overload
    def of_type(self, kind: Literal["policy_stop"]) -> list[PolicyStopEvent]: ...

    @overload
    def of_type(self, kind: Literal["policy_note"]) -> list[PolicyNoteEvent]: ...

    @overload
    def of_type(self, kind: Literal["policy_warn"]) -> list[PolicyWarnEvent]: ...

    @overload
    def of_type(self, kind: Literal["reminder"]) -> list[ReminderEvent]: ...

    @overload
    def of_type(self, kind: Literal["redirect"]) -> list[RedirectEvent]: ...

    @overload
    def of_type(self, kind: Literal["redirect_skipped"]) -> list[RedirectSkippedEvent]: ...

    @overload
    def of_type(self, kind: Literal["gate"]) -> list[GateEvent]: ...

    @overload
    def of_type(self, kind: Literal["text_delta"]) -> list[TextDeltaEvent]: ...

    @overload
    def of_type(self, kind: Literal["thinking_delta"]) -> list[ThinkingDeltaEvent]: ...

    @overload
    def of_type(self, kind: str) -> list[AgentEvent]: ...

    def of_type(self, kind: type[Any] | str) -> list[Any]:
        """The events of one type, in order: by type name (``"tool_call_end"``) or event class
        (``ToolCallEndEvent``). Either way the result is typed with the event class."""
        if isinstance(kind, str):
            return [event for event in self.events if event.type == kind]
        return [event for event in self.events if isinstance(event, kind)]

    def clear(self) -> None:
        """Forget the events received so far (the subscriptions stay)."""
        self.events.clear()
