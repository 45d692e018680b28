"""Frozen session context: dynamic facts rendered once per session and reused byte for byte.

Prompt caches match on an exact prefix. Re-rendering a file tree or a clock on every turn
would invalidate the whole conversation, so a context provider is asked once per session;
its text becomes the conversation's first user message and is replayed unchanged on every
later turn and run (resume included, since it is stored in the session file).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from agentfsm.engine.messages import Message, UserMessage

__all__ = [
    "CONTEXT_CLOSE",
    "CONTEXT_OPEN",
    "ContextProvider",
    "WorkspaceContext",
    "context_message",
    "is_context_message",
]

CONTEXT_OPEN = "<session-context>"
CONTEXT_CLOSE = "</session-context>"

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


class ContextProvider(Protocol):
    """Renders the session's dynamic context (sync or async)."""

    def render(self) -> str | Awaitable[str]:
        """The context text."""
        ...


def context_message(text: str) -> UserMessage:
    """The first user message that carries the frozen context."""
    return UserMessage(f"{CONTEXT_OPEN}\n{text}\n{CONTEXT_CLOSE}")


def is_context_message(message: Message) -> bool:
    """Whether ``message`` is a frozen-context message."""
    return isinstance(message, UserMessage) and message.content.startswith(CONTEXT_OPEN)


def _head(root: Path) -> str | None:
    git = root / ".git"
    try:
        head = (git / "HEAD").read_text("utf-8").strip()
    except OSError:
        return None
    if not head.startswith("ref: "):
        return head[:40] or None
    ref = head[5:]
    try:
        sha = (git / ref).read_text("utf-8").strip()
    except OSError:
        sha = ""
        try:
            for line in (git / "packed-refs").read_text("utf-8").splitlines():
                if line.endswith(" " + ref):
                    sha = line.split(" ", 1)[0]
        except OSError:
            pass
    branch = ref.removeprefix("refs/heads/")
    return f"{sha[:12]} ({branch})" if sha else f"(no commits on {branch})"


class WorkspaceContext:
    """Context of a project folder: name, path, file tree, git HEAD, clock rounded to the hour.

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
        """Sorted, indented entries (folders end with ``/``), skipping caches and VCS data."""
        lines: list[str] = []
        more = 0

        def walk(folder: Path, depth: int) -> None:
            nonlocal more
            try:
                entries = sorted(os.scandir(folder), key=lambda e: (not e.is_dir(), e.name))
            except OSError:
                return
            for entry in entries:
                is_dir = entry.is_dir(follow_symlinks=False)
                if is_dir and entry.name in SKIPPED_DIRS:
                    continue
                if len(lines) >= self.max_entries:
                    more += 1
                    continue
                lines.append("  " * depth + entry.name + ("/" if is_dir else ""))
                if is_dir and depth + 1 < self.max_depth:
                    walk(Path(entry.path), depth + 1)

        walk(self.root, 0)
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
