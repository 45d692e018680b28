"""Reading a session file back into messages."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any

from agentfsm.engine import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
    structure_message,
    tool_message_from_result,
    unrecorded_result,
)

from ._lines import iter_session_records

__all__ = [
    "ROLES",
    "answer_open_tool_calls",
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


def drop_trailing_user_messages(
    messages: list[Message], *, keep: Callable[[Message], bool] | None = None
) -> list[Message]:
    """Drop every user message at the end (a failed or aborted run can stack several).

    With ``keep``, dropping stops at the first user message (from the end) it accepts: the
    Agent keeps its frozen session context that way.
    """
    end = len(messages)
    while end and isinstance(messages[end - 1], UserMessage):
        if keep is not None and keep(messages[end - 1]):
            break
        end -= 1
    return messages[:end]


def answer_open_tool_calls(
    messages: Iterable[Message], started: Collection[str] = ()
) -> list[Message]:
    """``messages`` with every assistant tool call answered and no stray tool message.

    A call with no tool message before the next assistant or user message gets a failed
    result, placed after the results that did arrive: a call whose id is in ``started``
    (its tool had begun) says the tool may have acted, the others that it did not run. A tool
    message that answers no open call of the preceding assistant message (an orphan, or a
    second answer) is dropped. Providers reject either, so the result is a valid history.
    """
    out: list[Message] = []
    open_calls: list[ToolCall] = []

    def close() -> None:
        for call in open_calls:
            out.append(tool_message_from_result(call, unrecorded_result(call.id in started)))
        open_calls.clear()

    for message in messages:
        if isinstance(message, ToolMessage):
            call = next((c for c in open_calls if c.id == message.tool_call_id), None)
            if call is not None:
                open_calls.remove(call)
                out.append(message)
            continue
        close()
        out.append(message)
        if isinstance(message, AssistantMessage):
            open_calls.extend(message.tool_calls)
    close()
    return out


def read_session_messages(
    path: str | Path,
    *,
    keep: Callable[[Message], bool] | None = None,
    compressed: bool = False,
) -> list[Message]:
    """The transcript of a session file, ready to resume.

    Parses leniently line by line: keeps ``kind: "message"`` records whose role is one of
    the four known roles, skips everything else (meta records, unknown roles, and corrupt,
    partial, over-long or over-deep lines, which are counted in one logged warning). Strings
    read back exactly as they were written, lone surrogates included.

    A run that was killed or cancelled can leave tool calls unanswered: each reads back
    answered by a failed result saying the run stopped during the call (and whether its tool
    had started, from the ``tool_call_start`` records, so may have acted); tool messages that
    answer no call are dropped (see :func:`answer_open_tool_calls`). Then every trailing
    user message is dropped (``keep`` as in :func:`drop_trailing_user_messages`), so reading
    what this returns back in gives the same list.

    By default the raw transcript is replayed, pre-compression messages included (a later
    turn compresses again). With ``compressed=True`` (what ``Agent(resume=...)`` uses), the
    history a compression left (recorded in its ``compress_end`` record) replaces what was
    read before it, so the resumed run sends what the recorded run would have sent.

    A missing file raises ``FileNotFoundError``; a FIFO, device or over-large file
    :class:`~agentfsm.adapters.sessions.SessionNotFound` (bounds in
    :mod:`agentfsm.adapters.sessions._lines`).
    """
    messages: list[Message] = []
    started: set[str] = set()
    for record in iter_session_records(path, exact=True):
        message = _message(record)
        if message is not None:
            messages.append(message)
            continue
        if compressed:
            history = _compressed_history(record)
            if history is not None:
                messages = history
                continue
        call_id = _started_call(record)
        if call_id is not None:
            started.add(call_id)
    return drop_trailing_user_messages(answer_open_tool_calls(messages, started), keep=keep)


def _compressed_history(record: Any) -> list[Message] | None:
    """The history a ``compress_end`` meta record carries, if every entry reads back."""
    if not isinstance(record, dict) or record.get("kind") != "meta":
        return None
    meta = record.get("meta")
    if not isinstance(meta, dict) or meta.get("event") != "compress_end":
        return None
    entries = meta.get("history")
    if not isinstance(entries, list):
        return None
    history = [_message({"kind": "message", "message": entry}) for entry in entries]
    if any(m is None for m in history):
        logger.warning("agentfsm: ignoring a compress_end record with an unreadable history")
        return None
    return [m for m in history if m is not None]


def _started_call(record: Any) -> str | None:
    """The call id of a ``tool_call_start`` meta record, else ``None``."""
    if not isinstance(record, dict) or record.get("kind") != "meta":
        return None
    meta = record.get("meta")
    if not isinstance(meta, dict) or meta.get("event") != "tool_call_start":
        return None
    call_id = meta.get("call_id")
    return call_id if isinstance(call_id, str) else None


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
