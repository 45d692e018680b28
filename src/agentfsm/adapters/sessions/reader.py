"""Reading a session file back into messages."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentfsm.engine.messages import Message, UserMessage
from agentfsm.engine.serialization import structure_message

from .lines import iter_session_records

__all__ = [
    "ROLES",
    "drop_trailing_user_messages",
    "read_session_messages",
    "read_session_policy_state",
]

logger = logging.getLogger("agentfsm.sessions")

ROLES = frozenset({"system", "user", "assistant", "tool"})


def _message(record: Any) -> Message | None:
    if not isinstance(record, dict) or record.get("kind") != "message":
        return None
    data = record.get("message")
    if not isinstance(data, dict) or not isinstance(data.get("role"), str):
        return None
    if data["role"] not in ROLES:
        return None
    try:
        return structure_message(data)
    except Exception:
        return None


def drop_trailing_user_messages(messages: list[Message]) -> list[Message]:
    """Drop every user message at the end (a failed or aborted run can stack several)."""
    end = len(messages)
    while end and isinstance(messages[end - 1], UserMessage):
        end -= 1
    return messages[:end]


def read_session_messages(path: str | Path) -> list[Message]:
    """The transcript of a session file.

    Parses leniently line by line: keeps ``kind: "message"`` records whose role is one of
    the four known roles, skips everything else (meta records, unknown roles, and corrupt,
    partial, over-long or over-deep lines, which are counted in one logged warning). Drops
    every trailing user message, so reading what this returns back in gives the same list.
    A missing file raises ``FileNotFoundError``; a FIFO, device or over-large file
    :class:`~agentfsm.adapters.sessions.SessionNotFound` (bounds in
    :mod:`agentfsm.adapters.sessions.lines`).
    """
    messages: list[Message] = []
    for record in iter_session_records(path):
        message = _message(record)
        if message is not None:
            messages.append(message)
    return drop_trailing_user_messages(messages)


def _policy_entries(state: dict[Any, Any], where: str) -> dict[str, Any]:
    """The entries of a recorded ``policy_state`` that have the shape policies keep."""
    kept: dict[str, Any] = {}
    for name, entry in state.items():
        check = _ENTRY_CHECKS.get(name)
        if isinstance(name, str) and isinstance(entry, dict) and (check is None or check(entry)):
            kept[name] = entry
        else:
            logger.warning(
                "agentfsm: session %s: ignoring malformed policy state %.80r", where, name
            )
    return kept


_ENTRY_CHECKS: dict[str, Callable[[dict[Any, Any]], bool]] = {
    "prune_tool_results": lambda entry: all(
        isinstance(key, str) and (value is None or isinstance(value, str))
        for key, value in entry.items()
    ),
}
"""Shape checks of the entries whose shape is known (the built-in policies')."""


def read_session_policy_state(path: str | Path) -> dict[str, Any]:
    """The policies' durable state recorded by the last ``run_end`` of a session (``{}`` if
    none). Lenient like :func:`read_session_messages`: a ``policy_state`` that is not an
    object, or an entry that is not an object of the expected shape, is ignored with a
    logged warning."""
    state: dict[str, Any] = {}
    where = Path(path).stem
    for record in iter_session_records(path, contains=b'"policy_state"'):
        meta = record.get("meta") if isinstance(record, dict) else None
        if not isinstance(meta, dict) or "policy_state" not in meta:
            continue
        recorded = meta["policy_state"]
        if isinstance(recorded, dict):
            state = _policy_entries(recorded, where)
        else:
            logger.warning(
                "agentfsm: session %s: ignoring policy_state of type %s",
                where,
                type(recorded).__name__,
            )
    return state
