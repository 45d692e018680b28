"""JSONL session files: ``<session_dir>/<timestamp>-<counter>[-<label>].jsonl``.

Each line is one record::

    {"ts": "2026-09-14T05:00:00.000Z", "kind": "meta", "meta": {"event": "run_start", ...}}
    {"ts": "2026-09-14T05:00:01.000Z", "kind": "message", "message": {"role": "user", ...}}
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from agentfsm.engine.messages import Message

from .records import dumps, message_json, message_line, meta_line
from .resolve import SessionNotFound, session_files

__all__ = ["SessionHandle", "SessionStore", "utc_timestamp"]

_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")
_MAX_COUNTER = 9999
"""Names tried per timestamp before giving up."""

_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0)
"""How a session file is opened (``open(path, "ab")``; file descriptors are never inherited)."""
_CREATE = _APPEND | os.O_EXCL
"""How a new session file is created: only if no file has its name yet."""


def utc_timestamp(now: datetime | None = None) -> str:
    """``2026-09-14T05:00:00.000Z``: UTC, milliseconds."""
    if now is None:
        return _now_stamp()
    return now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_time = time.time
_MILLISECONDS = [f".{ms:03d}Z" for ms in range(1000)]
_this_ms: tuple[float, float, str] = (0.0, 0.0, "")
"""The millisecond :func:`_now_stamp` last formatted (its start and end, ``time.time()``),
and its text."""
_this_second: list[Any] = [-1.0, ""]
"""The second :func:`_now_stamp` last formatted (whole seconds, a float), and its text."""


def _now_stamp() -> str:
    """:func:`utc_timestamp` of now, formatting the date and time once a second (and
    nothing while the millisecond lasts). Floating-point seconds throughout: a record's
    stamp costs two comparisons, and no integer arithmetic on nanosecond counts."""
    global _this_ms
    now = _time()
    start, end, text = _this_ms
    if start <= now < end:
        return text
    within = now % 1.0
    second = now - within
    fraction = int(within * 1000)
    if fraction > 999:  # rounding, a hair before the next second
        fraction = 999
    cached = _this_second
    if cached[0] != second:
        cached[1] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        cached[0] = second
    prefix: str = cached[1]
    text = prefix + _MILLISECONDS[fraction]
    start = second + fraction * 0.001
    _this_ms = (start, start + 0.001, text)
    return text


_write = os.write


def _write_rest(fd: int, data: memoryview, written: int, path: str) -> None:
    """Write what is left of ``data`` after a short write of ``written`` bytes."""
    while True:
        if not written:
            raise OSError(f"could not write to {str(path)!r}")
        data = data[written:]
        if not data:
            return
        written = _write(fd, data)


def _close_file(fd: int, held: list[str], path: str) -> None:
    """Close a session file, writing the lines still held for it first (best effort: a
    handle collected or open at exit has nobody to report a failure to)."""
    try:
        if held:
            data = "".join(held).encode("ascii")
            held.clear()
            written = _write(fd, data)
            if written != len(data):
                _write_rest(fd, memoryview(data), written, path)
    except (OSError, ValueError):
        pass
    finally:
        os.close(fd)


def _clock_stamp(clock: Callable[[], datetime]) -> str:
    return utc_timestamp(clock())


class SessionHandle:
    """One session file, reusable across runs.

    The handle remembers the messages written through it, so that a later run on the same
    handle can continue the conversation.

    The file is opened once (append mode: :meth:`SessionStore.new_handle` creates and opens
    it, a handle built from a path opens it on the first write) and kept open until
    :meth:`close` (the recorder closes it when a run ends; a forgotten handle closes it when
    collected). Each write (:meth:`write`, :meth:`write_meta`, :meth:`write_messages`) hands
    its records to the operating system before it returns, so a process killed then loses
    nothing written. The recorder may hold one record back to go out with the next one (an
    assistant reply that asks for tools waits for its first call's ``tool_call_start``, see
    :class:`SessionRecorder`): held records are handed over by the next write, by
    :meth:`close` and when the handle is collected.
    """

    def __init__(self, path: str | Path, clock: Callable[[], datetime] | None = None) -> None:
        self._where: str
        self._path: Path | None
        self.path = path  # kept as text; the Path is built on first use
        self._stamp: Callable[[], str] = (
            _now_stamp if clock is None else partial(_clock_stamp, clock)
        )
        """The ``ts`` of a record written now."""
        self.messages: list[Message] = []
        """Messages written through this handle, in order (the raw, uncompressed transcript)."""
        self.runs = 0
        """Runs that started on this handle."""
        self.policy_state: dict[str, Any] = {}
        """The policies' durable state as the last run on this handle left it."""
        self._fd: int | None = None
        """The open file (a descriptor of this handle alone), or ``None``."""
        self._closer: weakref.finalize[Any, Any] | None = None
        self._held: list[str] = []
        """Lines held back for the next write (never while the file is closed)."""

    @property
    def path(self) -> Path:
        """Where the records go."""
        path = self._path
        if path is None:
            path = self._path = Path(self._where)
        return path

    @path.setter
    def path(self, path: str | Path) -> None:
        self._where = os.fspath(path)
        self._path = path if isinstance(path, Path) else None

    def __fspath__(self) -> str:
        """The file's path: a handle is a path-like object (``os.fspath(handle)``)."""
        return self._where

    @property
    def id(self) -> str:
        """The session id: the file name without ``.jsonl``."""
        return self.path.stem

    @property
    def first_use(self) -> bool:
        """No run has written to this handle yet."""
        return self.runs == 0

    def _line(self, record: Mapping[str, Any]) -> str:
        stamp = self._stamp()
        # ASCII JSON: any text, lone surrogates included (a non-UTF-8 file name becomes one),
        # is written as valid escapes and reads back as the same string.
        if "ts" in record or not record:
            return dumps({"ts": stamp, **record}) + "\n"
        return f'{{"ts":"{stamp}",{dumps(record)[1:]}\n'

    def _adopt(self, fd: int) -> int:
        """Write through the open file ``fd`` until :meth:`close` (or collection)."""
        try:
            self._closer = weakref.finalize(self, _close_file, fd, self._held, self._where)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return fd

    def _open(self) -> int:
        try:
            fd = os.open(self._where, _APPEND, 0o666)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._where, _APPEND, 0o666)
        return self._adopt(fd)

    def _write_text(self, text: str) -> None:
        """Append ``text`` (whole lines of ASCII JSON) after any held lines, handed to the
        operating system before returning; on failure the file is closed (the next write
        opens it again)."""
        held = self._held
        if held:
            held.append(text)
            text = "".join(held)
            held.clear()
        data = text.encode("ascii")
        fd = self._fd
        try:
            if fd is None:
                fd = self._open()
            written = _write(fd, data)
            if written != len(data):
                _write_rest(fd, memoryview(data), written, self._where)
        except BaseException:
            with contextlib.suppress(OSError):
                self.close()
            raise

    def _hold(self, text: str) -> None:
        """Keep ``text`` (whole lines) for the next write, :meth:`close` or collection; with
        the file closed (nothing would write it on collection), write it now."""
        if self._fd is None:
            self._write_text(text)
        else:
            self._held.append(text)

    def _flush(self) -> None:
        """Hand any held lines to the operating system."""
        if self._held:
            self._write_text("")

    def write(self, *records: Mapping[str, Any]) -> None:
        """Append records (``kind`` and payload) as lines, handed to the operating system
        before returning; raises ``OSError`` on failure (the file is then closed, and the
        next write opens it again)."""
        self._write_text("".join([self._line(r) for r in records]))

    def close(self) -> None:
        """Hand any held records to the operating system and close the file if it is open
        (harmless otherwise); the next write reopens it. Raises ``OSError`` when the held
        records could not be written (the file is closed all the same)."""
        try:
            self._flush()
        finally:
            closer, self._closer, self._fd = self._closer, None, None
            if closer is not None:
                closer()

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        """Append a ``meta`` record."""
        self._write_text(self._meta_line(dumps(meta if type(meta) is dict else dict(meta))))

    def _meta_line(self, meta: str) -> str:
        """The line of a ``meta`` record written now, whose JSON text is ``meta``."""
        return meta_line(self._stamp(), meta)

    def _message_lines(self, messages: Sequence[Message]) -> str:
        """The lines of ``message`` records written now."""
        stamp = self._stamp
        return "".join([message_line(stamp(), message_json(m)) for m in messages])

    def write_messages(self, *messages: Message) -> None:
        """Append ``message`` records."""
        self._write_text(self._message_lines(messages))
        self.messages.extend(messages)

    def __repr__(self) -> str:
        return f"SessionHandle({self.id!r})"


_name_second: list[Any] = [-1, ""]
"""The second of the last session name stamped with the system clock, and its text."""
_latest: dict[str, str] = {}
"""Per session folder, the latest timestamp of a session this process named there with the
system clock."""


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
        clock = self._clock
        if clock is None:
            second, micros = divmod(time.time_ns() // 1000, 1_000_000)
            cached = _name_second
            if cached[0] != second:
                cached[1] = time.strftime("%Y%m%dT%H%M%S", time.gmtime(second))
                cached[0] = second
            stamp = f"{cached[1]}{micros:06d}Z"
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
            path = name if key == "." else os.path.join(key, name)  # str(folder / name)
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

    def _create(self, path: str, made: bool) -> int | None:
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
