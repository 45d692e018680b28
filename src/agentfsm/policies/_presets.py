"""Ready-made policy sets."""

from __future__ import annotations

from pathlib import Path

from agentfsm.engine import Policy
from agentfsm.sandbox import CommandSandbox

from ._compression import compress
from ._health import loop_health
from ._limits import wrap_up
from ._prune import TOOL_RESULT_BUDGET_CHARS, prune_tool_results
from ._redirect import redirect
from ._spend import spend_limit
from ._text_tools import text_tool_calls
from ._verifier import verifier
from ._verify import verify

__all__ = ["coding_agent", "minimal"]


def minimal() -> list[Policy]:
    """Exactly the core loop: no policy (the budget is the run's ``max_turns``)."""
    return []


def coding_agent(
    *,
    workspace: str | Path = ".",
    context_budget_tokens: int | None = None,
    spend_tokens: int | None = None,
    tool_result_budget_chars: int = TOOL_RESULT_BUDGET_CHARS,
    review: bool = True,
    redirect_enabled: bool = False,
    verify_command: str | None = None,
    sandbox: CommandSandbox | None = None,
) -> list[Policy]:
    """The coding-agent set, with its documented defaults.

    Wrap-up on the run's last turn (the budget is the run's ``max_turns``), tool-result
    pruning, text tool-call fallback, loop health
    (redirection off unless ``redirect_enabled``), the verify gate (the workspace's check
    command, when it has one, after file changes), the independent verifier (on runs that
    changed files, unless ``review=False``), and when given budgets compression with
    overflow recovery and a spend breaker.

    ``verify_command`` replaces the check command found in the workspace; ``sandbox`` is the
    OS sandbox the verify gate runs it in (by default the run's, ``Agent(sandbox=…)``).
    """
    policies: list[Policy] = [
        wrap_up(),
        prune_tool_results(tool_result_budget_chars),
        text_tool_calls(),
        loop_health(redirect=redirect(enabled=redirect_enabled)),
        verify(verify_command, workspace=workspace, sandbox=sandbox),
    ]
    if review:
        policies.append(verifier(only_if_mutated=True))
    if context_budget_tokens is not None:
        policies.append(compress(context_budget_tokens))
    if spend_tokens is not None:
        policies.append(spend_limit(spend_tokens))
    return policies
