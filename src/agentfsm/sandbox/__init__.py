"""The OS sandbox and the process runner of every command the agent starts.

A leaf package: it imports nothing else of ``agentfsm``, so the engine, the policies (the
verify gate) and the tools all import it from one place. :class:`BubblewrapSandbox` confines
a command (bubblewrap namespaces, a seccomp filter, resource limits, an environment
allow-list); :func:`run_command` runs it with a timeout and capped output and leaves no
process behind.
"""

from agentfsm._deprecated import package_getattr as _package_getattr

from ._bubblewrap import BubblewrapSandbox, detect_sandbox
from ._errors import RunRefused
from ._hidden import check_workspace, hidden_beneath
from ._limits import ResourceLimits
from ._process import (
    CommandSandbox,
    SandboxUnavailable,
    Unsandboxed,
    run_command,
)

__all__ = [
    "BubblewrapSandbox",
    "CommandSandbox",
    "ResourceLimits",
    "RunRefused",
    "SandboxUnavailable",
    "Unsandboxed",
    "check_workspace",
    "detect_sandbox",
    "hidden_beneath",
    "run_command",
]

__getattr__ = _package_getattr(__name__)
