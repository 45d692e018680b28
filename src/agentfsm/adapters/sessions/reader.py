"""Reading a session file back into messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentfsm.engine.messages import Message, UserMessage
from agentfsm.engine.serialization import structure_message

__all__ = [
    "ROLES",
    "drop_trailing_user_messages",
    "read_session_messages",
    "read_session_policy_state",
]

ROLES = frozenset({"system", "user", "assistant", "tool"})


def _message(record: Any) -> Message | None:
    if not isinstance(record, dict) or record.get("kind") != "message":
        return None
    data = record.get("message")
    if not isinstance(data, dict) or data.get("role") not in ROLES:
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
    the four known roles, silently skips everything else (meta records, corrupt or partial
    lines, unknown roles). Drops every trailing user message, so reading what this returns
    back in gives the same list. A missing file raises ``FileNotFoundError``.
    """
    messages: list[Message] = []
    with Path(path).open(encoding="utf-8", errors="replace") as file:
        for line in file:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            message = _message(record)
            if message is not None:
                messages.append(message)
    return drop_trailing_user_messages(messages)


def read_session_policy_state(path: str | Path) -> dict[str, Any]:
    """The policies' durable state recorded by the last ``run_end`` of a session (``{}`` if
    none). Lenient like :func:`read_session_messages`."""
    state: dict[str, Any] = {}
    with Path(path).open(encoding="utf-8", errors="replace") as file:
        for line in file:
            if '"policy_state"' not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            meta = record.get("meta") if isinstance(record, dict) else None
            if isinstance(meta, dict) and isinstance(meta.get("policy_state"), dict):
                state = meta["policy_state"]
    return state
