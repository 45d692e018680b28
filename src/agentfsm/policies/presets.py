"""Ready-made policy sets."""

from __future__ import annotations

from .compression import compress
from .limits import max_turns
from .prune import TOOL_RESULT_BUDGET_CHARS, prune_tool_results
from .spend import spend_limit
from .text_tools import text_tool_calls

__all__ = ["coding_agent", "minimal"]


def minimal(turns: int) -> list[object]:
    """Exactly the core loop: a turn budget of ``turns`` and nothing else."""
    return [max_turns(turns, wrap_up=False)]


def coding_agent(
    *,
    turns: int = 50,
    context_budget_tokens: int | None = None,
    spend_tokens: int | None = None,
    tool_result_budget_chars: int = TOOL_RESULT_BUDGET_CHARS,
) -> list[object]:
    """The coding-agent set: turn cap with wrap-up, tool-result pruning, text tool-call
    fallback, and (when given a budget) compression with overflow recovery and a spend
    breaker."""
    policies: list[object] = [
        max_turns(turns),
        prune_tool_results(tool_result_budget_chars),
        text_tool_calls(),
    ]
    if context_budget_tokens is not None:
        policies.append(compress(context_budget_tokens))
    if spend_tokens is not None:
        policies.append(spend_limit(spend_tokens))
    return policies
