"""Deprecated location of the OS sandbox: it moved to :mod:`agentfsm.sandbox.bubblewrap`.

Import from :mod:`agentfsm.sandbox` instead; this module only re-exports its names.
"""

from __future__ import annotations

from agentfsm.sandbox.bubblewrap import (
    PROTECTED_DIR,
    BubblewrapSandbox,
    ResourceLimits,
    detect_sandbox,
)

__all__ = ["PROTECTED_DIR", "BubblewrapSandbox", "ResourceLimits", "detect_sandbox"]
