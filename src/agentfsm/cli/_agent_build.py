"""The agent of ``agentfsm run``, built from its options (shared by ``run --durable``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from agentfsm.adapters.tools import Settings, workspace_tools
from agentfsm.agent import Agent, Hooks, PreambleProvider, WorkspacePreamble
from agentfsm.engine import ChatFn
from agentfsm.policies import presets
from agentfsm.sandbox import CommandSandbox

__all__ = ["build_agent"]


def build_agent(
    args: argparse.Namespace,
    *,
    chat: ChatFn,
    workspace: Path,
    session_dir: Path,
    sandbox: CommandSandbox,
    protected: tuple[str, ...],
    settings: Settings,
    system_prompt: str,
    budget: int | None,
    max_tokens: int | None,
    hooks: Hooks | None = None,
    preamble: PreambleProvider | None = None,
) -> Agent:
    """The agent ``agentfsm run`` runs: the preset's policies, the workspace tools in the
    sandbox, the workspace preamble (unless ``preamble`` replaces it). Raises
    ``ValueError`` or ``NotADirectoryError`` on unusable options."""
    policies = (
        presets.minimal()
        if args.preset == "minimal"
        else presets.coding_agent(
            workspace=workspace,
            context_budget_tokens=budget,
            verify_command=args.verify_command,
            sandbox=sandbox,
        )
    )
    return Agent(
        chat,
        workspace_tools(workspace, sandbox=sandbox, protected=protected[1:], settings=settings),
        policies=policies,
        system_prompt=system_prompt,
        session_dir=session_dir,
        hooks=hooks,
        preamble=preamble or WorkspacePreamble(workspace, exclude=protected),
        max_turns=args.max_turns,
        temperature=args.temperature,
        max_tokens=max_tokens,
        context_budget_tokens=budget if args.preset == "minimal" else None,
        sandbox=sandbox,
        instrument=getattr(args, "instrument", None) or False,  # set by run --otel
    )
