"""The workspace's ``.agentfsm/settings.json``, validated against its schema.

The settings are the user's, read once when the tools are built (the model can neither read
nor write them). A malformed file stops the run with a clear error instead of being half
applied: unknown keys, wrong types and unparsable rules are all refused (fail closed).

.. code-block:: json

    {
      "permissions": {"allow": ["shell(git status)"], "deny": ["shell(rm *)"]},
      "sandbox": {
        "network": false, "read": ["/opt/toolchain"], "write": ["/var/cache/build"],
        "env": ["CARGO_HOME"],
        "limits": {"processes": 512, "memory_mb": 2048, "file_size_mb": 512, "tmp_mb": 512,
                   "cpu_seconds": 600}
      },
      "provider": {"quirks": {"explicit_tool_choice": true, "stream_with_tools": false}}
    }

``provider.quirks`` is the quirk profile of the run's provider (``OpenAIQuirks`` fields for
the OpenAI wire, ``AnthropicQuirks`` fields for the Anthropic wire; ``agentfsm conformance
probe --write-settings`` writes it); a name no wire has is refused here, a name the run's
wire lacks when the run builds its provider.

``sandbox.env`` names the variables sandboxed commands get beyond the fixed allow-list
(``PATH``, ``LANG``, ``LC_*``…); ``sandbox.limits`` sets the resource limits of each
command (:class:`~agentfsm.sandbox._limits.ResourceLimits`; a key left out keeps its default).
``/`` is refused as a read or write path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from attrs import field, frozen

from agentfsm.engine import read_small_file
from agentfsm.sandbox import ResourceLimits, env_names

from ._workspace import SETTINGS_FILE, PermissionRule, Permissions

if TYPE_CHECKING:
    from agentfsm.adapters.providers import QuirkValue

    from ._settings_schema import SandboxModel

__all__ = [
    "MAX_SETTINGS_BYTES",
    "ProviderSettings",
    "SandboxSettings",
    "Settings",
    "SettingsError",
    "load_settings",
    "parse_settings",
    "read_settings_file",
]

MAX_SETTINGS_BYTES = 1 << 20
"""A settings file larger than this is refused."""


class SettingsError(ValueError):
    """The settings file is malformed; the message names the file and the field."""


@frozen
class SandboxSettings:
    """How the user widens the OS sandbox."""

    network: bool = False
    """Let sandboxed commands use the network."""
    read: tuple[str, ...] = ()
    """More absolute paths sandboxed commands may read."""
    write: tuple[str, ...] = ()
    """More absolute paths sandboxed commands may write (and read)."""
    env: tuple[str, ...] = ()
    """More environment variables sandboxed commands get (beyond ``PATH``, ``LANG``…)."""
    limits: ResourceLimits = field(factory=ResourceLimits)
    """The resource limits of each sandboxed command."""


@frozen
class ProviderSettings:
    """How the run talks to its provider."""

    quirks: tuple[tuple[str, QuirkValue], ...] = ()
    """The quirk profile, as (name, value) pairs in the file's order."""


@frozen
class Settings:
    """A workspace's settings."""

    permissions: Permissions = field(factory=Permissions)
    """Allow and deny rules for the tools."""
    sandbox: SandboxSettings = field(factory=SandboxSettings)
    """Widenings of the OS sandbox."""
    provider: ProviderSettings = field(factory=ProviderSettings)
    """The provider's quirk profile."""


def read_settings_file(path: Path, label: str = SETTINGS_FILE) -> bytes | None:
    """The bytes of the settings file at ``path`` (``None`` when it does not exist); ``label``
    names the file in errors.

    Raises:
        SettingsError: the file is larger than :data:`MAX_SETTINGS_BYTES`, not a regular
            file, or cannot be read.
    """
    try:
        return read_small_file(path, MAX_SETTINGS_BYTES)
    except FileNotFoundError:
        return None
    except ValueError as error:
        raise SettingsError(f"{label}: {error}") from None
    except OSError as error:
        raise SettingsError(f"{label}: cannot read it: {error.strerror}") from None


def _paths(values: list[str], key: str, label: str) -> tuple[str, ...]:
    paths = []
    for value in values:
        expanded = os.path.expanduser(value)
        if not os.path.isabs(expanded):
            raise SettingsError(f"{label}: {key}: {value!r} is not an absolute path")
        normal = os.path.normpath(expanded)
        if os.path.dirname(normal) == normal:
            raise SettingsError(f"{label}: {key}: / would open the whole machine")
        paths.append(normal)
    return tuple(paths)


def _sandbox(model: SandboxModel, label: str) -> SandboxSettings:
    try:
        env = env_names(model.env)
    except ValueError as error:
        raise SettingsError(f"{label}: sandbox.env: {error}") from None
    try:
        limits = ResourceLimits(**model.limits.model_dump())
    except ValueError as error:
        raise SettingsError(f"{label}: sandbox.limits.{error}") from None
    return SandboxSettings(
        model.network,
        _paths(model.read, "sandbox.read", label),
        _paths(model.write, "sandbox.write", label),
        env,
        limits,
    )


def load_settings(root: str | Path) -> Settings:
    """The settings of the workspace at ``root`` (defaults when the file is absent).

    Raises:
        SettingsError: the file is not valid JSON, not an object, has unknown keys, values
            of the wrong type, or a rule that does not parse.
    """
    data = read_settings_file(Path(root) / SETTINGS_FILE)
    return Settings() if data is None else parse_settings(data)


def parse_settings(data: bytes, label: str = SETTINGS_FILE) -> Settings:
    """The settings ``data`` (the bytes of a settings file) holds; ``label`` names the file
    in errors.

    Raises:
        SettingsError: the bytes are not valid JSON, not an object, have unknown keys,
            values of the wrong type, or a rule that does not parse.
    """
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise SettingsError(f"{label}: not valid JSON: {error}") from None
    # The schema is a pydantic model: imported here, when there is a file to check.
    from pydantic import ValidationError

    from agentfsm.adapters.providers import all_quirk_names

    from ._settings_schema import SettingsModel, first_error

    try:
        model = SettingsModel.model_validate(raw)
    except ValidationError as error:
        raise SettingsError(f"{label}: {first_error(error)}") from None
    rules: dict[str, tuple[PermissionRule, ...]] = {}
    for key in ("allow", "deny"):
        parsed = []
        for text in getattr(model.permissions, key):
            try:
                parsed.append(PermissionRule.parse(text))
            except ValueError as error:
                raise SettingsError(f"{label}: permissions.{key}: {error}") from None
        rules[key] = tuple(parsed)
    known = all_quirk_names()
    for name, value in model.provider.quirks.items():
        where = f"{label}: provider.quirks.{name}"
        if name not in known:
            raise SettingsError(f"{where}: not a quirk (valid: {', '.join(known)})")
        if not (value is None or isinstance(value, bool | int | str)):
            raise SettingsError(f"{where}: a quirk is true/false, a number, a name or null")
    return Settings(
        Permissions(rules["allow"], rules["deny"]),
        _sandbox(model.sandbox, label),
        ProviderSettings(tuple(model.provider.quirks.items())),
    )
