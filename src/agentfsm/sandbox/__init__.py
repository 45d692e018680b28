"""The OS sandbox and the process runner of every command the agent starts.

A leaf package: it imports nothing else of ``agentfsm``, so the engine, the policies (the
verify gate) and the tools all import it from one place. :class:`BubblewrapSandbox` confines
a command (bubblewrap namespaces, a seccomp filter, resource limits, an environment
allow-list); :func:`run_command` runs it with a timeout and capped output and leaves no
process behind.
"""

from .bubblewrap import PROTECTED_DIR, BubblewrapSandbox, detect_sandbox
from .errors import RunRefused
from .limits import ResourceLimits
from .process import (
    CommandSandbox,
    SandboxUnavailable,
    Unsandboxed,
    run_command,
    sandbox_environ,
    scrubbed_environ,
)

__all__ = [
    "BubblewrapSandbox",
    "CommandSandbox",
    "PROTECTED_DIR",
    "ResourceLimits",
    "RunRefused",
    "SandboxUnavailable",
    "Unsandboxed",
    "detect_sandbox",
    "run_command",
    "sandbox_environ",
    "scrubbed_environ",
]
