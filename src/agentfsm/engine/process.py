"""Deprecated location of the process runner: it moved to :mod:`agentfsm.sandbox.process`.

Import from :mod:`agentfsm.sandbox` instead; this module only re-exports its names.
"""

from __future__ import annotations

from agentfsm.sandbox.process import (
    CommandSandbox,
    SandboxUnavailable,
    Unsandboxed,
    env_names,
    run_command,
    sandbox_environ,
    scrubbed_environ,
)

__all__ = [
    "CommandSandbox",
    "SandboxUnavailable",
    "Unsandboxed",
    "env_names",
    "run_command",
    "sandbox_environ",
    "scrubbed_environ",
]
