"""``Agent.submit`` / ``Agent.gather``: durable runs of an agent, through
:mod:`agentfsm.adapters.durable` (the ``durable`` extra)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentfsm.engine import LoopOutcome

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["gather_durable", "submit_durable"]

INSTALL_HINT = "durable runs need the durable extra: pip install 'agentfsm[durable]'"


def _durable() -> Any:
    try:
        from agentfsm.adapters import durable
    except ImportError as error:  # dbos is not installed
        raise ImportError(f"{INSTALL_HINT} ({error})") from None
    return durable


async def submit_durable(
    agent: Agent,
    prompt: str,
    *,
    run_id: str | None = None,
    on_event: Callable[[Any], None] | None = None,
) -> str:
    """Start a durable run of ``agent`` (see :meth:`Agent.submit`)."""
    if agent.durable_factory is None:
        raise ValueError(
            "this Agent has no durable_factory: register a factory that builds it "
            "(agentfsm.adapters.durable.register_agent_factory) and pass its name"
        )
    if agent.store is None:
        raise ValueError("durable runs are recorded: give this Agent a session_dir")
    durable = _durable()
    handle = agent.store.new_handle()
    spec = durable.RunSpec(
        prompt=prompt, factory=agent.durable_factory, session_path=str(handle.path)
    )
    run: str = await durable.submit(spec, run_id=run_id, on_event=on_event)
    return run


async def gather_durable(run_ids: Sequence[str]) -> list[LoopOutcome]:
    """The outcomes of durable runs, in order."""
    outcomes: list[LoopOutcome] = await _durable().gather(list(run_ids))
    return outcomes
