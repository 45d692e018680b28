"""Shared test helpers: event recording (:class:`agentfsm.testing.EventRecorder`) and compact
event views for snapshots."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

from agentfsm import AgentEmitter, AgentEvent
from agentfsm.engine import _events as events_module
from agentfsm.engine._errors import error_name
from agentfsm.engine._events import (
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
from agentfsm.testing import EventRecorder


class Recorder(EventRecorder):
    """An :class:`EventRecorder` following an emitter (a new one by default), with the
    compact views the snapshots store."""

    def __init__(self, emitter: AgentEmitter | None = None) -> None:
        super().__init__()
        self.emitter = emitter if emitter is not None else AgentEmitter()
        self.emitter.on("*", self)

    def of(self, kind: type[Any]) -> list[Any]:
        return self.of_type(kind)

    def view(self) -> list[dict[str, Any]]:
        """Event types with their key payload fields, for snapshots."""
        return [summarize(e) for e in self.events]


def event_type_literals() -> dict[str, str]:
    """Each event class's ``type`` literal and the class's name, read from the events module."""
    tree = ast.parse(Path(events_module.__file__).read_text("utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for statement in node.body:
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and statement.target.id == "type"
                and isinstance(statement.annotation, ast.Subscript)
            ):
                found[ast.literal_eval(statement.annotation.slice)] = node.name
    return found


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


def fd_open_on(fd: int, inode: int) -> bool:
    """Whether ``fd`` is still an open descriptor of the file ``inode`` (a closed number may
    have been given to another file since)."""
    try:
        return os.fstat(fd).st_ino == inode
    except OSError:
        return False
