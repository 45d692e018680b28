"""Deprecated location of the process runner: it moved to :mod:`agentfsm.sandbox.process`.

Import from :mod:`agentfsm.sandbox` instead; this module only re-exports its names.
"""

from agentfsm.sandbox.process import *  # noqa: F403
from agentfsm.sandbox.process import __all__ as __all__
