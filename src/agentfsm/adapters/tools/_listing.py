"""The folder tools' searches: ``list_dir``, ``glob`` and ``grep`` on descriptors.

Every entry they show or read is checked against the permission policy (denied ones are
skipped and counted, never named) and the protected paths (left out); folders are walked
without following symlinks, within an entry budget and a deadline (see :mod:`.search`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Generator
from contextlib import closing
from pathlib import Path

from agentfsm.engine import ToolResult, current_run

from ._fs import PathRefused, Resolved, SafeRoot, open_regular
from ._search import Budget, Entry, FileScan, GlobPattern, compile_regex, grep_lines, walk
from ._workspace import Permissions

__all__ = ["MAX_GLOB", "MAX_LIST", "MAX_MATCHES", "SKIPPED_DIRS", "FolderTools"]

SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)
MAX_MATCHES = 200
MAX_GLOB = 500
MAX_LIST = 1_000
MAX_SCAN = 100_000
"""Entries a list_dir, glob or grep looks at, at most."""
SEARCH_SECONDS = 10.0
MAX_GREP_FILE_BYTES = 10_000_000
MAX_LINE_BYTES = 1_000_000


def fail(message: str) -> ToolResult:
    return ToolResult(False, "", message)


def why(error: OSError) -> str:
    return str(error.strerror or error)


def shown(name: str) -> str:
    """A file name as printable text (bytes that are not UTF-8 become escapes)."""
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


class FolderTools:
    """``list_dir``, ``glob`` and ``grep`` over :attr:`root` under :attr:`permissions`.

    The limits are attributes, so one instance can be given others.
    """

    root: SafeRoot
    permissions: Permissions
    max_scan = MAX_SCAN
    search_seconds = SEARCH_SECONDS
    max_grep_file_bytes = MAX_GREP_FILE_BYTES

    def _run_protected(self) -> tuple[tuple[str, ...], ...]:
        """The current run's own paths (``RunContext.protected_paths``: an ``Agent``'s
        session folder) at or above a path of the root, as components from the root."""
        ctx = current_run.get()
        found = []
        for path in ctx.protected_paths if ctx is not None else ():
            real = Path(os.path.realpath(path))
            if real.is_relative_to(self.root.path) or self.root.path.is_relative_to(real):
                found.append(
                    real.relative_to(self.root.path).parts if real != self.root.path else ()
                )
        return tuple(found)

    def _hidden(self, parts: tuple[str, ...], run: tuple[tuple[str, ...], ...]) -> bool:
        """Whether ``parts`` lead into a protected or hidden path, or into one of ``run``."""
        return self.root.is_protected(parts) or any(parts[: len(p)] == p for p in run)

    def _allow(self, resolved: Resolved, *tools: str) -> None:
        if self._hidden(resolved.parts, self._run_protected()):
            raise self.root.protected_error(resolved.parts)
        for tool in tools:
            reason = self.permissions.check(tool, resolved.rel)
            if reason is not None:
                raise PathRefused(reason)

    def _denied(self, rel: str, *tools: str) -> bool:
        return any(self.permissions.check(tool, rel) is not None for tool in tools)

    def _keep(self, base: tuple[str, ...]) -> Callable[[tuple[str, ...], bool], bool]:
        """Which walked entries exist for a search: not protected, not a skipped folder."""

        run = self._run_protected()

        def keep(parts: tuple[str, ...], is_dir: bool) -> bool:
            if is_dir and parts[-1] in SKIPPED_DIRS:
                return False
            return not self._hidden((*base, *parts), run)

        return keep

    def _walk(
        self, fd: int, base: tuple[str, ...], matcher: GlobPattern, budget: Budget
    ) -> Generator[Entry, None, None]:
        """The entries a search looks at: not protected or hidden (by name, or by identity
        for a folder), nor in a skipped folder."""
        return walk(
            fd,
            budget,
            keep=self._keep(base),
            descend=matcher.may_descend,
            enter=self.root.shows_dir,
        )

    def _notes(self, denied: int, budget: Budget, skipped: int = 0) -> str:
        notes = ""
        if denied:
            notes += f"\n[{_count(denied, 'path')} skipped by permission rules]"
        if skipped:
            notes += f"\n[{_count(skipped, 'file')} skipped: hard links or special files]"
        return notes + budget.note()

    def list_dir(self, path: str = ".") -> ToolResult:
        """List a folder (folders end with ``/``).

        Args:
            path: The folder, relative to the workspace root.
        """
        rows: list[tuple[bool, str]] = []
        more = False
        try:
            with self.root.resolve(path) as resolved:
                self._allow(resolved, "list_dir")
                base = resolved.parts
                fd = self.root.open_dir(resolved)
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        if len(rows) >= self.max_scan:
                            more = True
                            break
                        try:
                            rows.append((not entry.is_dir(follow_symlinks=False), entry.name))
                        except OSError:
                            continue
            finally:
                os.close(fd)
        except (ValueError, PathRefused) as error:
            return fail(str(error))
        except OSError as error:
            return fail(f"cannot list {path!r}: {why(error)}")
        names: list[str] = []
        denied = 0
        run = self._run_protected()
        for is_file, name in sorted(rows):
            parts = (*base, name)
            if self._hidden(parts, run):
                continue
            if self._denied("/".join(parts), "list_dir"):
                denied += 1
                continue
            names.append(shown(name) + ("" if is_file else "/"))
        body = "\n".join(names[:MAX_LIST]) if names else "(empty)"
        if len(names) > MAX_LIST or more:
            body += f"\n[first {MAX_LIST:,} entries only]"
        if denied:
            body += f"\n[{_count(denied, 'path')} skipped by permission rules]"
        return ToolResult(True, body)

    def _folder(self, tool: str, path: str) -> tuple[tuple[str, ...], int]:
        with self.root.resolve(path) as resolved:
            self._allow(resolved, tool)
            return resolved.parts, self.root.open_dir(resolved)

    def glob(self, pattern: str, path: str = ".") -> ToolResult:
        """Find files by glob pattern (``**`` crosses folders), e.g. ``src/**/*.py``.

        Args:
            pattern: The glob, relative to ``path``.
            path: Where to search, relative to the workspace root.
        """
        try:
            matcher = GlobPattern(pattern)
            base, fd = self._folder("glob", path)
        except (ValueError, PathRefused) as error:
            return fail(str(error))
        except OSError as error:
            return fail(f"cannot search {path!r}: {why(error)}")
        budget = Budget(self.max_scan, self.search_seconds)
        found: list[str] = []
        denied = 0
        full = False
        try:
            entries = self._walk(fd, base, matcher, budget)
            with closing(entries):
                for entry in entries:
                    if not matcher.match(entry.parts):
                        continue
                    rel = "/".join((*base, *entry.parts))
                    if self._denied(rel, "glob"):
                        denied += 1
                    elif len(found) >= MAX_GLOB:
                        full = True
                        break
                    else:
                        found.append(shown(rel))
        finally:
            os.close(fd)
        suffix = f"\n[first {MAX_GLOB} matches only]" if full else ""
        body = "\n".join(sorted(found)) or "(no match)"
        return ToolResult(True, body + suffix + self._notes(denied, budget))

    def grep(
        self, pattern: str, path: str = ".", glob: str = "**/*", ignore_case: bool = False
    ) -> ToolResult:
        """Search file contents with a regular expression (RE2 syntax).

        Files that read_file or grep rules deny, hard links and special files are skipped.

        Args:
            pattern: A regular expression in RE2 syntax (like Python's, without
                backreferences or lookaround).
            path: A file or folder, relative to the workspace root.
            glob: Which files to search under ``path``.
            ignore_case: Match regardless of case.
        """
        try:
            regex = compile_regex(pattern, ignore_case=ignore_case)
            matcher = GlobPattern(glob)
            with self.root.resolve(path) as resolved:
                self._allow(resolved, "grep")
                base = resolved.parts
                one_file = resolved.name is not None and not stat.S_ISDIR(
                    os.stat(resolved.name, dir_fd=resolved.dir_fd, follow_symlinks=False).st_mode
                )
                if one_file:
                    self._allow(resolved, "read_file")
                    fd, _ = self.root.open_file(resolved)
                else:
                    fd = self.root.open_dir(resolved)
        except (ValueError, PathRefused) as error:
            return fail(str(error))
        except OSError as error:
            return fail(f"cannot search {path!r}: {why(error)}")
        budget = Budget(self.max_scan, self.search_seconds)
        hits: list[str] = []
        denied = skipped = capped = 0

        def scan(file_fd: int, rel: str) -> FileScan:
            label = shown(rel)

            def found(number: int, line: bytes) -> bool:
                text = line[:1200].decode("utf-8", errors="replace")[:300]
                hits.append(f"{label}:{number}: {text}")
                return len(hits) < MAX_MATCHES

            return grep_lines(
                file_fd,
                regex,
                max_bytes=self.max_grep_file_bytes,
                max_line=MAX_LINE_BYTES,
                budget=budget,
                found=found,
            )

        try:
            if one_file:
                capped += scan(fd, "/".join(base)).capped
            else:
                entries = self._walk(fd, base, matcher, budget)
                with closing(entries):
                    for entry in entries:
                        if entry.is_dir or entry.is_link or not matcher.match(entry.parts):
                            continue
                        rel = "/".join((*base, *entry.parts))
                        if self._denied(rel, "grep", "read_file"):
                            denied += 1
                            continue
                        try:
                            if not entry.is_file:
                                raise PathRefused(rel)
                            file_fd, info = open_regular(entry.dir_fd, entry.name, rel)
                            if self.root.is_hidden(info):
                                os.close(file_fd)
                                continue
                        except PathRefused:
                            skipped += 1
                            continue
                        except OSError:
                            continue
                        try:
                            capped += scan(file_fd, rel).capped
                        finally:
                            os.close(file_fd)
                        if len(hits) >= MAX_MATCHES or budget.stopped:
                            break
        finally:
            os.close(fd)
        body = "\n".join(hits) or "(no match)"
        if len(hits) >= MAX_MATCHES:
            body += f"\n[first {MAX_MATCHES} matches only]"
        if capped:
            cap = self.max_grep_file_bytes
            body += f"\n[{_count(capped, 'file')} searched only up to byte {cap:,}]"
        return ToolResult(True, body + self._notes(denied, budget, skipped))
