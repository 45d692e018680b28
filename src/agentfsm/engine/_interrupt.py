"""Interrupting an awaited call from an abort signal without a task per call.

The one mechanism that turns an :class:`~agentfsm.engine._abort.AbortSignal` into the end of
an awaited call, used by the runner, the toolbox and the providers' transport alike:
:func:`interrupt` awaits a call (optionally within a timeout) and raises ``AbortError`` when
the signal fires. :class:`Interrupter` arms once per run (one callback on the signal) and
makes each interruptible await of the run's task cost a counter and a ``try``; the code it
awaits can find it through :func:`active_interrupter` (the toolbox does) instead of arming
its own. :func:`cancel_on_abort` arms for one call; :func:`race_abort` serves a signal that
takes no callbacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ._errors import AbortError

__all__ = [
    "Interrupter",
    "activate",
    "active_interrupter",
    "cancel_on_abort",
    "deactivate",
    "interrupt",
    "race_abort",
]

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


async def race_abort(
    awaitable: Awaitable[T],
    signal: Any,
    reason: str,
    *,
    timeout: float | None = None,  # noqa: ASYNC109 - one bound per awaited step
) -> T:
    """Await ``awaitable`` in a task of its own, raced against ``signal.wait()`` (for a
    signal without ``add_callback``); the abort cancels it and raises ``AbortError``, a
    ``timeout`` that runs out first raises ``TimeoutError``. A signal without ``wait``
    either is only read before the call."""
    wait = getattr(signal, "wait", None)
    if not callable(wait):
        async with asyncio.timeout(timeout):
            return await awaitable
    task = asyncio.ensure_future(awaitable)
    if not signal.aborted:
        waiter = asyncio.ensure_future(wait())
        try:
            done, _ = await asyncio.wait(
                (task, waiter), timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except BaseException:
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait((task,))
            raise
        finally:
            waiter.cancel()
        if task.done():
            return task.result()
        if waiter not in done:  # the timeout ran out
            task.cancel()
            await asyncio.wait((task,))
            raise TimeoutError
    task.cancel()
    await asyncio.wait((task,))  # let it unwind; its CancelledError is not ours
    raise AbortError(reason)


class Interrupter:
    """Cancels the interruptible awaits of one task when one signal fires.

    One callback on the signal for the whole run: the abort cancels the task only while it
    is inside :meth:`call`; that cancellation becomes ``AbortError`` there, a cancellation
    from elsewhere stays a ``CancelledError``. Calls may nest (the toolbox's inside the
    runner's): the innermost turns the cancellation into ``AbortError``, and every call the
    interrupt happened in raises ``AbortError`` even if what it awaited swallowed it.
    """

    __slots__ = ("_loop", "_remove", "depth", "interrupted", "owed", "signal", "task")

    @classmethod
    def arm(cls, signal: Any) -> Interrupter | None:
        """An interrupter for the current task, when ``signal`` takes callbacks (and has
        not fired yet)."""
        add_callback = getattr(signal, "add_callback", None)
        task = asyncio.current_task()
        if not callable(add_callback) or task is None or signal.aborted:
            return None
        return cls(signal, add_callback, task)

    def __init__(
        self,
        signal: Any,
        add_callback: Callable[[Callable[[], object]], Callable[[], None]],
        task: asyncio.Task[Any],
    ) -> None:
        self.signal = signal
        """The signal (what the code awaited is given, to know this interrupter is its)."""
        self.task = task
        self.depth = 0
        """How many calls are in flight (nested)."""
        self.interrupted = False
        """Whether the abort cancelled a call."""
        self.owed = False
        """Whether that cancellation is still to be taken back (``uncancel``)."""
        self._loop = task.get_loop()
        self._remove = add_callback(self._on_abort)

    def _on_abort(self) -> None:  # on whichever thread aborted
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to cancel
            self._loop.call_soon_threadsafe(self._fire)

    def _fire(self) -> None:  # on the loop, after the abort
        if self.depth > 0 and not self.interrupted:
            self.interrupted = self.owed = True
            self.task.cancel()

    def ready(self) -> bool:
        """Whether a call can go through this interrupter (made in its task: the caller
        knows)."""
        return not self.interrupted and not self.signal.aborted

    def serves(self, signal: Any) -> bool:
        """Whether a call awaited now for ``signal`` can go through this interrupter."""
        return (
            signal is self.signal
            and not self.interrupted
            and not signal.aborted
            # The task running on the interrupter's loop (no lookup of the running loop,
            # which asks the system for the process id each time).
            and asyncio.current_task(self._loop) is self.task
        )

    async def call(self, awaitable: Awaitable[T], reason: str) -> T:
        """Await ``awaitable`` in the task; ``AbortError(reason)`` if the signal fires."""
        interrupted = self.interrupted
        self.depth += 1
        try:
            result = await awaitable
        except asyncio.CancelledError:
            if self.owed:
                self.owed = False
                if self.task.uncancel() == 0:
                    raise AbortError(reason) from None
            raise
        finally:
            self.depth -= 1
        if self.interrupted and not interrupted:  # the call swallowed the interrupt
            if self.owed:
                self.owed = False
                if self.task.uncancel() > 0:
                    raise asyncio.CancelledError
            raise AbortError(reason)
        return result

    def close(self) -> None:
        """Take the callback off the signal (and let go of the remover, which holds this
        interrupter through the callback)."""
        remove, self._remove = self._remove, _nothing
        remove()


def _nothing() -> None:
    """The remover of a closed interrupter."""


_ACTIVE: contextvars.ContextVar[Interrupter | None] = contextvars.ContextVar(
    "agentfsm_interrupter", default=None
)


def active_interrupter(signal: Any) -> Interrupter | None:
    """The run's interrupter when it serves ``signal`` in the current task, else ``None``."""
    interrupter = _ACTIVE.get()
    if interrupter is not None and interrupter.serves(signal):
        return interrupter
    return None


def activate(interrupter: Interrupter | None) -> contextvars.Token[Interrupter | None]:
    """Make ``interrupter`` the current context's (undo with ``_ACTIVE.reset(token)``)."""
    return _ACTIVE.set(interrupter)


def deactivate(token: contextvars.Token[Interrupter | None]) -> None:
    """Undo :func:`activate`."""
    _ACTIVE.reset(token)


async def interrupt(
    awaitable: Awaitable[T],
    signal: Any,
    interrupter: Interrupter | None,
    reason: str,
    *,
    timeout: float | None = None,  # noqa: ASYNC109 - one bound per awaited step
) -> T:
    """Await ``awaitable``, cancelled with ``AbortError(reason)`` when ``signal`` fires:
    through ``interrupter`` when it serves, else armed for this call alone. With
    ``timeout``, the call also ends with ``TimeoutError`` after that many seconds."""
    if interrupter is not None and interrupter.serves(signal):
        return await interrupter.call(_within(awaitable, timeout), reason)
    add_callback = getattr(signal, "add_callback", None)
    current = asyncio.current_task()
    if callable(add_callback) and current is not None and not signal.aborted:
        return await cancel_on_abort(_within(awaitable, timeout), add_callback, current, reason)
    return await race_abort(awaitable, signal, reason, timeout=timeout)


def _within(awaitable: Awaitable[T], timeout: float | None) -> Awaitable[T]:
    return awaitable if timeout is None else _bounded(awaitable, timeout)


async def _bounded(awaitable: Awaitable[T], timeout: float) -> T:  # noqa: ASYNC109
    async with asyncio.timeout(timeout):
        return await awaitable
