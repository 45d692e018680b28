"""Sessions: JSONL transcripts of runs, read back for resume."""

from ._lines import (
    MAX_JSON_DEPTH,
    MAX_LINE_BYTES,
    MAX_SESSION_BYTES,
)
from ._location import default_session_dir
from ._reader import (
    read_session_messages,
)
from ._recorder import SessionRecorder
from ._resolve import SessionNotFound, is_session_file, resolve_session, session_files
from ._store import SessionHandle, SessionStore
from ._trace import RunTrace, trace_session

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_LINE_BYTES",
    "MAX_SESSION_BYTES",
    "RunTrace",
    "SessionHandle",
    "SessionNotFound",
    "SessionRecorder",
    "SessionStore",
    "default_session_dir",
    "is_session_file",
    "read_session_messages",
    "resolve_session",
    "session_files",
    "trace_session",
]
