"""Sessions: JSONL transcripts of runs, read back for resume."""

from .reader import (
    drop_trailing_user_messages,
    read_session_messages,
    read_session_policy_state,
)
from .recorder import SessionRecorder
from .resolve import SessionNotFound, resolve_session
from .store import SessionHandle, SessionStore

__all__ = [
    "SessionHandle",
    "SessionNotFound",
    "SessionRecorder",
    "SessionStore",
    "drop_trailing_user_messages",
    "read_session_messages",
    "read_session_policy_state",
    "resolve_session",
]
