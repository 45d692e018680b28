"""Sessions: JSONL transcripts of runs, read back for resume."""

from agentfsm._deprecated import package_getattr as _package_getattr

from ._lines import (
    MAX_JSON_DEPTH,
    MAX_LINE_BYTES,
    MAX_SESSION_BYTES,
)
from ._location import default_session_dir
from ._reader import (
    SessionLog,
    read_session,
    read_session_chain,
    read_session_messages,
    trace_session,
)
from ._recorder import SessionRecorder
from ._resolve import SessionNotFound, is_session_file, resolve_session, session_files
from ._runs import CallTrace, MetaRecord, RunTrace, TurnTrace, tool_outcome
from ._store import SessionHandle, SessionStore

__all__ = [
    "CallTrace",
    "MAX_JSON_DEPTH",
    "MAX_LINE_BYTES",
    "MAX_SESSION_BYTES",
    "MetaRecord",
    "RunTrace",
    "SessionHandle",
    "SessionLog",
    "SessionNotFound",
    "SessionRecorder",
    "SessionStore",
    "TurnTrace",
    "default_session_dir",
    "is_session_file",
    "read_session",
    "read_session_chain",
    "read_session_messages",
    "resolve_session",
    "session_files",
    "tool_outcome",
    "trace_session",
]

__getattr__ = _package_getattr(__name__)
