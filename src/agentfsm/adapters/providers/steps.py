"""Awaiting one step of a call (a send, a read) within its timeout and its abort signal."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from agentfsm.engine.protocols import SupportsAbort

from .limits import Deadline

__all__ = ["Aborted", "Expired", "race", "step"]

T = TypeVar("T")


class Aborted(Exception):
    """The step was cut by the abort signal."""


class Expired(Exception):
    """The call's total deadline ran out during the step."""


async def race(
    awaitable: Awaitable[T],
    signal: SupportsAbort | None,
    timeout: float | None,  # noqa: ASYNC109 - one bound per awaited step, by phase
) -> T:
    """Await with a timeout (``TimeoutError``) and an abort signal (``Aborted``).

    With a signal that takes callbacks (``AbortSignal``) the step runs in the calling task
    under ``asyncio.timeout`` and an abort cancels that task: no extra task per step. Other
    signals are raced with a watcher task.
    """
    add_callback = getattr(signal, "add_callback", None) if signal is not None else None
    if signal is None or callable(add_callback):
        return await _inline(awaitable, signal, add_callback, timeout)
    return await _watched(awaitable, signal, timeout)


async def _inline(
    awaitable: Awaitable[T],
    signal: SupportsAbort | None,
    add_callback: Any,
    timeout: float | None,  # noqa: ASYNC109 - one bound per awaited step, by phase
) -> T:
    if signal is not None and signal.aborted:
        _close(awaitable)
        raise Aborted
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    state = {"fired": False, "over": False}

    def cancel() -> None:
        if not state["over"] and not state["fired"]:
            state["fired"] = True
            task.cancel()

    def on_abort() -> None:  # may run in another thread (a signal handler's)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to cancel
            loop.call_soon_threadsafe(cancel)

    remove = add_callback(on_abort) if add_callback is not None else None
    try:
        async with asyncio.timeout(timeout):
            return await awaitable
    except asyncio.CancelledError:
        if state["fired"] and task.uncancel() == 0:
            raise Aborted from None
        raise
    finally:
        state["over"] = True  # a queued abort no longer cancels this task
        if remove is not None:
            remove()


def _close(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()


async def _watched(
    awaitable: Awaitable[T],
    signal: SupportsAbort,
    timeout: float | None,  # noqa: ASYNC109 - one bound per awaited step, by phase
) -> T:
    task = asyncio.ensure_future(awaitable)
    waiters: set[asyncio.Future[Any]] = {task}
    wait = getattr(signal, "wait", None)
    aborter = asyncio.ensure_future(wait()) if callable(wait) else None
    if aborter is not None:
        waiters.add(aborter)
    try:
        done, _ = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        # Cancelled from outside: let the inner step unwind before anyone closes the
        # generator it is advancing.
        task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait((task,))
        raise
    finally:
        if aborter is not None:
            aborter.cancel()
    if task in done:
        return task.result()
    task.cancel()
    await asyncio.wait((task,))
    if aborter is not None and aborter in done:
        raise Aborted
    raise TimeoutError


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
