"""Sessions: JSONL transcripts of runs, read back for resume.

A name imported here as itself (``x as x``) and left out of ``__all__`` is offered to the
other agentfsm packages only: it is not public API.
"""

from ._lines import (
    MAX_JSON_CONTAINERS,
    MAX_JSON_DEPTH,
    MAX_LINE_BYTES,
    MAX_SESSION_BYTES,
    MAX_SESSION_CONTAINERS,
)
from ._location import default_session_dir
from ._location import state_home as state_home
from ._reader import (
    SessionLog,
    read_session,
    read_session_chain,
    read_session_messages,
    trace_session,
)
from ._reader import answer_open_tool_calls as answer_open_tool_calls
from ._reader import drop_trailing_user_messages as drop_trailing_user_messages
from ._recorder import SessionRecorder
from ._resolve import SessionNotFound, is_session_file, resolve_session, session_files
from ._runs import CallTrace, MetaRecord, RunTrace, TurnTrace, tool_outcome
from ._store import SessionHandle, SessionStore

__all__ = [
    "CallTrace",
    "MAX_JSON_CONTAINERS",
    "MAX_JSON_DEPTH",
    "MAX_LINE_BYTES",
    "MAX_SESSION_BYTES",
    "MAX_SESSION_CONTAINERS",
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
