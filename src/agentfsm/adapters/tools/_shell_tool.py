"""The workspace ``shell`` tool: one command line in the workspace root, in the OS sandbox."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from agentfsm.engine import SupportsAbort, ToolResult
from agentfsm.sandbox import (
    BubblewrapSandbox,
    CommandSandbox,
    ResourceLimits,
    SandboxUnavailable,
    detect_sandbox,
    explain_limit,
    run_command,
)

from ._toolbox import FunctionTool
from ._workspace import PROTECTED_DIR, Permissions

__all__ = ["ShellTool"]


class ShellTool:
    """``shell``: run a command line in ``root`` after the permission rules allow it.

    Commands run in ``sandbox``; without one, the OS sandbox found here on first use
    (:func:`detect_sandbox`, hiding ``protected``). When none works, every call fails with
    what to install: a command never runs unsandboxed unless given :class:`Unsandboxed`.
    A failure that shows a resource limit of the sandbox (its ``limits``) says which one,
    its value and the settings key that raises it. A command not found inside the
    bubblewrap sandbox (exit code 127) says what the sandbox sees of it and how to show a
    folder (``sandbox.read``).
    """

    def __init__(
        self,
        root: Path,
        permissions: Permissions,
        *,
        sandbox: CommandSandbox | None = None,
        protected: Sequence[str] = (PROTECTED_DIR,),
    ) -> None:
        self.root = root
        self.permissions = permissions
        self.sandbox = sandbox
        self.protected = tuple(protected)

    async def _sandbox(self) -> CommandSandbox:
        if self.sandbox is None:
            self.sandbox = await asyncio.to_thread(
                detect_sandbox, self.root, protected=self.protected
            )
        return self.sandbox

    async def shell(
        self,
        command: str,
        timeout: float = 120,  # noqa: ASYNC109 - the model's own limit for its command
        signal: SupportsAbort | None = None,
    ) -> ToolResult:
        """Run a shell command (``sh -c``) in the workspace root, with a time limit.

        Args:
            command: The command line.
            timeout: Seconds before the command and its children are killed.
        """
        reason = self.permissions.check("shell", command)
        if reason is not None:
            return ToolResult(False, "", reason)
        limit = max(1.0, min(float(timeout), 1800.0))
        try:
            sandbox = await self._sandbox()
        except SandboxUnavailable as error:
            return ToolResult(False, "", str(error))
        code, output = await run_command(
            command, self.root, timeout=limit, max_output=30_000, sandbox=sandbox
        )
        if code == 0:
            return ToolResult(True, output or "(no output)")
        if code is None:
            reason = f"timed out after {limit:g} s; the command and its children were killed"
        else:
            reason = f"exit code {code}"
        limits = getattr(sandbox, "limits", None)
        if isinstance(limits, ResourceLimits):
            hit = explain_limit(code, output, limits)
            if hit is not None:
                reason = f"{reason}: {hit}"
        if code == 127 and isinstance(sandbox, BubblewrapSandbox):
            note = sandbox.not_found_note(output)
            if note is not None:
                reason = f"{reason}: {note}"
        return ToolResult(False, output, reason)

    def tool(self) -> FunctionTool:
        """The ``shell`` function tool (destructive)."""
        return FunctionTool(self.shell, destructive=True)
