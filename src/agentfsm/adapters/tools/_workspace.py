"""Confinement to a workspace root, and the permission policy that runs before each call."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from attrs import frozen

from agentfsm.sandbox import PROTECTED_DIR, check_workspace

from ._globs import rule_matches
from ._shell_rules import CommandLine, parse_command_line

__all__ = [
    "PROTECTED_DIR",
    "SETTINGS_FILE",
    "OutsideWorkspace",
    "PermissionRule",
    "Permissions",
    "Workspace",
]

SETTINGS_FILE = ".agentfsm/settings.json"
"""Project settings, relative to the workspace root: ``{"permissions": {"allow": [...],
"deny": [...]}}``."""


class OutsideWorkspace(ValueError):
    """A path that would leave the workspace root."""


class Workspace:
    """A root folder that every path of the workspace tools is confined to.

    Raises:
        ValueError: ``root`` is not a folder, or may not be a workspace: ``/``, a home
            folder, a folder holding one, or a folder that lies in or holds one the agent
            never reads (:func:`~agentfsm.sandbox.check_workspace`).
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()
        if not self.root.is_dir():
            raise ValueError(f"workspace root {str(root)!r} is not a folder")
        check_workspace(self.root)

    def resolve(self, path: str) -> Path:
        """The absolute path ``path`` names inside the workspace.

        Refused: ``~`` paths, absolute paths outside the root, ``..`` that climbs out, and
        symlinks whose target is outside the root. The message names the path as given.

        This checks the path as a string at the time of the call: good for showing or
        comparing paths, not for acting on them (a folder swapped for a symlink afterwards
        goes unnoticed). The workspace tools act on descriptors through
        :class:`~agentfsm.adapters.tools.SafeRoot` instead.
        """
        if not isinstance(path, str) or not path.strip():
            raise OutsideWorkspace("a path is required")
        if path.startswith("~"):
            raise OutsideWorkspace(
                f"{path!r}: home-relative paths are not allowed; use a path inside the workspace"
            )
        candidate = Path(path)
        full = candidate if candidate.is_absolute() else self.root / candidate
        resolved = full.resolve()
        if resolved != self.root and not resolved.is_relative_to(self.root):
            how = (
                "leaves the workspace through a symlink"
                if self._via_symlink(full)
                else "is outside the workspace"
            )
            raise OutsideWorkspace(f"{path!r} {how}; paths must stay inside the workspace root")
        return resolved

    def _via_symlink(self, full: Path) -> bool:
        current = full
        while current != current.parent:
            if current.is_symlink():
                return True
            current = current.parent
        return False

    def relative(self, path: Path) -> str:
        """``path`` relative to the root, POSIX style (``.`` for the root)."""
        rel = path.relative_to(self.root).as_posix()
        return rel or "."


_RULE = re.compile(r"^\s*([A-Za-z_][\w.-]*)\s*(?:\((.*)\))?\s*$")


@frozen
class PermissionRule:
    """``tool`` or ``tool(pattern)``: the pattern is a glob over the call's path (relative to
    the root) or, for ``shell``, over the command."""

    tool: str
    pattern: str | None = None

    @classmethod
    def parse(cls, text: str) -> PermissionRule:
        match = _RULE.match(text)
        if match is None:
            raise ValueError(f"not a permission rule: {text!r} (expected tool or tool(pattern))")
        return cls(match.group(1), match.group(2))

    def matches(self, tool: str, subject: str | None) -> bool:
        """Whether the rule names ``tool`` and its pattern matches ``subject`` (a path).

        For ``shell`` use :meth:`allows` and :meth:`forbids`, which parse the command line.
        """
        if self.tool not in (tool, "*"):
            return False
        if self.pattern is None:
            return True
        return subject is not None and rule_matches(subject, self.pattern)

    def allows(self, tool: str, subject: str | None, line: CommandLine | None) -> bool:
        """As the only allow rule: every command of a shell line (simple commands joined by
        lists and pipes) must be vetted by the project's tables (docs/security.md,
        "Permission rules") and matched by the pattern."""
        if self.tool not in (tool, "*"):
            return False
        if line is not None:
            return line.admitted((self.pattern,))
        return self.matches(tool, subject)

    def forbids(self, tool: str, subject: str | None, line: CommandLine | None) -> bool:
        """As a deny rule: any command of a shell line matching it, or anything in the line
        the rule cannot see through (a substitution, an ``eval``; docs/security.md)."""
        if self.tool not in (tool, "*"):
            return False
        if line is not None:
            return line.touches(self.pattern)
        return self.matches(tool, subject)

    def __str__(self) -> str:
        return self.tool if self.pattern is None else f"{self.tool}({self.pattern})"


@frozen
class Permissions:
    """Allow and deny rules. A deny rule always wins; when a tool has allow rules, a call
    must match one of them; otherwise it is allowed."""

    allow: tuple[PermissionRule, ...] = ()
    deny: tuple[PermissionRule, ...] = ()

    @classmethod
    def of(cls, allow: Iterable[str] = (), deny: Iterable[str] = ()) -> Permissions:
        """Rules from text, e.g. ``Permissions.of(deny=["shell(rm *)", "write_file(.git/**)"])``."""
        return cls(tuple(map(PermissionRule.parse, allow)), tuple(map(PermissionRule.parse, deny)))

    @classmethod
    def from_settings(cls, root: str | Path) -> Permissions:
        """Rules from the workspace's ``.agentfsm/settings.json`` (none if it is absent).

        Raises:
            SettingsError: the file is malformed (see :func:`load_settings`).
        """
        from ._settings import load_settings

        return load_settings(root).permissions

    def __add__(self, other: Permissions) -> Permissions:
        return Permissions(self.allow + other.allow, self.deny + other.deny)

    def check(self, tool: str, subject: str | None) -> str | None:
        """``None`` when the call may run, else the reason it may not.

        For ``shell`` the subject is the command line, parsed into the commands it runs
        (docs/security.md, "Permission rules").
        """
        ruled = any(rule.tool in (tool, "*") for rule in (*self.deny, *self.allow))
        shell = ruled and tool == "shell"
        line = parse_command_line(subject) if shell and subject is not None else None
        for rule in self.deny:
            if rule.forbids(tool, subject, line):
                why = line.denial(rule.pattern) if line is not None and rule.pattern else None
                if why:
                    return f"permission denied by rule {str(rule)!r}: {why}"
                return f"permission denied by rule {str(rule)!r}"
        relevant = [rule for rule in self.allow if rule.tool in (tool, "*")]
        if not relevant:
            return None
        if line is not None:
            # Each command of the line must be admitted by one of the rules.
            patterns = [rule.pattern for rule in relevant]
            if line.admitted(patterns):
                return None
            refusal = line.refusal()
            unmatched = line.unmatched(patterns) if len(line.commands) > 1 else None
            if refusal is None and unmatched is not None:
                refusal = f"{unmatched.text()}: no allow rule matches it"
        elif any(rule.allows(tool, subject, line) for rule in relevant):
            return None
        else:
            refusal = None
        allowed = ", ".join(str(r) for r in relevant)
        why = f" ({refusal})" if refusal else ""
        return f"permission denied: {tool} is only allowed for {allowed}{why}"
