"""``verify``: run the project's check command before accepting a final answer."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from attrs import frozen

from agentfsm.engine.context import RunContext
from agentfsm.engine.events import PolicyNoteEvent
from agentfsm.engine.files import read_small_file
from agentfsm.engine.policy import Notice, Retry
from agentfsm.engine.process import CommandSandbox, run_command
from agentfsm.engine.sandbox import detect_sandbox
from agentfsm.engine.steps import run_step, step_now

__all__ = [
    "PACKAGE_SCRIPT_PRIORITY",
    "VerifyDefinition",
    "resolve_verify_command",
    "resolve_verify_definition",
    "verify",
]

PACKAGE_SCRIPT_PRIORITY = ("typecheck", "type-check", "check-types", "check", "build")
"""``package.json`` scripts tried in order when no command is given. Tests are left out on
purpose (slow and flaky); running them stays the model's job."""


MAX_DEFINITION_BYTES = 1 << 20
"""A file that defines the check command and is larger than this is not read."""


@frozen
class VerifyDefinition:
    """The check command and where it came from, fingerprinted to notice later changes."""

    command: str
    """The command line the gate runs."""
    source: str | None = None
    """The file that defines it (``package.json``, ``Makefile``, ``pyproject.toml``), or
    ``None`` for a command given explicitly."""
    digest: str | None = None
    """A hash of the definition (the scripts involved, the whole ``Makefile``, the task's
    table); ``None`` for an explicit command."""


def _read_small(path: str | Path) -> bytes | None:
    """A small regular file's bytes; ``None`` for anything else (missing, a symlink, a FIFO,
    a device, too large)."""
    if not os.access(path, os.F_OK):
        return None  # nothing there: the usual answer, without an error raised and caught
    try:
        return read_small_file(path, MAX_DEFINITION_BYTES, follow_symlinks=False)
    except (OSError, ValueError):
        return None


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


def _package_runner(workspace: Path) -> str:
    for lockfile, runner in (
        ("pnpm-lock.yaml", "pnpm run"),
        ("yarn.lock", "yarn run"),
        ("bun.lockb", "bun run"),
    ):
        if (workspace / lockfile).exists():
            return runner
    return "npm run"


def _package_scripts(folder: str) -> dict[str, Any]:
    raw = _read_small(os.path.join(folder, "package.json"))
    try:
        data = json.loads(raw.decode("utf-8")) if raw is not None else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        return {}
    scripts = data.get("scripts") if isinstance(data, dict) else None
    return scripts if isinstance(scripts, dict) else {}


def _package_definition(workspace: Path, scripts: dict[str, Any], name: str) -> VerifyDefinition:
    runner = _package_runner(workspace)
    # npm runs `pre<name>` and `post<name>` around a script: they are part of the check.
    parts = [runner, *(scripts.get(key) for key in (f"pre{name}", name, f"post{name}"))]
    return VerifyDefinition(f"{runner} {name}", "package.json", _digest(parts))


def _pyproject_definition(workspace: Path, target: str) -> VerifyDefinition | None:
    raw = _read_small(workspace / "pyproject.toml")
    try:
        data = tomllib.loads(raw.decode("utf-8")) if raw is not None else {}
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        return None
    tables = (
        (("pdm", "scripts"), f"pdm run {target}"),
        (("poe", "tasks"), f"poe {target}"),
        (("hatch", "envs", "default", "scripts"), f"hatch run {target}"),
    )
    for keys, command in tables:
        table: Any = tool
        for key in keys:
            table = table.get(key, {}) if isinstance(table, dict) else {}
        if isinstance(table, dict) and target in table:
            return VerifyDefinition(command, "pyproject.toml", _digest([keys, table[target]]))
    return None


def _makefile_definition(workspace: Path, target: str) -> VerifyDefinition | None:
    raw = _read_small(workspace / "Makefile")
    if raw is None:
        return None
    text = raw.decode("utf-8", errors="replace")
    if re.search(rf"^{re.escape(target)}\s*:(?!=)", text, re.MULTILINE) is None:
        return None
    return VerifyDefinition(f"make {target}", "Makefile", hashlib.sha256(raw).hexdigest()[:16])


def resolve_verify_definition(
    workspace: str | Path, target: str | None = None
) -> VerifyDefinition | None:
    """The check command of a workspace with where it is defined, or ``None`` (then there is
    no gate; no guessing).

    Without ``target``: the first ``package.json`` script among
    :data:`PACKAGE_SCRIPT_PRIORITY`. With a ``target`` the user named: a ``Makefile`` target,
    a ``pyproject.toml`` script (pdm, poe or hatch), or a ``package.json`` script of that name.
    Files that are symlinks, special files or larger than 1 MiB are not read.
    """
    folder = os.fspath(workspace)  # read at every run's start: no path object unless needed
    scripts = _package_scripts(folder)
    if target is None:
        for name in PACKAGE_SCRIPT_PRIORITY:
            if name in scripts:
                return _package_definition(Path(folder), scripts, name)
        return None
    root = Path(folder)
    found = _makefile_definition(root, target) or _pyproject_definition(root, target)
    if found is not None:
        return found
    if target in scripts:
        return _package_definition(root, scripts, target)
    return None


def resolve_verify_command(workspace: str | Path, target: str | None = None) -> str | None:
    """The check command of a workspace, or ``None`` (see :func:`resolve_verify_definition`)."""
    found = resolve_verify_definition(workspace, target)
    return found.command if found is not None else None


def _start(state: dict[str, Any], found: VerifyDefinition | None) -> None:
    """A run's gate state, from the definition it read at its start (or at its final gate)."""
    state.update(runs=0, refused=0, definition=found)


class verify:
    """A final gate: when the run changed files, run the project's check command in the OS
    sandbox; a failure refuses the final answer with a reminder carrying the (truncated)
    output.

    The command is the one given, or the one the workspace defines **as the user left it when
    the run started** (resolved at the run's first turn, before the model acts, and reported
    in a ``policy_note`` event that the session records). If the model changes that
    definition during the run, the gate does not run the new one: it refuses the answer and
    says so.

    Args:
        command: The command; ``None`` resolves one from the workspace
            (:func:`resolve_verify_definition`), and no command means no gate.
        workspace: Where the command runs.
        target: A ``Makefile`` / ``pyproject.toml`` / ``package.json`` target to look up.
        timeout: Seconds before the command is killed (a timeout is a failure).
        max_output: Characters of output kept for the reminder.
        max_retries: Refusals per run, after which the answer is accepted.
        sandbox: The OS sandbox the command runs in; ``None`` uses the run's
            (``Agent(sandbox=…)``), else the one found on this machine
            (:func:`~agentfsm.engine.sandbox.detect_sandbox`). When none works, the gate
            raises :class:`~agentfsm.engine.process.SandboxUnavailable` at the run's first
            turn, before the model acts, rather than ever run the command unconfined;
            ``Unsandboxed()`` opts out explicitly.
    """

    can_stop = False
    """Its turn gate only reports the command (diagrams do not list it under ``policy_stop``)."""

    def __init__(
        self,
        command: str | None = None,
        *,
        workspace: str | Path = ".",
        target: str | None = None,
        timeout: float = 120,
        max_output: int = 4000,
        max_retries: int = 3,
        sandbox: CommandSandbox | None = None,
    ) -> None:
        self.command = command
        self.workspace = Path(workspace)
        self.target = target
        self.timeout = timeout
        self.max_output = max_output
        self.max_retries = max_retries
        self.sandbox = sandbox

    @property
    def name(self) -> str:
        return repr(self)

    def definition(self) -> VerifyDefinition | None:
        """The command this gate would run now, with where it is defined."""
        if self.command is not None:
            return VerifyDefinition(self.command)
        return resolve_verify_definition(self.workspace, self.target)

    def resolved_command(self) -> str | None:
        """The command this gate runs, or ``None`` when there is none."""
        found = self.definition()
        return found.command if found is not None else None

    def _read_definition(
        self,
    ) -> VerifyDefinition | Awaitable[VerifyDefinition | None] | None:
        """The definition as the workspace holds it now: a step (``verify_definition``), so
        a replayed run decides on what the first execution read; at once outside a durable
        run, an awaitable in one."""
        return step_now("verify_definition", self.definition)

    async def _definition_now(self) -> VerifyDefinition | None:
        """:meth:`_read_definition`, awaited when it is a step's awaitable."""
        found = self._read_definition()
        if found is None or isinstance(found, VerifyDefinition):
            return found
        return await found

    async def _state(self, ctx: RunContext) -> dict[str, Any]:
        """The run's state (filled at its first turn, else now)."""
        state: dict[str, Any] = ctx.state(self, dict)
        if not state:
            _start(state, await self._definition_now())
        return state

    def _sandbox(self, ctx: RunContext) -> CommandSandbox:
        """The gate's sandbox, else the run's, else the OS sandbox found here (raises
        :class:`SandboxUnavailable`, saying what to install, when none works)."""
        sandbox = self.sandbox or ctx.sandbox
        if sandbox is None:
            sandbox = self.sandbox = detect_sandbox(self.workspace)
        return sandbox

    def check_turn(self, ctx: RunContext) -> Notice | Awaitable[Notice] | None:
        """At the run's first turn: take the command as the workspace defines it now (and
        fail before the model acts when there is a command but no sandbox to run it in),
        reported in a note; nothing on later turns. Synchronous outside a durable run (where
        the definition read is a step, and the answer an awaitable)."""
        state: dict[str, Any] = ctx.state(self, dict)
        if state:
            return None
        found = self._read_definition()
        if found is None or isinstance(found, VerifyDefinition):
            return self._noted(ctx, state, found)
        return self._noted_later(ctx, state, found)

    async def _noted_later(
        self, ctx: RunContext, state: dict[str, Any], found: Awaitable[VerifyDefinition | None]
    ) -> Notice:
        return self._noted(ctx, state, await found)

    def _noted(
        self, ctx: RunContext, state: dict[str, Any], found: VerifyDefinition | None
    ) -> Notice:
        """Keep the run's definition, check there is a sandbox for it, and say which it is."""
        _start(state, found)
        if found is None:
            reason = "no check command found; the verify gate is off for this run"
        else:
            self._sandbox(ctx)
            where = f" (defined in {found.source})" if found.source else " (given explicitly)"
            reason = f"verify command: {found.command}{where}"
        return Notice(
            PolicyNoteEvent(turn=ctx.turn, policy=self.name, reason=reason, code="verify_command")
        )

    def check_final(self, ctx: RunContext) -> Awaitable[Retry | None] | None:
        """Nothing to check when the run changed no file; else the check (awaitable)."""
        if ctx.mutations == 0:
            return None
        return self._check(ctx)

    async def _check(self, ctx: RunContext) -> Retry | None:
        state = await self._state(ctx)
        trusted: VerifyDefinition | None = state["definition"]
        if trusted is None or state["refused"] >= self.max_retries:
            return None
        if trusted.source is not None:
            now = await self._definition_now()
            if now is None or now.digest != trusted.digest or now.command != trusted.command:
                state["refused"] += 1
                state["changed"] = trusted.source
                return Retry(
                    f"Verification did not run: {trusted.source} changed during this run, and "
                    f"the check `{trusted.command}` it defines is no longer the one the user "
                    "left. The gate runs only the user's definition. Restore that definition "
                    f"in {trusted.source}, or finish and tell the user you changed it."
                )
        sandbox = self._sandbox(ctx)
        code, output = await run_step(
            "verify",
            lambda: run_command(
                trusted.command,
                self.workspace,
                timeout=self.timeout,
                max_output=self.max_output,
                sandbox=sandbox,
            ),
        )
        state["runs"] += 1
        state["last_exit"] = code
        if code == 0:
            return None
        state["refused"] += 1
        why = f"timed out after {self.timeout:g} s" if code is None else f"exited with {code}"
        return Retry(
            f"Verification failed: `{trusted.command}` {why}. Fix these problems before you "
            f"finish:\n{output.strip()}"
        )

    def __repr__(self) -> str:
        shown = self.command if self.command is not None else (self.target or "auto")
        return f"verify({shown!r})"
