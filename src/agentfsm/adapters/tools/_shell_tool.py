"""The workspace ``shell`` tool: one command line in the workspace root, in the OS sandbox."""

from __future__ import annotations

import asyncio
import errno
import os
import shlex
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

__all__ = ["ShellTool", "bash_command"]

BASH = next((p for p in ("/bin/bash", "/usr/bin/bash") if os.access(p, os.X_OK)), None)
"""The bash that runs the tool's lines: the grammar the shell rules parse (``None``: none)."""


MAX_ARGUMENT = 131_072
"""Linux's bound on one argument of ``execve`` (``MAX_ARG_STRLEN``): the line reaches the
shell as one."""


def bash_command(command: str, bash: str) -> str:
    """The ``sh -c`` line that runs ``command`` with ``bash`` (``sh`` reads the quoted line
    as one literal word and hands it over; bash reads no startup file). ``sh`` stays the
    sandbox's first process and waits: a command that became that process would ignore
    the limits' ``SIGXCPU``, as the first process of a PID namespace does."""
    return f"{bash} --norc --noprofile -c {shlex.quote(command)}"


def _too_long(size: int) -> ToolResult:
    return ToolResult(
        False,
        "",
        f"the command line is too long to run: {size} bytes as the shell is given it, the "
        f"kernel takes at most {MAX_ARGUMENT - 1} in one argument (the sandbox's limits, set "
        "before the line, included); write it to a script file and run that",
    )


class ShellTool:
    """``shell``: run a command line in ``root`` after the permission rules allow it.

    Commands run in ``sandbox``; without one, the OS sandbox found here on first use
    (:func:`detect_sandbox`, hiding ``protected``). When none works, every call fails with
    what to install: a command never runs unsandboxed unless given :class:`Unsandboxed`.
    Lines run with bash, whose grammar the shell rules parse (:mod:`~agentfsm.adapters.
    tools._shell_rules`); where bash is missing they run with ``sh``, and a line under shell
    rules is refused, as the rules would read it in another grammar.
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
        """Run a bash command line in the workspace root, with a time limit.

        Args:
            command: The command line.
            timeout: Seconds before the command and its children are killed.
        """
        surrogate = next((c for c in command if "\ud800" <= c <= "\udfff"), None)
        if surrogate is not None:
            return ToolResult(
                False,
                "",
                f"the command line holds a lone surrogate (U+{ord(surrogate):04X}), "
                "which is not text a shell can be given",
            )
        line = command if BASH is None else bash_command(command, BASH)
        size = len(line.encode("utf-8"))
        if size >= MAX_ARGUMENT:
            return _too_long(size)
        reason = self.permissions.check("shell", command)
        if reason is not None:
            return ToolResult(False, "", reason)
        if BASH is None and any(
            r.tool in ("shell", "*") for r in (*self.permissions.allow, *self.permissions.deny)
        ):
            return ToolResult(
                False,
                "",
                "bash is not installed: the shell rules read a line as bash reads it, "
                "so no line runs under them without it",
            )
        limit = max(1.0, min(float(timeout), 1800.0))
        try:
            sandbox = await self._sandbox()
        except SandboxUnavailable as error:
            return ToolResult(False, "", str(error))
        try:
            code, output = await run_command(
                line, self.root, timeout=limit, max_output=30_000, sandbox=sandbox
            )
        except OSError as error:
            if error.errno == errno.E2BIG:  # the sandbox's limits, set before the line
                return _too_long(size)
            if error.errno != errno.EAGAIN:
                raise
            code, output = None, ""  # nothing left to start it: a full pids cgroup, no thread
            reason = error.strerror or "the command did not run"
        else:
            if code == 0:
                return ToolResult(True, output or "(no output)")
            if code is None:
                reason = f"timed out after {limit:g} s; the command and its children were killed"
            else:
                reason = f"exit code {code}"
        limits = getattr(sandbox, "limits", None)
        if isinstance(limits, ResourceLimits):
            hit = explain_limit(code, output or reason, limits)
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
