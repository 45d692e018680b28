"""Bounded searches on descriptors: glob patterns, a folder walk and a streaming grep.

Glob patterns are translated by :mod:`~agentfsm.adapters.tools._globs` (``**`` crosses
folders, ``*``, ``?`` and ``[...]`` do not cross ``/``) and matched with RE2, like grep
patterns, so no pattern can take more than linear time. The walk opens every folder
relative to its parent's descriptor with ``O_NOFOLLOW`` (symlinked folders are never
descended) and stops at an entry budget or a deadline. Files are searched line by line
through a bounded buffer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Generator
from typing import Any, NamedTuple

import re2

from ._fs import open_subdir
from ._globs import segment_regex

__all__ = [
    "Budget",
    "Entry",
    "GlobPattern",
    "compile_regex",
    "grep_lines",
    "walk",
]

MAX_DEPTH = 64
"""Folders deeper than this are not descended (each level holds a descriptor open)."""

_CHUNK = 1 << 16


def _options(*, case_sensitive: bool = True) -> Any:
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = case_sensitive
    return options


def compile_regex(pattern: str, *, ignore_case: bool = False) -> Any:
    """An RE2 regex over UTF-8 bytes; ``ValueError`` with a readable message if it is not
    valid RE2 syntax (no backreferences, no lookaround)."""
    try:
        return re2.compile(
            pattern.encode("utf-8", "surrogatepass"), _options(case_sensitive=not ignore_case)
        )
    except re2.error as error:
        detail = error.args[0] if error.args else error
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise ValueError(
            f"invalid regular expression: {detail} (patterns use RE2 syntax, which has no "
            "backreferences and no lookahead or lookbehind)"
        ) from None


class GlobPattern:
    """A glob over paths relative to a base folder, e.g. ``src/**/*.py``.

    Refused (``ValueError``): empty patterns, NUL bytes, absolute or ``~`` starts and
    ``..`` components, so a pattern can never climb above the base.
    """

    def __init__(self, pattern: str) -> None:
        if not pattern or "\x00" in pattern:
            raise ValueError(f"{pattern!r}: not a usable glob pattern")
        segments = [s for s in pattern.split("/") if s not in ("", ".")]
        if pattern.startswith(("/", "~")) or ".." in segments:
            raise ValueError(f"{pattern!r}: patterns must stay inside the workspace")
        if not segments:
            raise ValueError(f"{pattern!r}: not a usable glob pattern")
        self.segments = segments
        regex = []
        for index, segment in enumerate(segments):
            last = index == len(segments) - 1
            if segment == "**":
                regex.append(".*" if last else "(?:[^/]+/)*")
            else:
                regex.append(segment_regex(segment) + ("" if last else "/"))
        self._regex = self._compile("".join(regex))
        self._prefix = []
        for segment in segments:
            if segment == "**":
                break
            self._prefix.append(self._compile(segment_regex(segment)))
        self._deep = "**" in segments

    @staticmethod
    def _compile(regex: str) -> Any:
        try:
            return re2.compile(regex.encode("utf-8", "surrogatepass"), _options())
        except re2.error:
            raise ValueError("not a usable glob pattern") from None

    def match(self, parts: tuple[str, ...]) -> bool:
        """Whether the path ``parts`` (relative to the base) matches."""
        return self._regex.fullmatch(os.fsencode("/".join(parts))) is not None

    def may_descend(self, parts: tuple[str, ...]) -> bool:
        """Whether anything below the folder ``parts`` can match."""
        for index, part in enumerate(parts):
            if index >= len(self._prefix):
                return self._deep
            if self._prefix[index].fullmatch(os.fsencode(part)) is None:
                return False
        return self._deep or len(parts) < len(self.segments)


class Budget:
    """Limits of one search: entries visited and a deadline. ``stopped`` says why it
    ended early (``None`` if it did not)."""

    def __init__(self, max_entries: int, seconds: float) -> None:
        self.max_entries = max_entries
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.visited = 0
        self.stopped: str | None = None

    def spent(self) -> bool:
        if self.stopped is None:
            if self.visited >= self.max_entries:
                self.stopped = f"after visiting {self.max_entries:,} entries"
            elif time.monotonic() > self.deadline:
                self.stopped = f"after {self.seconds:g} s"
        return self.stopped is not None

    def note(self) -> str:
        return f"\n[search stopped {self.stopped}; results are partial]" if self.stopped else ""


class Entry(NamedTuple):
    """One walked entry: its folder's descriptor (valid while the walk is at it), its name,
    its path from the walk's top, and its type (symlinks are not followed)."""

    dir_fd: int
    name: str
    parts: tuple[str, ...]
    is_dir: bool
    is_file: bool
    is_link: bool


def walk(
    top_fd: int,
    budget: Budget,
    *,
    keep: Callable[[tuple[str, ...], bool], bool] = lambda parts, is_dir: True,
    descend: Callable[[tuple[str, ...]], bool] = lambda parts: True,
    enter: Callable[[int], bool] = lambda fd: True,
) -> Generator[Entry, None, None]:
    """Entries below ``top_fd`` in sorted depth-first order. ``keep`` leaves entries out
    (and their subtrees); ``descend`` prunes folders nothing can match in; ``enter`` is
    asked about each folder opened (its descriptor) before its entries are read."""
    yield from _walk(top_fd, (), budget, keep, descend, enter)


def _walk(
    dir_fd: int,
    prefix: tuple[str, ...],
    budget: Budget,
    keep: Callable[[tuple[str, ...], bool], bool],
    descend: Callable[[tuple[str, ...]], bool],
    enter: Callable[[int], bool],
) -> Generator[Entry, None, None]:
    rows: list[tuple[str, bool, bool, bool]] = []
    try:
        with os.scandir(dir_fd) as entries:
            for item in entries:
                if budget.spent():
                    break
                budget.visited += 1
                try:
                    is_dir = item.is_dir(follow_symlinks=False)
                    is_file = item.is_file(follow_symlinks=False)
                    is_link = item.is_symlink()
                except OSError:
                    continue
                rows.append((item.name, is_dir, is_file, is_link))
    except OSError:
        return
    rows.sort()
    for name, is_dir, is_file, is_link in rows:
        parts = (*prefix, name)
        if not keep(parts, is_dir):
            continue
        yield Entry(dir_fd, name, parts, is_dir, is_file, is_link)
        if not is_dir or len(parts) >= MAX_DEPTH or not descend(parts) or budget.spent():
            continue
        try:
            child = open_subdir(dir_fd, name)
        except OSError:
            continue  # gone, or no longer a real folder (e.g. swapped for a symlink)
        try:
            if enter(child):
                yield from _walk(child, parts, budget, keep, descend, enter)
        finally:
            os.close(child)


class FileScan(NamedTuple):
    """What :func:`grep_lines` saw of one file."""

    binary: bool
    capped: bool


def grep_lines(
    fd: int,
    regex: Any,
    *,
    max_bytes: int,
    max_line: int,
    budget: Budget,
    found: Callable[[int, bytes], bool],
) -> FileScan:
    """Stream ``fd`` line by line; call ``found(number, line)`` for each matching line
    (it returns ``False`` to stop). Reads at most ``max_bytes``; a line longer than
    ``max_line`` is searched in its first ``max_line`` bytes. Binary files (a NUL byte in
    the first 8 KB) are not searched."""
    line = bytearray()
    skipping = capped = False
    number = total = 0
    first = True
    while True:
        if budget.spent():
            return FileScan(False, False)
        if total >= max_bytes:
            capped = bool(os.read(fd, 1))
            break
        chunk = os.read(fd, min(_CHUNK, max_bytes - total))
        if not chunk:
            break
        if first and b"\x00" in chunk[:8192]:
            return FileScan(True, False)
        first = False
        total += len(chunk)
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            if not skipping:
                line += chunk[start : min(end, start + max_line - len(line))]
                if newline >= 0 or len(line) >= max_line:
                    number += 1
                    if regex.search(bytes(line)) is not None and not found(number, bytes(line)):
                        return FileScan(False, False)
                    line.clear()
                    skipping = newline < 0
            elif newline >= 0:
                skipping = False
            if newline < 0:
                break
            start = newline + 1
    if line:
        number += 1
        if regex.search(bytes(line)) is not None:
            found(number, bytes(line))
    return FileScan(False, capped)
