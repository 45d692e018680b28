"""Sessions: JSONL transcripts of runs, read back for resume.

A name imported here as itself (``x as x``) and left out of ``__all__`` is offered to the
other agentfsm packages only: it is not public API.
"""

from ._lines import (
    MAX_JSON_DEPTH,
    MAX_LINE_BYTES,
    MAX_SESSION_BYTES,
)
from ._lines import iter_session_records as iter_session_records
from ._location import default_session_dir
from ._location import state_home as state_home
from ._reader import answer_open_tool_calls as answer_open_tool_calls
from ._reader import drop_trailing_user_messages as drop_trailing_user_messages
from ._reader import (
    read_session_messages,
)
from ._reader import read_session_policy_state as read_session_policy_state
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
