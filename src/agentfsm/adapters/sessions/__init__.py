"""Sessions: JSONL transcripts of runs, read back for resume."""

from .lines import MAX_JSON_DEPTH, MAX_LINE_BYTES, MAX_SESSION_BYTES, iter_session_records
from .location import default_session_dir, state_home
from .reader import (
    answer_open_tool_calls,
    drop_trailing_user_messages,
    read_session_messages,
    read_session_policy_state,
)
from .recorder import SessionRecorder
from .resolve import SessionNotFound, is_session_file, resolve_session, session_files
from .store import SessionHandle, SessionStore
from .trace import RunTrace, trace_session

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_LINE_BYTES",
    "MAX_SESSION_BYTES",
    "RunTrace",
    "SessionHandle",
    "SessionNotFound",
    "SessionRecorder",
    "SessionStore",
    "answer_open_tool_calls",
    "default_session_dir",
    "drop_trailing_user_messages",
    "is_session_file",
    "iter_session_records",
    "read_session_messages",
    "read_session_policy_state",
    "resolve_session",
    "session_files",
    "state_home",
    "trace_session",
]
