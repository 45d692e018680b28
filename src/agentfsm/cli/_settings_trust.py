"""The settings a CLI run applies: the user's own, and the workspace's once the user agreed.

Two files have the same schema (:mod:`agentfsm.adapters.tools._settings`):

* the user's, ``$XDG_CONFIG_HOME/agentfsm/settings.json`` (``~/.config/agentfsm/...``
  when the variable is unset), trusted as it is;
* the workspace's, ``<workspace>/.agentfsm/settings.json``, which came with the workspace:
  a cloned repository can ship one, and its author is not the user.

A workspace file that **widens** the sandbox (``sandbox.network: true``, a ``sandbox.read``
or ``sandbox.write`` path outside the workspace or inside its ``.agentfsm`` folder, any
``sandbox.env`` name, a ``sandbox.limits`` value above the default) is applied only with
the user's consent: a yes on a terminal (recorded with the file's SHA-256 in
``$XDG_STATE_HOME/agentfsm/trusted-settings.json``: a changed file asks again) or
``--trust-workspace-settings`` (this run only; nothing recorded). Without either the command
stops with exit code 2 and one line saying what the file widens. What narrows (permission
rules, provider quirks, tighter limits) needs no consent.

The two are merged plainly: permission rules and path lists are concatenated (the user's
first), ``sandbox.network`` is on when either turns it on, provider quirks and any other
value are the workspace's where it sets them, else the user's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from agentfsm.adapters.sessions import state_home
from agentfsm.adapters.tools import (
    MAX_SETTINGS_BYTES,
    SETTINGS_FILE,
    SandboxSettings,
    Settings,
    SettingsError,
    parse_settings,
    read_settings_file,
)
from agentfsm.engine import read_small_file
from agentfsm.sandbox import PROTECTED_DIR

from ._parser import TRUST_FLAG
from ._terminal import sanitize

__all__ = [
    "TRUST_FLAG",
    "RunSettings",
    "SettingsRefused",
    "check_submitted",
    "consent",
    "interactive",
    "merge",
    "read_run_settings",
    "refusal",
    "trust_file",
    "user_settings_path",
    "widenings",
]


class SettingsRefused(Exception):
    """The workspace's settings widen the sandbox and the user did not agree (the message
    is the one line the command prints)."""


def user_settings_path() -> Path:
    """``$XDG_CONFIG_HOME/agentfsm/settings.json`` (``~/.config`` when the variable is
    unset or not an absolute path)."""
    value = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(value) if value and os.path.isabs(value) else Path.home() / ".config"
    return base / "agentfsm" / "settings.json"


def trust_file() -> Path:
    """Where consents are recorded: ``$XDG_STATE_HOME/agentfsm/trusted-settings.json``."""
    return state_home() / "agentfsm" / "trusted-settings.json"


@attrs.frozen
class RunSettings:
    """The settings a run applies, and what the workspace's file asks beyond the defaults."""

    settings: Settings
    """The user's settings merged with the workspace's."""
    widens: tuple[str, ...] = ()
    """What the workspace's file widens (``"network"``, ``"read /opt/x"``, …); empty when
    it widens nothing or is absent."""
    digest: str | None = None
    """SHA-256 (hex) of the workspace's file; ``None`` when there is none."""


def _parse(data: bytes, label: str) -> tuple[Settings, dict[str, Any]]:
    """The settings these bytes hold, validated by :func:`parse_settings` (the checked bytes
    are the applied bytes), and their raw JSON object."""
    settings = parse_settings(data, label)
    raw = json.loads(data.decode("utf-8"))
    return settings, raw if isinstance(raw, dict) else {}


def _sandbox_raw(raw: dict[str, Any]) -> dict[str, Any]:
    sandbox = raw.get("sandbox")
    return sandbox if isinstance(sandbox, dict) else {}


def _outside(path: str, workspace: Path) -> bool:
    """Whether ``path`` (symlinks followed) lies outside the workspace, or in its own
    ``.agentfsm`` folder, or is the workspace itself (which holds that folder)."""
    try:
        resolved = Path(path).resolve()
    except (OSError, RuntimeError):
        return True
    own = workspace / PROTECTED_DIR
    return (
        resolved == workspace
        or not resolved.is_relative_to(workspace)
        or (resolved.is_relative_to(own))
    )


def _raised(value: Any, default: Any) -> bool:
    """Whether a limit ``value`` allows more than ``default`` (unknown shapes do)."""
    if value == default:
        return False
    numbers = (int, float)
    if isinstance(value, numbers) and isinstance(default, numbers):
        return value > default
    return True


def _raised_limits(sandbox: SandboxSettings, raw: dict[str, Any]) -> list[str]:
    limits = raw.get("limits")
    if not isinstance(limits, dict) or not limits:
        return []
    parsed = getattr(sandbox, "limits", None)
    default = getattr(SandboxSettings(), "limits", None)
    if parsed is not None and attrs.has(type(parsed)) and attrs.has(type(default)):
        pairs = [
            (f.name, getattr(parsed, f.name), getattr(default, f.name))
            for f in attrs.fields(type(parsed))
        ]
        return [f"limits {name}={value}" for name, value, base in pairs if _raised(value, base)]
    return [f"limits {name}={value}" for name, value in limits.items()]


def widenings(settings: Settings, raw: dict[str, Any], workspace: Path) -> tuple[str, ...]:
    """What ``settings`` (read from ``raw``, the workspace's file) widen."""
    sandbox = settings.sandbox
    sandbox_raw = _sandbox_raw(raw)
    found: list[str] = ["network"] if sandbox.network else []
    for key in ("read", "write"):
        found += [f"{key} {path}" for path in getattr(sandbox, key) if _outside(path, workspace)]
    env = sandbox_raw.get("env")
    if isinstance(env, list) and env:
        found.append("env " + ", ".join(str(name) for name in env))
    found += _raised_limits(sandbox, sandbox_raw)
    return tuple(sanitize(item) for item in found)


def _unique(items: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(items))


def merge(
    user: Settings, user_raw: dict[str, Any], workspace: Settings, raw: dict[str, Any]
) -> Settings:
    """The user's settings under the workspace's (see the module's documentation)."""
    workspace_keys, user_keys = _sandbox_raw(raw), _sandbox_raw(user_raw)
    sandbox: dict[str, Any] = {}
    for field in attrs.fields(type(workspace.sandbox)):
        mine, theirs = getattr(user.sandbox, field.name), getattr(workspace.sandbox, field.name)
        if isinstance(theirs, bool):
            sandbox[field.name] = mine or theirs
        elif isinstance(theirs, tuple):
            sandbox[field.name] = _unique(mine + theirs)
        elif field.name not in workspace_keys and field.name in user_keys:
            sandbox[field.name] = mine
    quirks = dict(user.provider.quirks) | dict(workspace.provider.quirks)
    return attrs.evolve(
        workspace,
        permissions=user.permissions + workspace.permissions,
        sandbox=attrs.evolve(workspace.sandbox, **sandbox),
        provider=attrs.evolve(workspace.provider, quirks=tuple(quirks.items())),
    )


def read_run_settings(workspace: Path) -> RunSettings:
    """The user's and the workspace's settings, merged, with what the workspace's file
    widens.

    Raises:
        SettingsError: either file is malformed.
    """
    user_path = user_settings_path()
    user_data = read_settings_file(user_path, str(user_path))
    user, user_raw = _parse(user_data, str(user_path)) if user_data else (Settings(), {})
    data = read_settings_file(workspace / SETTINGS_FILE)
    if data is None:
        return RunSettings(user)
    settings, raw = _parse(data, SETTINGS_FILE)
    return RunSettings(
        merge(user, user_raw, settings, raw),
        widenings(settings, raw, workspace.resolve()),
        hashlib.sha256(data).hexdigest(),
    )


# -- consent ------------------------------------------------------------------------------


def _trusted(workspace: Path) -> dict[str, str]:
    """The recorded consents (workspace path → SHA-256); none when the file is unreadable,
    malformed, or lies inside the workspace (where the model could write it)."""
    path = trust_file()
    if path.resolve().is_relative_to(workspace):
        return {}
    try:
        data = json.loads(read_small_file(path, MAX_SETTINGS_BYTES).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    trusted = data.get("trusted") if isinstance(data, dict) else None
    if not isinstance(trusted, dict):
        return {}
    return {str(k): v for k, v in trusted.items() if isinstance(v, str)}


def _record(workspace: Path, digest: str) -> None:
    """Record the consent: written to a new file, then renamed over the old one."""
    path = trust_file()
    if path.resolve().is_relative_to(workspace):
        return
    trusted = _trusted(workspace)
    trusted[str(workspace)] = digest
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    text = json.dumps({"version": 1, "trusted": trusted}, indent=1, sort_keys=True) + "\n"
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".trusted-settings-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _ask(command: str, where: Path, widens: tuple[str, ...], answer: Callable[[], str]) -> bool:
    lines = [
        f"{command}: {sanitize(str(where))} came with the workspace and widens the OS sandbox "
        "of the model's commands:",
        *(f"  - {item}" for item in widens),
        "Apply it? (your answer is remembered until the file changes) [y/N] ",
    ]
    sys.stderr.write("\n".join(lines))
    sys.stderr.flush()
    return answer().strip().lower() in ("y", "yes")


def refusal(widens: tuple[str, ...]) -> str:
    """The one line printed when the workspace's settings are not applied."""
    return (
        f"{SETTINGS_FILE} widens the sandbox ({', '.join(widens)}); review it, then pass "
        f"{TRUST_FLAG} (or answer yes on a terminal)"
    )


def interactive(as_json: bool = False) -> bool:
    """Whether the user can be asked: stdin and stderr are terminals, and not ``--json``."""
    return not as_json and sys.stdin.isatty() and sys.stderr.isatty()


def consent(
    command: str,
    workspace: Path,
    found: RunSettings,
    *,
    trust_flag: bool,
    ask: bool,
    answer: Callable[[], str] | None = None,
) -> None:
    """Return when ``found`` may be applied: it widens nothing, ``trust_flag`` is given,
    this workspace's file with this digest was agreed to before, or ``ask`` and the user
    answers yes (recorded; ``answer`` reads the reply, a line of stdin by default).

    Raises:
        SettingsRefused: otherwise (the message is :func:`refusal`'s line).
    """
    if not found.widens or trust_flag or found.digest is None:
        return
    workspace = workspace.resolve()
    if _trusted(workspace).get(str(workspace)) == found.digest:
        return
    if ask and _ask(command, workspace / SETTINGS_FILE, found.widens, answer or _line):
        try:
            _record(workspace, found.digest)
        except OSError as error:
            print(f"{command}: applied, but not remembered: {error}", file=sys.stderr)
        return
    raise SettingsRefused(refusal(found.widens))


def _line() -> str:
    return sys.stdin.readline()


def check_submitted(found: RunSettings, digest: str | None) -> None:
    """For a durable run rebuilt from its spec (in a worker, or resumed): the workspace's
    file may widen the sandbox only if it is the file agreed to when the run was submitted
    (``digest``, recorded in the spec).

    Raises:
        SettingsError: it widens the sandbox and is not that file.
    """
    if found.widens and found.digest != digest:
        raise SettingsError(
            f"{SETTINGS_FILE} widens the sandbox ({', '.join(found.widens)}) and is not the "
            "file agreed to when the run was submitted; review it and submit the run again"
        )
