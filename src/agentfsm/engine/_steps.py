"""Effects as steps: the seam a durable engine (DBOS) plugs into.

Every effect of a run with a cost or a side effect goes through :func:`run_step`: each chat
call (the loop's, compression's, a policy's auxiliary call), each tool call, each verify
command. Outside a durable run it simply awaits the effect. A durable run sets
:data:`current_step_runner` for its task (nested runs, such as the verifier's, inherit
it), and the runner records each step's result so that a recovered run replays it instead
of paying for it again.

For a replay to give the same run, everything between steps must be a deterministic
function of the step results.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

__all__ = ["StepRunner", "current_step_runner", "run_step"]

T = TypeVar("T")


class StepRunner(Protocol):
    """Runs one named effect as a step (e.g. a DBOS step) and returns its result."""

    def __call__(self, name: str, effect: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        """Run ``effect`` (or replay its recorded result) and return it."""
        ...


current_step_runner: contextvars.ContextVar[StepRunner | None] = contextvars.ContextVar(
    "agentfsm_step_runner", default=None
)
"""The step runner of the durable run this task belongs to (``None``: not durable)."""


async def run_step(name: str, effect: Callable[[], Awaitable[T]]) -> T:
    """Run ``effect`` as the step ``name`` of the current durable run, or just await it.

    An effect run inside another step is part of that step (its result is recorded with
    the outer one), not a step of its own.
    """
    runner = current_step_runner.get()
    if runner is None:
        return await effect()

    async def alone() -> T:
        token = current_step_runner.set(None)
        try:
            return await effect()
        finally:
            current_step_runner.reset(token)

    return await runner(name, alone)
