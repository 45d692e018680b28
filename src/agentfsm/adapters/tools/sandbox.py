"""The OS sandbox of the tools' processes (implemented in :mod:`agentfsm.engine.sandbox`)."""

from agentfsm.engine.sandbox import BubblewrapSandbox, ResourceLimits, detect_sandbox

__all__ = ["BubblewrapSandbox", "ResourceLimits", "detect_sandbox"]
