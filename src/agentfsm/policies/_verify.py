"""``verify``: run the project's check command before accepting a final answer."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from attrs import evolve, frozen

from agentfsm.engine import Notice, PolicyNoteEvent, Retry, RunContext, read_small_file, run_step
from agentfsm.sandbox import (
    PROTECTED_DIR,
    CommandSandbox,
    check_sandbox,
    detect_sandbox,
    run_command,
)

from ._definition_files import MAKE_NAMES, command_files

__all__ = [
    "NO_CHECK_COMMAND",
    "PACKAGE_SCRIPT_PRIORITY",
    "VerifyDefinition",
    "resolve_verify_command",
    "resolve_verify_definition",
    "verify",
]

NO_CHECK_COMMAND = "no check command found; the verify gate is off for this run"
"""The ``verify_command`` note of a workspace without a check command."""

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
    """A hash of the definition (the scripts involved, the whole make file, the task's
    table); ``None`` for an explicit command."""
    files: tuple[tuple[str, str | None], ...] = ()
    """Every file the command's build tool reads for its definition, with its state (a
    hash, ``None`` when absent, ``"unreadable"``): see
    :func:`~agentfsm.policies._definition_files.command_files`. Empty for a command that
    starts no build tool."""
    unpinned: tuple[str, ...] = ()
    """What the build tool reads that could not be pinned (an include through
    ``$(shell …)``): the gate then never runs the command."""


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
    # GNU make reads the first of these that exists: a GNUmakefile shadows the Makefile.
    name = next((n for n in MAKE_NAMES if os.path.lexists(workspace / n)), None)
    raw = _read_small(workspace / name) if name is not None else None
    if name is None or raw is None:
        return None
    text = raw.decode("utf-8", errors="replace")
    if re.search(rf"^{re.escape(target)}\s*:(?!=)", text, re.MULTILINE) is None:
        return None
    return VerifyDefinition(f"make {target}", name, hashlib.sha256(raw).hexdigest()[:16])


def _pinned(workspace: str | Path, found: VerifyDefinition) -> VerifyDefinition:
    """``found`` with the fingerprint of every file its build tool reads."""
    files, unpinned = command_files(workspace, found.command)
    return evolve(found, files=files, unpinned=unpinned) if files or unpinned else found


def resolve_verify_definition(
    workspace: str | Path, target: str | None = None
) -> VerifyDefinition | None:
    """The check command of a workspace with where it is defined, or ``None`` (then there is
    no gate; no guessing).

    Without ``target``: the first ``package.json`` script among
    :data:`PACKAGE_SCRIPT_PRIORITY`. With a ``target`` the user named: a target of the make
    file GNU make reads (``GNUmakefile``, ``makefile`` or ``Makefile``), a ``pyproject.toml``
    script (pdm, poe or hatch), or a ``package.json`` script of that name. Files that are
    symlinks, special files or larger than 1 MiB are not read. The definition carries the
    fingerprint of every file the build tool reads for it (``files``).
    """
    folder = os.fspath(workspace)  # read at every run's start: no path object unless needed
    scripts = _package_scripts(folder)
    if target is None:
        for name in PACKAGE_SCRIPT_PRIORITY:
            if name in scripts:
                return _pinned(folder, _package_definition(Path(folder), scripts, name))
        return None
    root = Path(folder)
    found = _makefile_definition(root, target) or _pyproject_definition(root, target)
    if found is None and target in scripts:
        found = _package_definition(root, scripts, target)
    return _pinned(folder, found) if found is not None else None


def resolve_verify_command(workspace: str | Path, target: str | None = None) -> str | None:
    """The check command of a workspace, or ``None`` (see :func:`resolve_verify_definition`)."""
    found = resolve_verify_definition(workspace, target)
    return found.command if found is not None else None


_Files = tuple[tuple[str, str | None], ...]


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
    definition during the run, or any file the command's build tool reads for it (every
    make file name and include, ``.npmrc``, yarn/pnpm/bun settings, lockfiles, the
    pdm/poe/hatch tables, also for a given command that starts such a tool), the gate does
    not run the new one: it refuses the answer and names the files. What it cannot pin it
    never runs.

    Args:
        command: The command; ``None`` takes the workspace's own (the first
            ``package.json`` script among ``typecheck``, ``type-check``, ``check-types``,
            ``check``, ``build``; docs/policies.md), and no command means no gate.
        workspace: Where the command runs.
        target: A ``Makefile`` / ``pyproject.toml`` / ``package.json`` target to look up.
        timeout: Seconds before the command is killed (a timeout is a failure).
        max_output: Characters of output kept for the reminder.
        max_retries: Refusals per run, after which the answer is accepted.
        sandbox: The OS sandbox the command runs in; ``None`` uses the run's
            (``Agent(sandbox=…)``), else the one found on this machine
            (:func:`agentfsm.sandbox.detect_sandbox`), hiding what the workspace
            tools hide: ``.agentfsm`` and the run's ``protected_paths`` inside the workspace
            (the ``Agent``'s session folder). When none works, the gate
            raises :class:`~agentfsm.sandbox.SandboxUnavailable` at the run's first
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
        check_sandbox(sandbox, "verify")
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
        """The command this gate would run now, with where it is defined and the
        fingerprint of the files its build tool reads."""
        if self.command is not None:
            return _pinned(self.workspace, VerifyDefinition(self.command))
        return resolve_verify_definition(self.workspace, self.target)

    def resolved_command(self) -> str | None:
        """The command this gate runs, or ``None`` when there is none."""
        found = self.definition()
        return found.command if found is not None else None

    async def _read_definition(self) -> VerifyDefinition | None:
        """The definition as the workspace holds it now: a step (``verify_definition``), so
        a replayed run decides on what the first execution read."""

        async def read() -> VerifyDefinition | None:
            return self.definition()

        return await run_step("verify_definition", read)

    def _reread(self, trusted: VerifyDefinition) -> tuple[VerifyDefinition | None, _Files]:
        """The definition now, and the fingerprint now of the files the trusted command's
        build tool reads (the same read when the command is still the same)."""
        now = self.definition()
        if now is not None and now.command == trusted.command:
            return now, now.files
        return now, command_files(self.workspace, trusted.command)[0]

    async def _changed(self, trusted: VerifyDefinition) -> list[str]:
        """The files of the trusted definition that differ now (a step, as the first read)."""

        async def reread() -> tuple[VerifyDefinition | None, _Files]:
            return self._reread(trusted)

        now, files = await run_step("verify_definition", reread)
        before, after = dict(trusted.files), dict(files)
        names = [k for k in sorted(before.keys() | after.keys()) if before.get(k) != after.get(k)]
        if names or now == evolve(trusted, files=now.files if now else ()):
            return names
        # The definition moved (another file now defines the target): name both files.
        sources = (trusted.source, now.source if now is not None else None)
        return list(dict.fromkeys(s for s in sources if s)) or ["the check's definition"]

    async def _state(self, ctx: RunContext) -> dict[str, Any]:
        """The run's state (filled at its first turn, else now)."""
        state: dict[str, Any] = ctx.state(self, dict)
        if not state:
            _start(state, await self._read_definition())
        return state

    def _sandbox(self, ctx: RunContext, state: dict[str, Any]) -> CommandSandbox:
        """The gate's sandbox, else the run's, else the OS sandbox found here with the run's
        protected folders hidden (raises :class:`SandboxUnavailable`, saying what to
        install, when none works)."""
        sandbox: CommandSandbox | None = self.sandbox or ctx.sandbox or state.get("sandbox")
        if sandbox is None:
            sandbox = state["sandbox"] = detect_sandbox(
                self.workspace, protected=self._protected(ctx)
            )
        return sandbox

    def _protected(self, ctx: RunContext) -> tuple[str, ...]:
        """What the workspace tools hide: the agent's own folder, and the run's protected
        paths (its session folder) that lie inside the workspace."""
        root = self.workspace.resolve()
        inside = []
        for path in ctx.protected_paths:
            resolved = Path(path).resolve()
            if resolved != root and resolved.is_relative_to(root):
                inside.append(resolved.relative_to(root).as_posix())
        return (PROTECTED_DIR, *inside)

    async def check_turn(self, ctx: RunContext) -> Notice | None:
        """At the run's first turn: take the command as the workspace defines it now (and
        fail before the model acts when there is a command but no sandbox to run it in),
        reported in a note; nothing on later turns."""
        state: dict[str, Any] = ctx.state(self, dict)
        if state:
            return None
        return self._noted(ctx, state, await self._read_definition())

    def _noted(
        self, ctx: RunContext, state: dict[str, Any], found: VerifyDefinition | None
    ) -> Notice:
        """Keep the run's definition, check there is a sandbox for it, and say which it is."""
        _start(state, found)
        if found is None:
            reason = NO_CHECK_COMMAND
        else:
            self._sandbox(ctx, state)
            where = f" (defined in {found.source})" if found.source else " (given explicitly)"
            reason = f"verify command: {found.command}{where}"
            if found.unpinned:
                reason += (
                    "; it will not run: the gate cannot pin what its build tool reads ("
                    + "; ".join(found.unpinned)
                    + ")"
                )
        return Notice(
            PolicyNoteEvent(turn=ctx.turn, policy=self.name, reason=reason, code="verify_command")
        )

    async def check_final(self, ctx: RunContext) -> Retry | None:
        """Nothing to check when the run changed no file; else run the check command and
        refuse the answer when it fails (or when its definition changed)."""
        if ctx.mutations == 0:
            return None
        state = await self._state(ctx)
        trusted: VerifyDefinition | None = state["definition"]
        if trusted is None or state["refused"] >= self.max_retries:
            return None
        if trusted.unpinned:
            state["refused"] = self.max_retries  # said once: the command never runs
            return Retry(
                f"Verification did not run: the check `{trusted.command}` reads definition "
                f"files the gate cannot pin ({'; '.join(trusted.unpinned)}), so it cannot "
                "tell whether the check is still the one the user left. Finish, and tell the "
                "user the check did not run."
            )
        if trusted.source is not None or trusted.files:
            changed = await self._changed(trusted)
            if changed:
                listed = ", ".join(changed)
                state["refused"] += 1
                state["changed"] = listed
                return Retry(
                    f"Verification did not run: {listed} changed during this run, and the "
                    f"check `{trusted.command}` is no longer the one the user left (its build "
                    "tool reads its definition there). The gate runs only the user's "
                    f"definition. Restore {listed} as the run found it (remove what the run "
                    "created), or finish and tell the user you changed it."
                )
        sandbox = self._sandbox(ctx, state)
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
