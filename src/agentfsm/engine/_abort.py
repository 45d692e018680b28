"""Cooperative cancellation: :class:`AbortController` and its :class:`AbortSignal`."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

__all__ = ["AbortController", "AbortSignal"]


class AbortSignal:
    """Read side of an :class:`AbortController`: is it aborted, and wait until it is.

    Safe to abort from another thread or a signal handler: waiters are woken on their own
    event loop.

    ``aborted`` tells whether :meth:`AbortController.abort` was called (read it; only the
    controller sets it). It is a plain attribute, not a property: a run reads it several
    times a turn.
    """

    __slots__ = ("_callbacks", "_lock", "_reason", "_waiters", "aborted")

    def __init__(self) -> None:
        self.aborted = False
        self._reason: object = None
        self._waiters: list[asyncio.Future[None]] = []
        self._callbacks: list[Callable[[], object]] = []
        self._lock = threading.Lock()

    @property
    def reason(self) -> object:
        """The reason given to :meth:`AbortController.abort`, if any."""
        return self._reason

    async def wait(self) -> None:
        """Return once the signal is aborted (at once if it already is)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            if self.aborted:
                return
            self._waiters.append(future)
        try:
            await future
        finally:
            with self._lock:
                if future in self._waiters:
                    self._waiters.remove(future)

    def add_callback(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback`` once on abort (at once if already aborted); returns a remover."""
        with self._lock:
            if not self.aborted:
                self._callbacks.append(callback)

                def remove() -> None:
                    with self._lock:
                        if callback in self._callbacks:
                            self._callbacks.remove(callback)

                return remove
        callback()
        return lambda: None

    def _fire(self, reason: object) -> None:
        with self._lock:
            if self.aborted:
                return
            self.aborted = True
            self._reason = reason
            waiters, self._waiters = self._waiters, []
            callbacks, self._callbacks = self._callbacks, []
        for future in waiters:
            loop = future.get_loop()
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, future)
        for callback in callbacks:
            callback()

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self.aborted})"


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class AbortController:
    """Owner of an :class:`AbortSignal`; call :meth:`abort` to request cancellation."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()
        """The signal to pass to the loop (``LoopParams.signal``)."""

    def abort(self, reason: object = None) -> None:
        """Abort the signal; later calls do nothing."""
        self.signal._fire(reason)

    def __repr__(self) -> str:
        return f"AbortController(aborted={self.signal.aborted})"
