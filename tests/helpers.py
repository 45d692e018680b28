"""Shared test helpers: event recording and compact event views for snapshots."""

from __future__ import annotations

from typing import Any

from agentfsm import AgentEmitter, AgentEvent
from agentfsm.engine.errors import error_name
from agentfsm.engine.events import (
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


class Recorder:
    """Subscribes to every event of an emitter and keeps them."""

    def __init__(self, emitter: AgentEmitter | None = None) -> None:
        self.emitter = emitter if emitter is not None else AgentEmitter()
        self.events: list[AgentEvent] = []
        self.emitter.on("*", self.events.append)

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def view(self) -> list[dict[str, Any]]:
        """Event types with their key payload fields, for snapshots."""
        return [summarize(e) for e in self.events]


def summarize(event: AgentEvent) -> dict[str, Any]:
    match event:
        case TurnStartEvent(turn=turn) | LlmStartEvent(turn=turn) | TurnEndEvent(turn=turn):
            return {"type": event.type, "turn": turn}
        case CompressStartEvent(estimated_tokens=tokens):
            return {"type": event.type, "estimated_tokens": tokens}
        case CompressEndEvent(summary_chars=chars):
            return {"type": event.type, "summary_chars": chars}
        case LlmEndEvent(turn=turn, result=result):
            return {
                "type": event.type,
                "turn": turn,
                "content": result.message.content,
                "tool_calls": [c.name for c in result.message.tool_calls],
            }
        case ToolCallStartEvent(turn=turn, call=call):
            return {"type": event.type, "turn": turn, "call": call.id, "name": call.name}
        case ToolCallEndEvent(turn=turn, call=call, result=result, cancelled=cancelled):
            return {
                "type": event.type,
                "turn": turn,
                "call": call.id,
                "ok": result.ok,
                "output": result.output,
                "error": result.error,
                "cancelled": cancelled,
            }
        case FinalEvent(message=message):
            return {"type": event.type, "content": message.content}
        case BudgetExhaustedEvent(turns_used=used):
            return {"type": event.type, "turns_used": used}
        case ErrorEvent(error=error):
            return {"type": event.type, "error": error_name(error), "message": str(error)}
        case PolicyStopEvent(turn=turn, policy=policy, reason=reason):
            return {"type": event.type, "turn": turn, "policy": policy, "reason": reason}
        case TextDeltaEvent(turn=turn, text=text) | ThinkingDeltaEvent(turn=turn, text=text):
            return {"type": event.type, "turn": turn, "text": text}
        case PolicyWarnEvent(turn=turn, policy=policy, reason=reason, code=code):
            return {"type": event.type, "turn": turn, "code": code, "reason": reason}
        case PolicyNoteEvent(turn=turn, policy=policy, reason=reason, code=code):
            return {"type": event.type, "turn": turn, "code": code, "reason": reason}
        case RedirectEvent(turn=turn, reason=reason, directions=n, directions_chars=chars):
            return {
                "type": event.type,
                "turn": turn,
                "reason": reason,
                "directions": n,
                "directions_chars": chars,
                "evidence": len(event.evidence_event_ids),
            }
        case RedirectSkippedEvent(turn=turn, trigger=trigger, reason=reason):
            return {"type": event.type, "turn": turn, "trigger": trigger, "reason": reason}
        case ReminderEvent(turn=turn, policy=policy, text=text):
            return {"type": event.type, "turn": turn, "policy": policy, "text": text}
        case GateEvent(turn=turn, policy=policy, reminder=reminder):
            return {"type": event.type, "turn": turn, "policy": policy, "reminder": reminder}
    raise AssertionError(f"unknown event {event!r}")
