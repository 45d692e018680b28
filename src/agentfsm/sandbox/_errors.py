"""The base class of the errors that end a run as they are.

It lives in this leaf package because :class:`~agentfsm.sandbox._process.SandboxUnavailable`
is one; the engine imports it from here (and re-exports it from
:mod:`agentfsm.engine._errors`).
"""

from __future__ import annotations

__all__ = ["RunRefused"]


class RunRefused(Exception):
    """Base of the errors a policy raises on purpose to end the run with (the verify gate's
    ``SandboxUnavailable``): they propagate as they are, not wrapped in ``PolicyError``."""
