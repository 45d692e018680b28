"""The OS sandbox and the process runner of every command the agent starts.

A leaf package: it imports nothing else of ``agentfsm``, so the engine, the policies (the
verify gate) and the tools all import it from one place. :class:`BubblewrapSandbox` confines
a command (bubblewrap namespaces, a seccomp filter, resource limits, an environment
allow-list); :func:`run_command` runs it with a timeout and capped output and leaves no
process behind.

A name imported here as itself (``x as x``) and left out of ``__all__`` is offered to the
other agentfsm packages only: it is not public API.
"""

from ._bubblewrap import PROTECTED_DIR as PROTECTED_DIR
from ._bubblewrap import BubblewrapSandbox, detect_sandbox
from ._errors import RunRefused
from ._hidden import check_workspace, hidden_beneath
from ._hidden import hidden_identities as hidden_identities
from ._install_paths import agent_install_paths as agent_install_paths
from ._limits import ResourceLimits
from ._limits import explain_limit as explain_limit
from ._process import (
    CommandSandbox,
    SandboxUnavailable,
    Unsandboxed,
    run_command,
)
from ._process import check_sandbox as check_sandbox
from ._process import env_names as env_names

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
