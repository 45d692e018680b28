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


class _TurnBudget:
    """The run's turn limit as a policy (the engine's ``turn_budget`` hook, and no other)."""

    __slots__ = ("turn_budget",)

    def __init__(self, turns: int) -> None:
        self.turn_budget = turns

    @property
    def name(self) -> str:
        """``turn_budget(10)``: how diagrams and events name it."""
        return repr(self)

    def __repr__(self) -> str:
        return f"turn_budget({self.turn_budget})"


def minimal(max_turns: int | None = None) -> list[Policy]:
    """Exactly the core loop.

    With ``max_turns``, the run stops there as the seed loop's ``max_turns`` budget does
    (the tightest of it and ``LoopParams(max_turns=...)`` / ``Agent(max_turns=...)`` wins);
    without it, no policy at all: the budget is the run's own.

    Raises:
        ValueError: ``max_turns`` is not an int >= 1.
    """
    if max_turns is None:
        return []
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
        raise ValueError(f"max_turns must be an int >= 1, got {max_turns!r}")
    return [_TurnBudget(max_turns)]


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
