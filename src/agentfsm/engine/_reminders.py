"""Reminders: ``<system-reminder>`` blocks a request carries (the next one only: never stored),
and the neutral user turn a final gate's refusal stores."""

from __future__ import annotations

from collections.abc import Sequence

from ._messages import Message, UserMessage
from ._params import evolved

__all__ = ["RETRY_TURN", "render_reminders", "retry_message", "with_reminders"]

RETRY_TURN = "Continue."
"""The text of the user turn stored after an answer a final gate refused: neutral, so the
history keeps alternating roles; the gate's reminder rides on the next request only."""


def render_reminders(reminders: Sequence[str]) -> str:
    """Queued reminders as ``<system-reminder>`` blocks."""
    return "\n".join(f"<system-reminder>\n{text}\n</system-reminder>" for text in reminders)


def retry_message() -> UserMessage:
    """The user message a final gate's refusal pushes into the history (:data:`RETRY_TURN`;
    the gate's reminder is not in it)."""
    return UserMessage(RETRY_TURN)


def with_reminders(request: Sequence[Message], rendered: str) -> list[Message]:
    """``request`` carrying ``rendered`` reminders: appended to its last message when that is
    a user message (two user messages in a row break strict chat templates), else as a user
    message of their own."""
    if request and isinstance(request[-1], UserMessage):
        last = request[-1]
        return [*request[:-1], evolved(last, content=f"{last.content}\n\n{rendered}")]
    return [*request, UserMessage(rendered)]
