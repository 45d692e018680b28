"""Interrupting an awaited call from an abort signal without a task per call."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .errors import AbortError

__all__ = ["cancel_on_abort", "race_abort"]

T = TypeVar("T")


async def cancel_on_abort(
    awaitable: Awaitable[T],
    add_callback: Callable[[Callable[[], object]], Callable[[], None]],
    task: asyncio.Task[Any],
    reason: str,
) -> T:
    """Await ``awaitable`` in ``task`` (the current one, no new task), cancelling it when
    the signal fires during the call; that cancellation becomes ``AbortError``, one from
    elsewhere stays a ``CancelledError``."""
    loop = asyncio.get_running_loop()
    active, interrupted = True, False

    def fire() -> None:  # on the loop, after the abort
        nonlocal interrupted
        if active and not interrupted:
            interrupted = True
            task.cancel()

    def on_abort() -> None:  # on whichever thread aborted
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to cancel
            loop.call_soon_threadsafe(fire)

    remove = add_callback(on_abort)
    try:
        result = await awaitable
    except asyncio.CancelledError:
        if interrupted and task.uncancel() == 0:
            raise AbortError(reason) from None
        raise
    finally:
        active = False
        remove()
    if interrupted:  # the call swallowed the interrupt's cancellation
        if task.uncancel() > 0:
            raise asyncio.CancelledError
        raise AbortError(reason)
    return result


async def race_abort(awaitable: Awaitable[T], signal: Any, reason: str) -> T:
    """Await ``awaitable`` in a task of its own, raced against ``signal.wait()`` (for a
    signal without ``add_callback``); the abort cancels it and raises ``AbortError``."""
    task = asyncio.ensure_future(awaitable)
    if not signal.aborted:
        waiter = asyncio.ensure_future(signal.wait())
        try:
            await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait((task,))
            raise
        finally:
            waiter.cancel()
        if task.done():
            return task.result()
    task.cancel()
    await asyncio.wait((task,))  # let it unwind; its CancelledError is not ours
    raise AbortError(reason)
