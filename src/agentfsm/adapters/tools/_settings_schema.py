"""The schema of ``.agentfsm/settings.json`` as pydantic models (strict: unknown keys and
wrong types are refused).

:func:`agentfsm.adapters.tools._settings.load_settings` imports this module when there is a
file to check, so that building the tools does not load pydantic.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr, ValidationError

from agentfsm.sandbox import ResourceLimits

__all__ = [
    "LimitsModel",
    "PermissionsModel",
    "ProviderModel",
    "SandboxModel",
    "SettingsModel",
    "first_error",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class PermissionsModel(_Strict):
    """``permissions``."""

    allow: list[StrictStr] = []
    deny: list[StrictStr] = []


class LimitsModel(_Strict):
    """``sandbox.limits``."""

    processes: StrictInt = ResourceLimits().processes
    memory_mb: StrictInt = ResourceLimits().memory_mb
    file_size_mb: StrictInt = ResourceLimits().file_size_mb
    tmp_mb: StrictInt = ResourceLimits().tmp_mb
    cpu_seconds: StrictInt = ResourceLimits().cpu_seconds


class SandboxModel(_Strict):
    """``sandbox``."""

    network: StrictBool = False
    read: list[StrictStr] = []
    write: list[StrictStr] = []
    env: list[StrictStr] = []
    limits: LimitsModel = LimitsModel()


class ProviderModel(_Strict):
    """``provider``."""

    quirks: dict[StrictStr, Any] = {}


class SettingsModel(_Strict):
    """The whole file."""

    permissions: PermissionsModel = PermissionsModel()
    sandbox: SandboxModel = SandboxModel()
    provider: ProviderModel = ProviderModel()


def first_error(error: ValidationError) -> str:
    """The first problem pydantic found, as ``location: message`` (unknown keys list the
    allowed ones)."""
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"]) or "(top level)"
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown key (allowed: permissions.allow, permissions.deny, sandbox.network, "
        message += "sandbox.read, sandbox.write, sandbox.env, sandbox.limits.processes, "
        message += "sandbox.limits.memory_mb, sandbox.limits.file_size_mb, "
        message += "sandbox.limits.tmp_mb, sandbox.limits.cpu_seconds, provider.quirks)"
    return f"{location}: {message}"
