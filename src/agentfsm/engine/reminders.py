"""Reminders: ``<system-reminder>`` blocks a request carries, and the gate's stored one."""

from __future__ import annotations

from collections.abc import Sequence

from .messages import Message, UserMessage
from .params import evolved

__all__ = ["render_reminders", "retry_message", "with_reminders"]


def render_reminders(reminders: Sequence[str]) -> str:
    """Queued reminders as ``<system-reminder>`` blocks."""
    return "\n".join(f"<system-reminder>\n{text}\n</system-reminder>" for text in reminders)


def retry_message(reminder: str) -> UserMessage:
    """The user message a final gate's refusal pushes into the history."""
    return UserMessage(render_reminders([reminder]))


def with_reminders(request: Sequence[Message], rendered: str) -> list[Message]:
    """``request`` carrying ``rendered`` reminders: appended to its last message when that is
    a user message (two user messages in a row break strict chat templates), else as a user
    message of their own."""
    if request and isinstance(request[-1], UserMessage):
        last = request[-1]
        return [*request[:-1], evolved(last, content=f"{last.content}\n\n{rendered}")]
    return [*request, UserMessage(rendered)]
