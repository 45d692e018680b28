"""Deprecated location of the OS sandbox of the tools' processes: import it from
:mod:`agentfsm.sandbox` (or :mod:`agentfsm.adapters.tools`); this module only re-exports."""

from agentfsm.sandbox import BubblewrapSandbox, ResourceLimits, detect_sandbox

__all__ = ["BubblewrapSandbox", "ResourceLimits", "detect_sandbox"]
