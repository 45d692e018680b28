"""JSONL session files: ``<session_dir>/<timestamp>-<counter>[-<label>].jsonl``.

Each line is one record::

    {"ts": "2026-09-14T05:00:00.000Z", "kind": "meta", "meta": {"event": "run_start", ...}}
    {"ts": "2026-09-14T05:00:01.000Z", "kind": "message", "message": {"role": "user", ...}}

A line is one ``json.dumps`` of the record unstructured by the project's converter, with its
UTC timestamp first: compact ASCII JSON, so any text (lone surrogates and U+2028 included)
is written as escapes and reads back as the same string.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentfsm.engine import Message, to_jsonable

from ._resolve import SessionNotFound, session_files

__all__ = ["SessionHandle", "SessionStore", "utc_timestamp"]

_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")
_MAX_COUNTER = 9999
"""Names tried per timestamp before giving up."""

_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0)
"""How a session file is opened (``open(path, "ab")``; file descriptors are never inherited)."""
_CREATE = _APPEND | os.O_EXCL
"""How a new session file is created: only if no file has its name yet."""


def utc_timestamp(now: datetime | None = None) -> str:
    """``2026-09-14T05:00:00.000Z``: UTC, milliseconds (``now``, or the current time)."""
    moment = now if now is not None else datetime.now(UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _record_line(stamp: str, record: Mapping[str, Any]) -> str:
    """The line of ``record`` (``kind`` and its payload) written at ``stamp``: ``ts`` first,
    then the record unstructured, in compact ASCII JSON."""
    return json.dumps({"ts": stamp, **to_jsonable(dict(record))}, separators=(",", ":")) + "\n"


def _write_all(fd: int, data: bytes, path: str) -> None:
    """Hand all of ``data`` to the operating system (a short write is continued)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if not written:
            raise OSError(f"could not write to {path!r}")
        view = view[written:]


class SessionHandle:
    """One session file, reusable across runs.

    The handle remembers the messages written through it, so that a later run on the same
    handle can continue the conversation.

    The file is opened once (append mode: :meth:`SessionStore.new_handle` creates and opens
    it, a handle built from a path opens it on the first write) and kept open until
    :meth:`close` (the recorder closes it when a run ends; a forgotten handle closes it when
    collected). Each write (:meth:`write`, :meth:`write_meta`, :meth:`write_messages`) hands
    its records to the operating system before it returns, so a process killed then loses
    nothing written. Nothing is held back for a later write.
    """

    def __init__(self, path: str | Path, clock: Callable[[], datetime] | None = None) -> None:
        self.path = Path(path)
        """Where the records go."""
        self._clock = clock
        self.messages: list[Message] = []
        """Messages written through this handle, in order (the raw, uncompressed transcript)."""
        self.runs = 0
        """Runs that started on this handle."""
        self.policy_state: dict[str, Any] = {}
        """The policies' durable state as the last run on this handle left it."""
        self.error: OSError | None = None
        """Why a record could not be written, or ``None``: the file holds every record
        written before it, whole, and nothing after (see :meth:`write`)."""
        self._fd: int | None = None
        """The open file (a descriptor of this handle alone), or ``None``."""
        self._closer: weakref.finalize[Any, Any] | None = None

    def __fspath__(self) -> str:
        """The file's path: a handle is a path-like object (``os.fspath(handle)``)."""
        return os.fspath(self.path)

    @property
    def id(self) -> str:
        """The session id: the file name without ``.jsonl``."""
        return self.path.stem

    @property
    def first_use(self) -> bool:
        """No run has written to this handle yet."""
        return self.runs == 0

    def _adopt(self, fd: int) -> int:
        """Write through the open file ``fd`` until :meth:`close` (or collection)."""
        try:
            self._closer = weakref.finalize(self, os.close, fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return fd

    def _open(self) -> int:
        try:
            fd = os.open(self.path, _APPEND, 0o666)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, _APPEND, 0o666)
        return self._adopt(fd)

    def write(self, *records: Mapping[str, Any]) -> None:
        """Append records (``kind`` and payload) as lines, handed to the operating system
        before returning.

        All or nothing: when the write fails (a full disk, a file size limit) the file is
        cut back to its length before these records, so it never keeps part of a line, and
        the handle is spent: :attr:`error` is set, and this and every later write raise
        ``OSError`` (the file then holds the run up to its last whole record, as a killed
        process leaves it, and no later record that would leave a gap in it).
        """
        if self.error is not None:
            raise OSError(
                self.error.errno,
                f"session {self.id} is no longer recorded: an earlier record could not be "
                f"written ({self.error.strerror or self.error})",
            )
        stamp = utc_timestamp(self._clock() if self._clock is not None else None)
        try:
            data = "".join([_record_line(stamp, r) for r in records]).encode("ascii")
        except (TypeError, ValueError) as exc:  # a record JSON cannot hold
            self.error = OSError(f"a record could not be serialized: {exc}")
            self.close()
            raise self.error from exc
        size: int | None = None
        try:
            fd = self._fd if self._fd is not None else self._open()
            found = os.fstat(fd)
            if found.st_nlink == 0:  # the file was removed under the open handle
                raise FileNotFoundError(
                    errno.ENOENT, "the session file was removed", str(self.path)
                )
            size = found.st_size
            _write_all(fd, data, str(self.path))
        except BaseException as exc:
            if size is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)  # no part of a record stays behind
            with contextlib.suppress(OSError):
                self.close()
            if isinstance(exc, OSError):
                self.error = exc
            raise

    def remove_if_empty(self) -> bool:
        """Remove the file when nothing was ever written to it (a run refused or cancelled
        before its start was recorded): no empty session is left to be ``latest``. Whether
        it was removed."""
        self.close()
        try:
            if self.path.stat().st_size:
                return False
            self.path.unlink()
        except OSError:
            return False
        return True

    def close(self) -> None:
        """Close the file if it is open (harmless otherwise); the next write reopens it."""
        closer, self._closer, self._fd = self._closer, None, None
        if closer is not None:
            closer()

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Append a ``meta`` record."""
        self.write({"kind": "meta", "meta": meta})

    def write_messages(self, *messages: Message) -> None:
        """Append ``message`` records."""
        self.write(*[{"kind": "message", "message": m} for m in messages])
        self.messages.extend(messages)

    def __repr__(self) -> str:
        return f"SessionHandle({self.id!r})"


_latest: dict[str, str] = {}
"""Per session folder, the latest timestamp of a session this process named there with the
system clock (read and written under :data:`_naming`)."""
_naming = threading.Lock()
"""Held while a session of this process is named: two threads naming sessions in the same
microsecond then see each other's name."""


class SessionStore:
    """A folder of session files."""

    def __init__(
        self, session_dir: str | Path, *, clock: Callable[[], datetime] | None = None
    ) -> None:
        self.session_dir = Path(session_dir)
        self._clock = clock

    def new_handle(self, label: str | None = None) -> SessionHandle:
        """A handle on a new session file, created (empty) and opened now, whose timestamp
        and counter (the id up to the label) no other session file of the folder has.

        The file is created only if no file has its name, which is safe against a
        concurrent writer. The folder is searched for the same timestamp and counter under
        another label only when such a file could be there: with a clock given to the store,
        once a name was found taken, and when this process already named a session in the
        folder with this timestamp or a later one (the system clock went back). Timestamps
        have microseconds: another process would have to name its session in the same
        microsecond, with another label (the same name is refused by the exclusive create).

        Raises :class:`NotADirectoryError` when ``session_dir`` exists and is not a folder.
        Any other problem creating the folder or the file is left to the first write (which
        the recorder reports as a warning): recording is best effort.
        """
        with _naming:
            return self._new_handle(label)

    def _new_handle(self, label: str | None) -> SessionHandle:
        clock = self._clock
        if clock is None:
            second, micros = divmod(time.time_ns() // 1000, 1_000_000)
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(second)) + f"{micros:06d}Z"
        else:
            stamp = clock().astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        suffix = f"-{_LABEL.sub('-', label).strip('-')}" if label else ""
        folder = self.session_dir
        key = str(folder)
        search = clock is not None or stamp <= _latest.get(key, "")
        made = search and self._make_folder()
        for counter in range(1, _MAX_COUNTER + 1):
            prefix = f"{stamp}-{counter:04d}"
            if (search or counter > 1) and self._taken(prefix):
                continue
            name = f"{prefix}{suffix}.jsonl"
            path = folder / name
            try:
                fd = self._create(path, made)
            except FileExistsError:
                continue
            if clock is None and stamp > _latest.get(key, ""):
                _latest[key] = stamp
            handle = SessionHandle(path, clock)
            if fd is not None:
                handle._adopt(fd)
            return handle
        raise FileExistsError(f"no free session name for {stamp} in {str(folder)!r}")

    def _make_folder(self) -> bool:
        """Create the folder if missing; whether it is there (best effort)."""
        try:
            self.session_dir.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise NotADirectoryError(
                f"the session folder {str(self.session_dir)!r} is not a folder"
            ) from None
        except OSError:
            return False  # best effort: the first write reports the problem
        return True

    def _taken(self, prefix: str) -> bool:
        """Whether a session file of the folder starts with ``prefix`` (id up to the
        label)."""
        try:
            return any(self.session_dir.glob(f"{prefix}*.jsonl"))
        except OSError:
            return False

    def _create(self, path: Path, made: bool) -> int | None:
        """The open file descriptor of the new file ``path``, or ``None`` when it could not
        be created (the first write reports why); raises ``FileExistsError`` when a file
        has that name."""
        try:
            return os.open(path, _CREATE, 0o666)
        except FileExistsError:
            raise
        except OSError:
            if made or not self._make_folder():
                return None
        try:
            return os.open(path, _CREATE, 0o666)
        except FileExistsError:
            raise
        except OSError:
            return None

    def list(self) -> list[Path]:
        """Session files (regular ``*.jsonl`` files only), oldest first by modification
        time."""
        try:
            return session_files(self.session_dir)
        except SessionNotFound:
            return []
