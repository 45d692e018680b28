"""Reading a session file's records, bounded: a hostile or damaged file cannot hang, exhaust
memory or crash the reader.

* Only regular files are read: a FIFO, device or socket named ``*.jsonl`` is refused
  (opened without blocking, then checked), so is a file over :data:`MAX_SESSION_BYTES`.
* A line longer than :data:`MAX_LINE_BYTES` is skipped without being held in memory.
* A record nested deeper than :data:`MAX_JSON_DEPTH` is skipped (no ``RecursionError``).
* Invalid UTF-8 becomes U+FFFD; strings are read as written, lone surrogates
  (``"\\ud800"``) included.

Skipped lines are counted and reported in one logged warning per file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from agentfsm.engine import nests_deeper_than

from ._resolve import SessionNotFound, is_session_file

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_LINE_BYTES",
    "MAX_SESSION_BYTES",
    "is_session_file",
    "iter_session_records",
    "open_session_file",
]

logger = logging.getLogger("agentfsm.sessions")

MAX_LINE_BYTES = 4 * 1024 * 1024
"""Longest record line read (4 MiB, far above a turn's size); longer lines are skipped."""
MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays and objects in a record; deeper records are skipped."""
MAX_SESSION_BYTES = 512 * 1024 * 1024
"""Largest session file read (512 MiB); a larger one is refused."""


def open_session_file(path: str | Path, *, follow: bool = True) -> BinaryIO:
    """Open ``path`` for reading if it is a regular file of at most :data:`MAX_SESSION_BYTES`.

    Raises ``FileNotFoundError`` when it is missing and :class:`SessionNotFound` when it is
    something else (a FIFO, a device, a folder, with ``follow=False`` a symlink) or too
    large. Never blocks on a FIFO.
    """
    path = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags if follow else flags | os.O_NOFOLLOW)
    except OSError as error:
        if not follow and error.errno == errno.ELOOP:
            raise SessionNotFound(path.name, "a symlink") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SessionNotFound(path.name, "not a regular file")
        if info.st_size > MAX_SESSION_BYTES:
            raise SessionNotFound(
                path.name, f"larger than {MAX_SESSION_BYTES // (1024 * 1024)} MiB"
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _lines(file: BinaryIO) -> Iterator[bytes | None]:
    """Lines of at most :data:`MAX_LINE_BYTES`; ``None`` for each longer line (skipped)."""
    budget = MAX_SESSION_BYTES
    while budget > 0:
        line = file.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        budget -= len(line)
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while budget > 0:  # drop the rest of the long line
                rest = file.readline(MAX_LINE_BYTES)
                budget -= len(rest)
                if not rest or rest.endswith(b"\n"):
                    break
            yield None
            continue
        yield line


def _record(raw: bytes) -> tuple[bool, Any]:
    """``(True, record)`` or ``(False, None)`` for a line that cannot be used."""
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        return True, None
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return False, None
    if nests_deeper_than(record, MAX_JSON_DEPTH):
        return False, None
    return True, record


def iter_session_records(path: str | Path, *, follow: bool = True) -> Iterator[Any]:
    """The parsed records of a session file, in order, skipping unusable lines.

    Blank lines are passed over; a line that is not JSON, too long or too deep is skipped,
    and the count of skipped lines is logged once as a warning. Raises like
    :func:`open_session_file`.
    """
    skipped = 0
    with open_session_file(path, follow=follow) as file:
        try:
            for raw in _lines(file):
                if raw is None:
                    skipped += 1
                    continue
                ok, record = _record(raw)
                if not ok:
                    skipped += 1
                elif record is not None:
                    yield record
        finally:
            if skipped:
                with contextlib.suppress(Exception):
                    logger.warning(
                        "agentfsm: session %s: skipped %d unreadable line(s)",
                        Path(path).stem,
                        skipped,
                    )
