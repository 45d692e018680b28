"""``verify``: run the project's check command before accepting a final answer."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from agentfsm.engine.context import RunContext
from agentfsm.engine.policy import Retry
from agentfsm.engine.process import run_command

__all__ = ["PACKAGE_SCRIPT_PRIORITY", "resolve_verify_command", "verify"]

PACKAGE_SCRIPT_PRIORITY = ("typecheck", "type-check", "check-types", "check", "build")
"""``package.json`` scripts tried in order when no command is given. Tests are left out on
purpose (slow and flaky); running them stays the model's job."""


def _package_runner(workspace: Path) -> str:
    for lockfile, runner in (
        ("pnpm-lock.yaml", "pnpm run"),
        ("yarn.lock", "yarn run"),
        ("bun.lockb", "bun run"),
    ):
        if (workspace / lockfile).exists():
            return runner
    return "npm run"


def _package_scripts(workspace: Path) -> dict[str, Any]:
    try:
        data = json.loads((workspace / "package.json").read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    scripts = data.get("scripts") if isinstance(data, dict) else None
    return scripts if isinstance(scripts, dict) else {}


def _pyproject_command(workspace: Path, target: str) -> str | None:
    try:
        data = tomllib.loads((workspace / "pyproject.toml").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    tool = data.get("tool", {})
    tables = (
        (tool.get("pdm", {}).get("scripts", {}), f"pdm run {target}"),
        (tool.get("poe", {}).get("tasks", {}), f"poe {target}"),
        (
            tool.get("hatch", {}).get("envs", {}).get("default", {}).get("scripts", {}),
            f"hatch run {target}",
        ),
    )
    for table, command in tables:
        if isinstance(table, dict) and target in table:
            return command
    return None


def _makefile_has(workspace: Path, target: str) -> bool:
    try:
        text = (workspace / "Makefile").read_text("utf-8")
    except OSError:
        return False
    return re.search(rf"^{re.escape(target)}\s*:(?!=)", text, re.MULTILINE) is not None


def resolve_verify_command(workspace: str | Path, target: str | None = None) -> str | None:
    """The check command of a workspace, or ``None`` (then there is no gate; no guessing).

    Without ``target``: the first ``package.json`` script among
    :data:`PACKAGE_SCRIPT_PRIORITY`. With a ``target`` the user named: a ``Makefile`` target,
    a ``pyproject.toml`` script (pdm, poe or hatch), or a ``package.json`` script of that name.
    """
    root = Path(workspace)
    scripts = _package_scripts(root)
    if target is None:
        for name in PACKAGE_SCRIPT_PRIORITY:
            if name in scripts:
                return f"{_package_runner(root)} {name}"
        return None
    if _makefile_has(root, target):
        return f"make {target}"
    command = _pyproject_command(root, target)
    if command is not None:
        return command
    if target in scripts:
        return f"{_package_runner(root)} {target}"
    return None


class verify:
    """A final gate: when the run changed files, run the project's check command; a failure
    refuses the final answer with a reminder carrying the (truncated) output.

    Args:
        command: The command; ``None`` resolves one from the workspace
            (:func:`resolve_verify_command`), and no command means no gate.
        workspace: Where the command runs.
        target: A ``Makefile`` / ``pyproject.toml`` / ``package.json`` target to look up.
        timeout: Seconds before the command is killed (a timeout is a failure).
        max_output: Characters of output kept for the reminder.
        max_retries: Refusals per run, after which the answer is accepted.
    """

    def __init__(
        self,
        command: str | None = None,
        *,
        workspace: str | Path = ".",
        target: str | None = None,
        timeout: float = 120,
        max_output: int = 4000,
        max_retries: int = 3,
    ) -> None:
        self.command = command
        self.workspace = Path(workspace)
        self.target = target
        self.timeout = timeout
        self.max_output = max_output
        self.max_retries = max_retries

    @property
    def name(self) -> str:
        return repr(self)

    def resolved_command(self) -> str | None:
        """The command this gate runs, or ``None`` when there is none."""
        if self.command is not None:
            return self.command
        return resolve_verify_command(self.workspace, self.target)

    async def check_final(self, ctx: RunContext) -> Retry | None:
        if ctx.mutations == 0:
            return None
        command = self.resolved_command()
        if command is None:
            return None
        state = ctx.run_state.setdefault(f"verify:{id(self)}", {"runs": 0, "refused": 0})
        if state["refused"] >= self.max_retries:
            return None
        code, output = await run_command(
            command, self.workspace, timeout=self.timeout, max_output=self.max_output
        )
        state["runs"] += 1
        state["last_exit"] = code
        if code == 0:
            return None
        state["refused"] += 1
        why = f"timed out after {self.timeout:g} s" if code is None else f"exited with {code}"
        return Retry(
            f"Verification failed: `{command}` {why}. Fix these problems before you "
            f"finish:\n{output.strip()}"
        )

    def __repr__(self) -> str:
        shown = self.command if self.command is not None else (self.target or "auto")
        return f"verify({shown!r})"
