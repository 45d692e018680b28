"""The workspace tools: read, list, glob, grep, write, edit and shell, confined to a root.

``workspace_tools(root)`` returns a :class:`ToolBox` with all of them. Every path is
resolved beneath the root on file descriptors (see :class:`~.fs.SafeRoot`): symlinks that
leave the root, hard-linked and special files, and the agent's own ``.agentfsm`` folder are
refused, the agent's own installation is read-only where it lies inside the root, and the
tools act on the descriptors that were checked. Every call, and every file
a ``glob``, ``grep`` or ``list_dir`` touches, is checked against the permission policy
(rules given in code plus ``.agentfsm/settings.json``); a refusal is a failed result. Reads
are size-capped, and searches stream, use RE2 (linear time) and stop at a deadline.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attrs import define

from agentfsm.engine import RunContext, ToolCall, ToolMessage, ToolResult, current_run, utf8_bytes
from agentfsm.sandbox import CommandSandbox, agent_install_paths, check_sandbox

from ._fs import PathRefused, Resolved, SafeRoot, read_capped, replace_file
from ._listing import SKIPPED_DIRS, FolderTools, fail, why
from ._settings import Settings, load_settings
from ._shell_tool import ShellTool
from ._toolbox import FunctionTool, ToolBox
from ._workspace import PROTECTED_DIR, OutsideWorkspace, Permissions, Workspace

__all__ = ["SKIPPED_DIRS", "WorkspaceTools", "workspace_tools"]

MAX_READ_CHARS = 200_000
MAX_READ_BYTES = 10_000_000
"""read_file reads at most this much of a file; edit_file refuses larger files."""

_Errors = (OutsideWorkspace, PathRefused)


def sha(text: str) -> str:
    """Short content hash, as used in edit metadata."""
    return hashlib.sha256(utf8_bytes(text)).hexdigest()[:16]


_encode = utf8_bytes


def _is_binary(data: bytes) -> bool:
    return b"\x00" in data[:8192]


READS_KEY = "agentfsm.read_file"
"""The owner, in ``RunContext.state``, of the reads a run has shown."""


def _pruned(ctx: RunContext, call_id: str) -> bool:
    """Whether the run replaced that call's result with a prune marker."""
    state = ctx.policy_state.get("prune_tool_results") or {}
    return any(k.startswith(f"{call_id}:") and isinstance(v, str) for k, v in state.items())


@define
class _Read:
    """A read whose full content the run's history holds."""

    digest: str
    call_id: str
    compressions: int
    """``RunContext.compressions`` when the history was last seen to hold it."""


def _in_history(ctx: RunContext, call_id: str) -> bool:
    return any(
        isinstance(message, ToolMessage) and message.tool_call_id == call_id
        for message in reversed(ctx.history)
    )


def _shown(ctx: RunContext | None, key: tuple[str, int, int], digest: str) -> str | None:
    """The call whose result, still in the run's history, holds this same read."""
    if ctx is None:
        return None
    reads: dict[tuple[str, int, int], _Read] = ctx.state(READS_KEY, dict)
    earlier = reads.get(key)
    if earlier is None or earlier.digest != digest:
        return None
    if earlier.compressions != ctx.compressions:  # compression rewrote the history
        if not _in_history(ctx, earlier.call_id):
            del reads[key]
            return None
        earlier.compressions = ctx.compressions
    if _pruned(ctx, earlier.call_id):
        return None
    return earlier.call_id


class WorkspaceTools(FolderTools):
    """The workspace tools of a root, their permissions and sandbox.

    ``read_file`` remembers, per run (through ``RunContext.state``), what it has shown: an
    unchanged re-read answers with a pointer to the earlier result as long as the run's
    history still holds that result whole (not pruned, not summarized away). A new run,
    even of the same engine, starts with no memory; outside a run there is none.

    ``edit_file`` obeys the ``read_file`` rules as well as its own (it reads the file), and
    answers a path those rules deny with the same refusal whether it exists or not.
    ``write_file`` and ``edit_file`` refuse paths inside ``readonly`` (relative to the root
    or absolute; by default the folders of :func:`agent_install_paths` that lie inside the
    root: the agent's own interpreter, site-packages and package), and no file they write
    keeps or gains a setuid, setgid or sticky bit.

    The limits are attributes, so one instance can be given others.
    """

    max_read_bytes = MAX_READ_BYTES

    def __init__(
        self,
        root: str | Path,
        permissions: Permissions | None = None,
        *,
        sandbox: CommandSandbox | None = None,
        protected: Sequence[str] = (),
        settings: Settings | None = None,
        readonly: Sequence[str | Path] | None = None,
    ) -> None:
        check_sandbox(sandbox, "workspace_tools")
        self.workspace = Workspace(root)
        self.sandbox = sandbox
        self.protected = (PROTECTED_DIR, *protected)
        if readonly is None:
            readonly = agent_install_paths()
        self.root = SafeRoot(root, self.protected, readonly=[str(p) for p in readonly])
        if settings is None:
            settings = load_settings(self.workspace.root)
        self.permissions = (permissions or Permissions()) + settings.permissions

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
            # Missing folders resolve too, so a denied path is refused whether it exists.
            with self.root.resolve(path, missing_ok=True) as resolved:
                self._allow(resolved, "read_file")
                rel = resolved.rel
                fd, st = self.root.open_file(resolved)
            try:
                data = read_capped(fd, self.max_read_bytes)
            finally:
                os.close(fd)
        except _Errors as error:
            return fail(str(error))
        except OSError as error:
            return fail(f"cannot read {path!r}: {why(error)}")
        size = max(st.st_size, len(data))
        if _is_binary(data):
            return ToolResult(True, f"{path} is a binary file ({size} bytes); not shown")
        text = data.decode("utf-8", errors="replace")
        key = (rel, offset, limit)
        digest = sha(text)
        ctx = current_run.get()
        earlier = _shown(ctx, key, digest)
        if earlier is not None:
            return ToolResult(
                True,
                f"{path} is unchanged since you read it (call {earlier}); its content is above.",
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
        if size > len(data):
            body = (
                f"[{path} is {size:,} bytes; only its first {len(data):,} bytes were read]\n" + body
            )
        if call is not None and ctx is not None:
            reads = ctx.state(READS_KEY, dict)
            reads[key] = _Read(digest, call.id, ctx.compressions)
        return ToolResult(True, body)

    # -- changing ----------------------------------------------------------------------

    def _before(self, resolved: Resolved, readable: bool) -> tuple[str | None, int | None]:
        """The hash of the file a write replaces (``sha("")`` if none; ``None`` when the
        ``read_file`` rules deny it, so nothing of it is recorded) and its mode."""
        try:
            fd, st = self.root.open_file(resolved)
        except FileNotFoundError:
            return (sha("") if readable else None), None
        if not readable:
            os.close(fd)
            return None, stat.S_IMODE(st.st_mode)
        try:
            data = read_capped(fd, self.max_read_bytes)
        finally:
            os.close(fd)
        text = data.decode("utf-8", errors="replace")
        if st.st_size > len(data):
            text += f"\x00[{st.st_size} bytes]"
        return sha(text), stat.S_IMODE(st.st_mode)

    def write_file(self, path: str, content: str) -> ToolResult:
        """Create or overwrite a file (folders are created as needed).

        Args:
            path: The file, relative to the workspace root.
            content: The whole new content.
        """
        try:
            with self.root.resolve(path, missing_ok=True) as resolved:
                self._allow(resolved, "write_file")
                self.root.check_writable(resolved)
                rel = resolved.rel
                if resolved.name is None or resolved.must_be_dir:
                    return fail(f"cannot write {path!r}: it names a folder, not a file")
                readable = not self._denied(rel, "read_file")
                self.root.create_parents(resolved)
                before, mode = self._before(resolved, readable)
                replace_file(resolved.dir_fd, resolved.name, _encode(content), mode)
        except _Errors as error:
            return fail(str(error))
        except OSError as error:
            return fail(f"cannot write {path!r}: {why(error)}")
        meta = {"path": rel, "after_sha": sha(content)}
        if before is not None:  # a read-denied file's old content leaves no trace
            meta["before_sha"] = before
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
            # What read_file refuses, edit_file refuses too (with the same answer, before
            # anything is read), or its "not found" would reveal the file's content.
            with self.root.resolve(path, missing_ok=True) as resolved:
                self._allow(resolved, "read_file", "edit_file")
                self.root.check_writable(resolved)
                fd, st = self.root.open_file(resolved)
                try:
                    data = read_capped(fd, self.max_read_bytes + 1)
                finally:
                    os.close(fd)
                if len(data) > self.max_read_bytes:
                    return fail(
                        f"{path} is larger than {self.max_read_bytes:,} bytes; "
                        "edit_file does not change files that large"
                    )
                try:
                    before = data.decode("utf-8")
                except UnicodeDecodeError:
                    return fail(f"{path} is not UTF-8 text; edit_file only changes text files")
                result = self._replace(path, before, old, new, replace_all)
                if isinstance(result, ToolResult):
                    return result
                count, after = result
                name = resolved.name
                assert name is not None
                now = os.stat(name, dir_fd=resolved.dir_fd, follow_symlinks=False)
                if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                    return fail(f"{path} changed while it was being edited; read it again")
                try:
                    replace_file(resolved.dir_fd, name, _encode(after), stat.S_IMODE(st.st_mode))
                except OSError as error:
                    return fail(f"cannot write {path!r}: {why(error)}")
                rel = resolved.rel
        except _Errors as error:
            return fail(str(error))
        except OSError as error:
            return fail(f"cannot read {path!r}: {why(error)}")
        meta = {"path": rel, "before_sha": sha(before), "after_sha": sha(after)}
        return ToolResult(
            True, f"edited {rel} ({count if replace_all else 1} replacement(s))", metadata=meta
        )

    @staticmethod
    def _replace(
        path: str, before: str, old: str, new: str, replace_all: bool
    ) -> ToolResult | tuple[int, str]:
        if not old:
            return fail("old must not be empty; use write_file to create a file")
        count = before.count(old)
        if count == 0:
            return fail(
                f"the text to replace was not found in {path}; read the file and copy it exactly"
            )
        if count > 1 and not replace_all:
            return fail(
                f"the text to replace appears {count} times in {path}; "
                "include more context or set replace_all"
            )
        after = before.replace(old, new) if replace_all else before.replace(old, new, 1)
        return count, after

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
    settings: Settings | None = None,
    readonly: Sequence[str | Path] | None = None,
    **toolbox: Any,
) -> ToolBox:
    """A :class:`ToolBox` with the workspace tools confined to ``root``.

    ``permissions`` add to the rules of ``<root>/.agentfsm/settings.json`` (``settings``:
    that file as already read with :func:`load_settings`; read here when ``None``).
    ``sandbox`` confines the ``shell`` tool's processes (``None``: the best OS sandbox found
    here). ``protected`` names more paths (relative to the root) that the tools never touch,
    besides the agent's own ``.agentfsm`` folder. ``readonly`` names paths ``write_file``
    and ``edit_file`` refuse to change (``None``: the agent's own installation, where it
    lies inside the root; see :class:`WorkspaceTools`).
    """
    tools = WorkspaceTools(
        root,
        permissions,
        sandbox=sandbox,
        protected=protected,
        settings=settings,
        readonly=readonly,
    )
    return ToolBox(tools.tools(), **toolbox)
