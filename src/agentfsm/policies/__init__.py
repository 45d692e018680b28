"""Policies: plain objects consulted at fixed states of the machine.

Each implements any subset of the hooks in :mod:`agentfsm.engine.policy`; pass them as
``policies=[...]`` to ``run_conversation`` or ``Engine``.
"""

from . import presets
from .compression import compress
from .limits import WRAP_UP_REMINDER, max_turns
from .prune import TOOL_RESULT_BUDGET_CHARS, prune_marker, prune_tool_results
from .reminders import remind_when
from .spend import spend_limit
from .stop import (
    Condition,
    StopCondition,
    as_condition,
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
from .text_tools import parse_text_tool_calls, text_tool_calls

__all__ = [
    "TOOL_RESULT_BUDGET_CHARS",
    "WRAP_UP_REMINDER",
    "Condition",
    "StopCondition",
    "as_condition",
    "compress",
    "elapsed_over",
    "max_turns",
    "parse_text_tool_calls",
    "presets",
    "prune_marker",
    "prune_tool_results",
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
]
