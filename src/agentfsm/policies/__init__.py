"""Policies: plain objects consulted at fixed states of the machine.

Each implements any subset of the hook protocols of :mod:`agentfsm.engine` (``TurnGate``,
``FinalGate``, ...); pass them as ``policies=[...]`` to ``run_conversation`` or ``Agent``.

A name imported here as itself (``x as x``) and left out of ``__all__`` is offered to the
other agentfsm packages only: it is not public API.
"""

from . import presets
from ._compression import compress
from ._health import loop_health
from ._limits import wrap_up
from ._prune import prune_tool_results
from ._redirect import redirect
from ._reminders import remind_when
from ._spend import spend_limit
from ._stop import (
    Condition,
    StopCondition,
    elapsed_over,
    require,
    stop_all,
    stop_any,
    stop_not,
    stop_when,
    text_matches,
    tokens_over,
    tool_called,
    turns_at_least,
)
from ._text_tools import text_tool_calls
from ._verifier import (
    parse_verdict,
    verifier,
)
from ._verify import NO_CHECK_COMMAND as NO_CHECK_COMMAND
from ._verify import verify

__all__ = [
    "Condition",
    "StopCondition",
    "compress",
    "elapsed_over",
    "loop_health",
    "parse_verdict",
    "presets",
    "prune_tool_results",
    "redirect",
    "remind_when",
    "require",
    "spend_limit",
    "stop_all",
    "stop_any",
    "stop_not",
    "stop_when",
    "text_matches",
    "text_tool_calls",
    "tokens_over",
    "tool_called",
    "turns_at_least",
    "verifier",
    "verify",
    "wrap_up",
]
