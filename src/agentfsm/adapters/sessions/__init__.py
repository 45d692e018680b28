"""Sessions: JSONL transcripts of runs, read back for resume."""

from .location import default_session_dir, state_home
from .reader import (
    drop_trailing_user_messages,
    read_session_messages,
    read_session_policy_state,
)
from .recorder import SessionRecorder
from .resolve import SessionNotFound, resolve_session
from .store import SessionHandle, SessionStore
from .trace import RunTrace, trace_session

__all__ = [
    "RunTrace",
    "SessionHandle",
    "SessionNotFound",
    "SessionRecorder",
    "SessionStore",
    "default_session_dir",
    "drop_trailing_user_messages",
    "read_session_messages",
    "read_session_policy_state",
    "resolve_session",
    "state_home",
    "trace_session",
]
