"""Reading a session file's records, bounded: a hostile or damaged file cannot hang, exhaust
memory or crash the reader.

* Only regular files are read: a FIFO, device or socket named ``*.jsonl`` is refused
  (opened without blocking, then checked), so is a file over :data:`MAX_SESSION_BYTES`.
* A line longer than :data:`MAX_LINE_BYTES` is skipped without being held in memory.
* A record nested deeper than :data:`MAX_JSON_DEPTH`, or holding more than
  :data:`MAX_JSON_CONTAINERS` arrays and objects, is skipped: both are read from the line's
  brackets before it is parsed, in linear time at C speed (no ``RecursionError``, and no
  line of a million empty objects held in memory); so is a record past
  :data:`MAX_SESSION_CONTAINERS` in a file (a budget a resumed session's files share).
* A UTF-8 byte order mark opening a line is passed over; invalid UTF-8 becomes U+FFFD;
  strings are read as written, lone surrogates (``"\\ud800"``) included.

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

from attrs import define

from agentfsm.engine import json_shape

from ._resolve import SessionNotFound, is_session_file

__all__ = [
    "MAX_JSON_CONTAINERS",
    "MAX_JSON_DEPTH",
    "MAX_LINE_BYTES",
    "MAX_SESSION_BYTES",
    "MAX_SESSION_CONTAINERS",
    "ReadBudget",
    "is_session_file",
    "iter_session_records",
    "warn_skipped",
    "open_session_file",
]

logger = logging.getLogger("agentfsm.sessions")

MAX_LINE_BYTES = 4 * 1024 * 1024
"""Longest record line read (4 MiB, far above a turn's size); longer lines are skipped."""
MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays and objects in a record; deeper records are skipped."""
MAX_JSON_CONTAINERS = 100_000
"""Most arrays and objects in one record (a long compressed history holds a few thousand);
a record with more is skipped."""
MAX_SESSION_CONTAINERS = 2_000_000
"""Most arrays and objects in the records read from one file (or a resumed session's files
together: about 150 MB parsed); a record past that is skipped."""
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


@define
class ReadBudget:
    """What is left to read of one file, or of a resumed session's files together."""

    bytes: int = MAX_SESSION_BYTES
    """Bytes of lines (reading stops after the line that spends the last)."""
    containers: int = MAX_SESSION_CONTAINERS
    """Arrays and objects of the records kept (a record that would spend more is skipped)."""
    skipped: int = 0
    """Lines skipped so far (the records a reader passes over too)."""


def _lines(file: BinaryIO, budget: ReadBudget) -> Iterator[bytes | None]:
    """Lines of at most :data:`MAX_LINE_BYTES`, while ``budget`` has bytes left; ``None``
    for each longer line (skipped)."""
    while budget.bytes > 0:
        line = file.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        budget.bytes -= len(line)
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while budget.bytes > 0:  # drop the rest of the long line
                rest = file.readline(MAX_LINE_BYTES)
                budget.bytes -= len(rest)
                if not rest or rest.endswith(b"\n"):
                    break
            yield None
            continue
        yield line


def _record(raw: bytes, budget: ReadBudget) -> tuple[bool, Any]:
    """``(True, record)`` or ``(False, None)`` for a line that cannot be used."""
    if not raw.strip():
        return True, None
    depth, containers = json_shape(raw)
    if depth > MAX_JSON_DEPTH or containers > min(MAX_JSON_CONTAINERS, budget.containers):
        return False, None
    try:
        # a byte order mark (an editor's, at the file's start) is no part of the record
        record = json.loads(raw.decode("utf-8", errors="replace").removeprefix("\ufeff"))
    except ValueError:
        return False, None
    budget.containers -= containers
    return True, record


def iter_session_records(
    path: str | Path, *, follow: bool = True, budget: ReadBudget | None = None, warn: bool = True
) -> Iterator[Any]:
    """The parsed records of a session file, in order, skipping unusable lines.

    Blank lines are passed over; a line that is not JSON, too long, too deep or holding too
    many containers is skipped and counted in ``budget.skipped``; with ``warn``, the count
    is logged once as a warning. ``budget`` (a fresh :class:`ReadBudget` by default) bounds
    what is read and kept; a resumed session's files share one. Raises like
    :func:`open_session_file`.
    """
    budget = ReadBudget() if budget is None else budget
    before = budget.skipped
    with open_session_file(path, follow=follow) as file:
        try:
            for raw in _lines(file, budget):
                ok, record = (False, None) if raw is None else _record(raw, budget)
                if not ok:
                    budget.skipped += 1
                elif record is not None:
                    yield record
        finally:
            if warn:
                warn_skipped(path, budget.skipped - before)


def warn_skipped(path: str | Path, skipped: int) -> None:
    """Log the one warning of a file whose lines or records were skipped (if any were)."""
    if skipped:
        with contextlib.suppress(Exception):
            logger.warning(
                "agentfsm: session %s: skipped %d unreadable line(s)", Path(path).stem, skipped
            )
