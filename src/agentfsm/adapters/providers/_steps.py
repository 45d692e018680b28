"""Awaiting one step of a call (a send, a read) within its timeout and its abort signal."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from agentfsm.engine._interrupt import interrupt
from agentfsm.engine._protocols import SupportsAbort

from ._limits import Deadline

__all__ = ["Expired", "race", "step"]

T = TypeVar("T")


class Expired(Exception):
    """The call's total deadline ran out during the step."""


async def race(
    awaitable: Awaitable[T],
    signal: SupportsAbort | None,
    timeout: float | None,  # noqa: ASYNC109 - one bound per awaited step, by phase
) -> T:
    """Await with a timeout (``TimeoutError``) and an abort signal (``AbortError``).

    The engine's one abort mechanism (:func:`~agentfsm.engine._interrupt.interrupt`): with a
    signal that takes callbacks (``AbortSignal``) the step runs in the calling task and an
    abort cancels that task, no extra task per step; other signals are raced with a watcher
    task.
    """
    if signal is None:
        async with asyncio.timeout(timeout):
            return await awaitable
    return await interrupt(awaitable, signal, None, "the call was aborted", timeout=timeout)


async def step(
    awaitable: Awaitable[T],
    signal: SupportsAbort | None,
    timeout: float | None,  # noqa: ASYNC109 - the phase's bound, cut to the deadline
    deadline: Deadline | None,
) -> T:
    """:func:`race` within the call's deadline: ``Expired`` when that is what ran out."""
    bound, total = deadline.bound(timeout) if deadline is not None else (timeout, False)
    try:
        return await race(awaitable, signal, bound)
    except TimeoutError:
        if total:
            raise Expired from None
        raise
