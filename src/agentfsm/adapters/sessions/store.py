"""JSONL session files: ``<session_dir>/<timestamp>-<counter>[-<label>].jsonl``.

Each line is one record::

    {"ts": "2026-09-14T05:00:00.000Z", "kind": "meta", "meta": {"event": "run_start", ...}}
    {"ts": "2026-09-14T05:00:01.000Z", "kind": "message", "message": {"role": "user", ...}}
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
import weakref
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentfsm.engine.messages import Message
from agentfsm.engine.serialization import to_jsonable

from .resolve import SessionNotFound, session_files

__all__ = ["SessionHandle", "SessionStore", "utc_timestamp"]

_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")
_MAX_COUNTER = 9999
"""Names tried per timestamp before giving up."""


def utc_timestamp(now: datetime | None = None) -> str:
    """``2026-09-14T05:00:00.000Z``: UTC, milliseconds."""
    if now is None:
        return _now_stamp()
    return now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_second: list[Any] = [None, ""]
"""The last whole second formatted by :func:`_now_stamp`, and its text."""


def _now_stamp() -> str:
    """:func:`utc_timestamp` of now, formatting the date and time once a second."""
    now = time.time()
    second = int(now)
    cached = _second
    if cached[0] != second:
        cached[1] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        cached[0] = second
    return f"{cached[1]}.{int((now - second) * 1000):03d}Z"


_encode = json.JSONEncoder(separators=(",", ":")).encode
"""``json.dumps(..., separators=(",", ":"))`` without building an encoder per call (ASCII:
any text, lone surrogates included, becomes valid escapes)."""


class SessionHandle:
    """One session file. Created lazily on the first write; reusable across runs.

    The handle remembers the messages written through it, so that a later run on the same
    handle can continue the conversation.

    The file is opened once (append mode) and kept open until :meth:`close` (the recorder
    closes it when a run ends; a forgotten handle closes it when collected). Each write is
    flushed to the operating system before it returns, so a killed process loses at most
    the record being written.
    """

    def __init__(self, path: Path, clock: Callable[[], datetime] | None = None) -> None:
        self.path = path
        """Where the records go."""
        self._clock = clock
        self.messages: list[Message] = []
        """Messages written through this handle, in order (the raw, uncompressed transcript)."""
        self.runs = 0
        """Runs that started on this handle."""
        self.policy_state: dict[str, Any] = {}
        """The policies' durable state as the last run on this handle left it."""
        self._file: io.FileIO | None = None
        self._closer: weakref.finalize[Any, Any] | None = None

    @property
    def id(self) -> str:
        """The session id: the file name without ``.jsonl``."""
        return self.path.stem

    @property
    def first_use(self) -> bool:
        """No run has written to this handle yet."""
        return self.runs == 0

    def _line(self, record: Mapping[str, Any]) -> str:
        stamp = _now_stamp() if self._clock is None else utc_timestamp(self._clock())
        # ASCII JSON: any text, lone surrogates included (a non-UTF-8 file name becomes one),
        # is written as valid escapes and reads back as the same string.
        if "ts" in record or not record:
            return _encode({"ts": stamp, **record})
        return f'{{"ts":"{stamp}",{_encode(record)[1:]}'

    def _open(self) -> io.FileIO:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        file = self.path.open("ab", buffering=0)  # unbuffered: each write is a syscall
        self._file = file
        self._closer = weakref.finalize(self, file.close)
        return file

    def write(self, *records: Mapping[str, Any]) -> None:
        """Append records (``kind`` and payload) as lines, handed to the operating system
        before returning; raises ``OSError`` on failure (the file is then closed, and the
        next write opens it again)."""
        data = memoryview("".join([self._line(r) + "\n" for r in records]).encode("ascii"))
        file = self._file
        try:
            if file is None:
                file = self._open()
            while data:
                written = file.write(data)
                if not written:
                    raise OSError(f"could not write to {str(self.path)!r}")
                data = data[written:]
        except BaseException:
            with contextlib.suppress(OSError):
                self.close()
            raise

    def close(self) -> None:
        """Close the file if it is open (harmless otherwise); the next write reopens it."""
        closer, self._closer, self._file = self._closer, None, None
        if closer is not None:
            closer()

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Append a ``meta`` record."""
        self.write({"kind": "meta", "meta": dict(meta)})

    def write_messages(self, *messages: Message) -> None:
        """Append ``message`` records."""
        self.write(*({"kind": "message", "message": to_jsonable(m)} for m in messages))
        self.messages.extend(messages)

    def __repr__(self) -> str:
        return f"SessionHandle({self.id!r})"


class SessionStore:
    """A folder of session files."""

    def __init__(
        self, session_dir: str | Path, *, clock: Callable[[], datetime] | None = None
    ) -> None:
        self.session_dir = Path(session_dir)
        self._clock = clock

    def new_handle(self, label: str | None = None) -> SessionHandle:
        """A handle on a new, unused file name (the file appears on the first write).

        Raises :class:`NotADirectoryError` when ``session_dir`` exists and is not a folder.
        Any other problem creating the folder or the file is left to the first write (which
        the recorder reports as a warning): recording is best effort.
        """
        now = self._clock() if self._clock is not None else datetime.now(UTC)
        stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        suffix = f"-{_LABEL.sub('-', label).strip('-')}" if label else ""
        try:
            self.session_dir.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise NotADirectoryError(
                f"the session folder {str(self.session_dir)!r} is not a folder"
            ) from None
        except OSError:
            pass  # best effort: the first write reports the problem
        for counter in range(1, _MAX_COUNTER + 1):
            path = self.session_dir / f"{stamp}-{counter:04d}{suffix}.jsonl"
            try:
                if any(self.session_dir.glob(f"{stamp}-{counter:04d}*.jsonl")):
                    continue
                path.touch(exist_ok=False)  # reserve the name against a concurrent writer
            except FileExistsError:
                continue
            except OSError:
                pass  # best effort: the first write reports the problem
            return SessionHandle(path, self._clock)
        raise FileExistsError(f"no free session name for {stamp} in {str(self.session_dir)!r}")

    def list(self) -> list[Path]:
        """Session files (regular ``*.jsonl`` files only), oldest first by modification
        time."""
        try:
            return session_files(self.session_dir)
        except SessionNotFound:
            return []
