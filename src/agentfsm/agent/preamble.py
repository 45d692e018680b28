"""The session preamble: dynamic facts rendered once per session and reused byte for byte.

Prompt caches match on an exact prefix. Re-rendering a file tree or a clock on every turn
would invalidate the whole conversation, so a preamble provider is asked once per session;
its text becomes the conversation's first user message and is replayed unchanged on every
later turn and run (resume included, since it is stored in the session file).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from agentfsm.adapters.tools.fs import PathRefused, SafeRoot, open_subdir
from agentfsm.engine.messages import Message, UserMessage

__all__ = [
    "PREAMBLE_CLOSE",
    "PREAMBLE_OPEN",
    "PreambleProvider",
    "WorkspacePreamble",
    "is_preamble_message",
    "preamble_message",
]

PREAMBLE_OPEN = "<session-context>"
"""Opens the preamble message (the tag the model sees; kept so stored sessions resume)."""
PREAMBLE_CLOSE = "</session-context>"
"""Closes the preamble message."""

SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        "dist",
        "build",
        ".idea",
        ".vscode",
    }
)


class PreambleProvider(Protocol):
    """Renders the session preamble (sync or async)."""

    def render(self) -> str | Awaitable[str]:
        """The preamble text."""
        ...


def preamble_message(text: str) -> UserMessage:
    """The first user message, carrying the frozen preamble."""
    return UserMessage(f"{PREAMBLE_OPEN}\n{text}\n{PREAMBLE_CLOSE}")


def is_preamble_message(message: Message) -> bool:
    """Whether ``message`` is a preamble message."""
    return isinstance(message, UserMessage) and message.content.startswith(PREAMBLE_OPEN)


MAX_HEAD_BYTES = 4096
MAX_PACKED_REFS_BYTES = 1_000_000


def _read(root: SafeRoot, path: str, limit: int) -> str | None:
    """A file inside the root, capped; ``None`` if it cannot be read safely."""
    try:
        return root.read_bytes(path, limit).decode("utf-8", errors="replace")
    except (OSError, ValueError, PathRefused):
        return None


def _valid_ref(ref: str) -> bool:
    parts = ref.split("/")
    return (
        ref.startswith("refs/")
        and len(ref) < 1024
        and ref.isprintable()
        and all(part not in ("", ".", "..") for part in parts)
    )


def _head(root: Path) -> str | None:
    """``sha (branch)`` of the repository at ``root``, read beneath the root only (no
    symlink out of it, no ref that climbs out, every read capped)."""
    try:
        safe = SafeRoot(root, protected=())
    except OSError:
        return None
    with safe:
        head = _read(safe, ".git/HEAD", MAX_HEAD_BYTES)
        if head is None:
            return None
        head = (head.splitlines() or [""])[0].strip()
        if not head.startswith("ref: "):
            return head[:40] or None
        ref = head[5:].strip()
        if not _valid_ref(ref):
            return None
        sha = (_read(safe, f".git/{ref}", MAX_HEAD_BYTES) or "").strip()
        if not sha:
            for line in (_read(safe, ".git/packed-refs", MAX_PACKED_REFS_BYTES) or "").splitlines():
                if line.endswith(" " + ref):
                    sha = line.split(" ", 1)[0]
    branch = ref.removeprefix("refs/heads/")
    return f"{sha[:12]} ({branch})" if sha else f"(no commits on {branch})"


class WorkspacePreamble:
    """The preamble of a project folder: name, path, file tree, git HEAD, clock rounded to the hour.

    Args:
        root: The workspace folder.
        max_entries: How many tree entries to list at most.
        max_depth: How deep to descend.
        clock: Returns "now" (UTC); injectable for tests.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        max_entries: int = 200,
        max_depth: int = 3,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.max_entries = max_entries
        self.max_depth = max_depth
        self._clock = clock if clock is not None else (lambda: datetime.now(UTC))

    def tree(self) -> list[str]:
        """Sorted, indented entries (folders end with ``/``), skipping caches, VCS data and
        the agent's own folder. Read through descriptors: no symlink is followed."""
        lines: list[str] = []
        more = 0
        scan_limit = max(1_000, self.max_entries * 10)

        def walk(root: SafeRoot, fd: int, depth: int) -> None:
            nonlocal more
            rows: list[tuple[bool, str]] = []
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        if len(rows) >= scan_limit:
                            more += 1
                            break
                        rows.append((not entry.is_dir(follow_symlinks=False), entry.name))
            except OSError:
                return
            for is_file, name in sorted(rows):
                if not is_file and name in SKIPPED_DIRS:
                    continue
                if depth == 0 and root.is_protected((name,)):
                    continue
                if len(lines) >= self.max_entries:
                    more += 1
                    continue
                shown = name.encode("utf-8", "backslashreplace").decode("utf-8")
                lines.append("  " * depth + shown + ("" if is_file else "/"))
                if not is_file and depth + 1 < self.max_depth:
                    try:
                        child = open_subdir(fd, name)
                    except OSError:
                        continue
                    try:
                        walk(root, child, depth + 1)
                    finally:
                        os.close(child)

        try:
            safe = SafeRoot(self.root)
        except OSError:
            return lines
        with safe:
            walk(safe, safe.fd, 0)
        if more:
            lines.append(f"... ({more} more entries not listed)")
        return lines

    def render(self) -> str:
        hour = self._clock().astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        parts = [
            f"project: {self.root.name}",
            f"path: {self.root}",
            f"git HEAD: {_head(self.root) or 'not a git repository'}",
            f"time: {hour.strftime('%Y-%m-%dT%H:00Z')} (rounded to the hour)",
            "files:",
            *("  " + line for line in self.tree()),
        ]
        return "\n".join(parts)
