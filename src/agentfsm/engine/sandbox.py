"""Deprecated location of the OS sandbox: it moved to :mod:`agentfsm.sandbox.bubblewrap`.

Import from :mod:`agentfsm.sandbox` instead; this module only re-exports its names.
"""

from agentfsm.sandbox.bubblewrap import *  # noqa: F403
from agentfsm.sandbox.bubblewrap import __all__ as __all__
