"""The workspace tools: read, list, glob, grep, write, edit and shell, confined to a root.

``workspace_tools(root)`` returns a :class:`ToolBox` with all of them. Every path is checked
against the root (see :class:`Workspace`) and every call against the permission policy
(rules given in code plus ``.agentfsm/settings.json``); a refusal is a failed result.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentfsm.engine.context import current_run
from agentfsm.engine.messages import ToolCall, ToolResult
from agentfsm.engine.process import CommandSandbox

from .shell_tool import ShellTool
from .toolbox import FunctionTool, ToolBox
from .workspace import PROTECTED_DIR, OutsideWorkspace, Permissions, Workspace

__all__ = ["SKIPPED_DIRS", "WorkspaceTools", "workspace_tools"]

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
MAX_READ_CHARS = 200_000
MAX_MATCHES = 200
MAX_GLOB = 500


def sha(text: str) -> str:
    """Short content hash, as used in edit metadata."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _is_binary(data: bytes) -> bool:
    return b"\x00" in data[:8192]


def _pruned(call_id: str) -> bool:
    """Whether the run replaced that call's result with a prune marker."""
    ctx = current_run.get()
    if ctx is None:
        return False
    state = ctx.policy_state.get("prune_tool_results") or {}
    return any(k.startswith(f"{call_id}:") and isinstance(v, str) for k, v in state.items())


class WorkspaceTools:
    """The state behind the workspace tools of one session (reads already shown)."""

    def __init__(
        self,
        root: str | Path,
        permissions: Permissions | None = None,
        *,
        sandbox: CommandSandbox | None = None,
        protected: Sequence[str] = (),
    ) -> None:
        self.workspace = Workspace(root)
        self.sandbox = sandbox
        self.protected = (PROTECTED_DIR, *protected)
        self.permissions = (permissions or Permissions()) + Permissions.from_settings(
            self.workspace.root
        )
        self._reads: dict[tuple[str, int, int], tuple[str, str]] = {}

    def _path(self, tool: str, path: str) -> Path:
        resolved = self.workspace.resolve(path)
        reason = self.permissions.check(tool, self.workspace.relative(resolved))
        if reason is not None:
            raise PermissionError(reason)
        return resolved

    # -- reading ---------------------------------------------------------------------

    def read_file(
        self, path: str, offset: int = 1, limit: int = 2000, call: ToolCall | None = None
    ) -> ToolResult:
        """Read a text file, with line numbers.

        Args:
            path: The file, relative to the workspace root.
            offset: The first line to show (1-based).
            limit: How many lines to show.
        """
        try:
            target = self._path("read_file", path)
            data = target.read_bytes()
        except (OutsideWorkspace, PermissionError) as error:
            return ToolResult(False, "", str(error))
        except OSError as error:
            return ToolResult(False, "", f"cannot read {path!r}: {error.strerror or error}")
        if _is_binary(data):
            return ToolResult(True, f"{path} is a binary file ({len(data)} bytes); not shown")
        text = data.decode("utf-8", errors="replace")
        key = (self.workspace.relative(target), offset, limit)
        digest = sha(text)
        earlier = self._reads.get(key)
        if earlier is not None and earlier[0] == digest and not _pruned(earlier[1]):
            return ToolResult(
                True,
                f"{path} is unchanged since you read it (call {earlier[1]}); its content is above.",
            )
        lines = text.splitlines()
        start = max(1, offset)
        window = lines[start - 1 : start - 1 + max(1, limit)]
        width = len(str(start + len(window)))
        body = "\n".join(f"{n:>{width}}\t{line}" for n, line in enumerate(window, start))[
            :MAX_READ_CHARS
        ]
        shown_to = start + len(window) - 1
        if start > 1 or shown_to < len(lines):
            body = f"[{path}: lines {start}-{shown_to} of {len(lines)}]\n{body}"
        if call is not None:
            self._reads[key] = (digest, call.id)
        return ToolResult(True, body)

    def list_dir(self, path: str = ".") -> ToolResult:
        """List a folder (folders end with ``/``).

        Args:
            path: The folder, relative to the workspace root.
        """
        try:
            target = self._path("list_dir", path)
            entries = sorted(os.scandir(target), key=lambda e: (not e.is_dir(), e.name))
        except (OutsideWorkspace, PermissionError) as error:
            return ToolResult(False, "", str(error))
        except OSError as error:
            return ToolResult(False, "", f"cannot list {path!r}: {error.strerror or error}")
        names = [e.name + ("/" if e.is_dir() else "") for e in entries]
        return ToolResult(True, "\n".join(names) if names else "(empty)")

    def glob(self, pattern: str, path: str = ".") -> ToolResult:
        """Find files by glob pattern (``**`` crosses folders), e.g. ``src/**/*.py``.

        Args:
            pattern: The glob, relative to ``path``.
            path: Where to search, relative to the workspace root.
        """
        if ".." in Path(pattern).parts or pattern.startswith(("/", "~")):
            return ToolResult(False, "", f"{pattern!r}: patterns must stay inside the workspace")
        try:
            base = self._path("glob", path)
        except (OutsideWorkspace, PermissionError) as error:
            return ToolResult(False, "", str(error))
        found = []
        for match in sorted(base.glob(pattern)):
            if any(part in SKIPPED_DIRS for part in match.relative_to(base).parts):
                continue
            try:
                resolved = self.workspace.resolve(str(match))
            except OutsideWorkspace:
                continue
            found.append(self.workspace.relative(resolved))
            if len(found) >= MAX_GLOB:
                break
        suffix = f"\n[first {MAX_GLOB} matches only]" if len(found) >= MAX_GLOB else ""
        return ToolResult(True, ("\n".join(found) or "(no match)") + suffix)

    def grep(
        self, pattern: str, path: str = ".", glob: str = "**/*", ignore_case: bool = False
    ) -> ToolResult:
        """Search file contents with a regular expression.

        Args:
            pattern: A Python regular expression.
            path: A file or folder, relative to the workspace root.
            glob: Which files to search under ``path``.
            ignore_case: Match regardless of case.
        """
        try:
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as error:
            return ToolResult(False, "", f"invalid regular expression: {error}")
        try:
            base = self._path("grep", path)
        except (OutsideWorkspace, PermissionError) as error:
            return ToolResult(False, "", str(error))
        files = [base] if base.is_file() else sorted(p for p in base.glob(glob) if p.is_file())
        hits: list[str] = []
        for file in files:
            if any(part in SKIPPED_DIRS for part in file.parts):
                continue
            try:
                resolved = self.workspace.resolve(str(file))
                data = resolved.read_bytes()
            except (OutsideWorkspace, OSError):
                continue
            if _is_binary(data) or len(data) > 5_000_000:
                continue
            for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                if regex.search(line):
                    hits.append(f"{self.workspace.relative(resolved)}:{number}: {line[:300]}")
                    if len(hits) >= MAX_MATCHES:
                        return ToolResult(
                            True, "\n".join(hits) + f"\n[first {MAX_MATCHES} matches only]"
                        )
        return ToolResult(True, "\n".join(hits) or "(no match)")

    # -- changing ----------------------------------------------------------------------

    def write_file(self, path: str, content: str) -> ToolResult:
        """Create or overwrite a file (folders are created as needed).

        Args:
            path: The file, relative to the workspace root.
            content: The whole new content.
        """
        try:
            target = self._path("write_file", path)
        except (OutsideWorkspace, PermissionError) as error:
            return ToolResult(False, "", str(error))
        before = target.read_text("utf-8", errors="replace") if target.is_file() else ""
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, "utf-8")
        except OSError as error:
            return ToolResult(False, "", f"cannot write {path!r}: {error.strerror or error}")
        rel = self.workspace.relative(target)
        meta = {"path": rel, "before_sha": sha(before), "after_sha": sha(content)}
        return ToolResult(True, f"wrote {rel} ({len(content)} characters)", metadata=meta)

    def edit_file(self, path: str, old: str, new: str, replace_all: bool = False) -> ToolResult:
        """Replace exact text in a file. ``old`` must appear exactly once unless
        ``replace_all`` is set.

        Args:
            path: The file, relative to the workspace root.
            old: The exact text to replace (include enough context to make it unique).
            new: The replacement text.
            replace_all: Replace every occurrence.
        """
        try:
            target = self._path("edit_file", path)
            before = target.read_text("utf-8")
        except (OutsideWorkspace, PermissionError) as error:
            return ToolResult(False, "", str(error))
        except OSError as error:
            return ToolResult(False, "", f"cannot read {path!r}: {error.strerror or error}")
        if not old:
            return ToolResult(False, "", "old must not be empty; use write_file to create a file")
        count = before.count(old)
        if count == 0:
            return ToolResult(
                False,
                "",
                f"the text to replace was not found in {path}; read the file and copy it exactly",
            )
        if count > 1 and not replace_all:
            return ToolResult(
                False,
                "",
                f"the text to replace appears {count} times in {path}; "
                "include more context or set replace_all",
            )
        after = before.replace(old, new) if replace_all else before.replace(old, new, 1)
        target.write_text(after, "utf-8")
        rel = self.workspace.relative(target)
        meta = {"path": rel, "before_sha": sha(before), "after_sha": sha(after)}
        return ToolResult(
            True, f"edited {rel} ({count if replace_all else 1} replacement(s))", metadata=meta
        )

    def tools(self) -> list[FunctionTool]:
        """The tools, with their behaviour flags."""
        return [
            FunctionTool(self.read_file, concurrency_safe=True),
            FunctionTool(self.list_dir, concurrency_safe=True),
            FunctionTool(self.glob, concurrency_safe=True),
            FunctionTool(self.grep, concurrency_safe=True),
            FunctionTool(self.write_file, destructive=True),
            FunctionTool(self.edit_file, destructive=True),
            ShellTool(
                self.workspace.root,
                self.permissions,
                sandbox=self.sandbox,
                protected=self.protected,
            ).tool(),
        ]


def workspace_tools(
    root: str | Path,
    *,
    permissions: Permissions | None = None,
    sandbox: CommandSandbox | None = None,
    protected: Sequence[str] = (),
    **toolbox: Any,
) -> ToolBox:
    """A :class:`ToolBox` with the workspace tools confined to ``root``.

    ``permissions`` add to the rules of ``<root>/.agentfsm/settings.json``. ``sandbox``
    confines the ``shell`` tool's processes (``None``: the best OS sandbox found here).
    ``protected`` names more paths (relative to the root) that the tools never touch,
    besides the agent's own ``.agentfsm`` folder.
    """
    return ToolBox(
        WorkspaceTools(root, permissions, sandbox=sandbox, protected=protected).tools(),
        **toolbox,
    )
