"""Policies: plain objects consulted at fixed states of the machine.

Each implements any subset of the hooks in :mod:`agentfsm.engine.policy`; pass them as
``policies=[...]`` to ``run_conversation`` or ``Agent``.
"""

from . import presets
from .compression import compress
from .health import loop_health
from .limits import WRAP_UP_REMINDER, max_turns, wrap_up
from .prune import TOOL_RESULT_BUDGET_CHARS, prune_marker, prune_tool_results
from .redirect import build_evidence, parse_directions, redirect
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
from .verifier import ReadOnlyTools, parse_verdict, verifier
from .verify import resolve_verify_command, verify

__all__ = [
    "Condition",
    "ReadOnlyTools",
    "StopCondition",
    "TOOL_RESULT_BUDGET_CHARS",
    "WRAP_UP_REMINDER",
    "as_condition",
    "build_evidence",
    "compress",
    "elapsed_over",
    "loop_health",
    "max_turns",
    "parse_directions",
    "parse_text_tool_calls",
    "parse_verdict",
    "presets",
    "prune_marker",
    "prune_tool_results",
    "redirect",
    "remind_when",
    "require",
    "resolve_verify_command",
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
