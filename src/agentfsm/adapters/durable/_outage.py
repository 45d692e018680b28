"""Waiting on a system database that does not answer: for how long, why, and until when.

A command that reads the database (``agentfsm batch`` watching its tasks, a worker checking
that the database answers) makes each read in a thread of its own, so the command itself
never blocks on the database: Ctrl-C and SIGTERM are served at once, and the read that
does not come back is abandoned (the thread is a daemon). :class:`Outage` keeps the time
since the database last answered and the last reason it gave; past a wait limit the
command gives up with :class:`DatabaseUnreachable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa

__all__ = [
    "DatabaseUnreachable",
    "Outage",
    "call_in_thread",
    "in_thread",
    "is_connection_error",
    "reason_of",
]

T = TypeVar("T")

SHOWN_AFTER = 2.0
"""Seconds without an answer before a wait is worth telling the user."""


class DatabaseUnreachable(Exception):
    """The system database did not answer for longer than the command may wait."""

    def __init__(self, seconds: float, reason: str | None) -> None:
        super().__init__(seconds, reason)
        self.seconds = seconds
        self.reason = reason

    def __str__(self) -> str:
        because = f" ({self.reason})" if self.reason else ""
        return f"the system database did not answer for {self.seconds:.0f} s{because}"


def is_disk_full(error: BaseException) -> bool:
    """Whether ``error`` says the disk (of the database, or of a file) is full."""
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return True
    text = str(getattr(error, "orig", None) or error)
    return "disk is full" in text or "No space left on device" in text


def is_connection_error(error: BaseException) -> bool:
    """Whether ``error`` says the database could not be reached or stopped answering (as
    opposed to a query it refused): a lost or refused connection, an exhausted pool, a
    reply that did not come, a SQLite file that cannot be opened or stays locked."""
    if isinstance(error, (sa.exc.TimeoutError, TimeoutError, ConnectionError)):
        return True
    if is_disk_full(error):
        return False  # it answers: waiting does not make room
    if isinstance(error, sa.exc.DBAPIError):
        return bool(error.connection_invalidated) or isinstance(
            error, (sa.exc.OperationalError, sa.exc.InterfaceError)
        )
    try:
        import psycopg
    except ImportError:  # pragma: no cover - dbos depends on psycopg
        return False
    return isinstance(error, psycopg.OperationalError)


def reason_of(error: BaseException) -> str:
    """The first line of what the driver said, without SQLAlchemy's wrapping."""
    inner = getattr(error, "orig", None) or error
    text = str(inner).strip() or type(inner).__name__
    line = next((part.strip() for part in text.splitlines() if part.strip()), text)
    for prefix in ("connection failed: ", "consuming input failed: "):
        line = line.removeprefix(prefix)
    return line[:300]


class Outage:
    """Since when the database has not answered, and the last reason it gave.

    Args:
        limit: Seconds of silence after which :meth:`check` raises
            :class:`DatabaseUnreachable` (``None``: wait for ever).
    """

    def __init__(self, limit: float | None = None) -> None:
        self.limit = limit
        self.since: float | None = None
        """``time.monotonic()`` of the first unanswered read (``None``: it answers)."""
        self.reason: str | None = None
        """The last error's reason (``None``: no answer yet, no error either)."""
        self.last_silence: float | None = None
        """How long the last silence that was shown lasted."""
        self._asked: float | None = None

    def asking(self) -> None:
        """A read starts now."""
        if self._asked is None:
            self._asked = time.monotonic()

    def heard(self) -> None:
        """The database answered one statement of a read still under way (a long
        submission): it is slow, not silent. Safe to call from the reading thread. Once a
        read has failed, only a read that ends counts: a read failing again and again after
        its first statements is an outage still."""
        if self.since is None:
            self._asked = time.monotonic()

    def failed(self, error: BaseException) -> None:
        """A read failed with a connection error."""
        self.since = self.since if self.since is not None else self._asked or time.monotonic()
        self.reason = reason_of(error)
        self._asked = None

    def answered(self) -> float | None:
        """The database answered: the seconds it had been silent, if that was shown (also
        kept in :attr:`last_silence`)."""
        silent = self.seconds()
        self.since = self.reason = self._asked = None
        self.last_silence = silent if silent >= SHOWN_AFTER else None
        return self.last_silence

    def seconds(self) -> float:
        """Seconds since the database last answered a read (0 when it does)."""
        start = self.since if self.since is not None else self._asked
        return time.monotonic() - start if start is not None else 0.0

    @property
    def shown(self) -> bool:
        """Silent long enough to tell the user."""
        return self.seconds() >= SHOWN_AFTER

    def check(self) -> None:
        """Raise :class:`DatabaseUnreachable` once the silence is longer than the limit."""
        if self.limit is not None and self.seconds() > self.limit:
            raise DatabaseUnreachable(self.seconds(), self.reason)


async def in_thread(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``await`` ``function(*args, **kwargs)`` run in a daemon thread of its own (not the
    loop's executor, which ``asyncio.run`` waits for at exit): a read the database never
    answers does not hold the process when the caller is cancelled."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(outcome)

    def run() -> None:
        try:
            value = function(*args, **kwargs)
        except BaseException as error:  # handed to the awaiting task
            failure = error
            settle(lambda: None if future.done() else future.set_exception(failure))
        else:
            settle(lambda: None if future.done() else future.set_result(value))

    threading.Thread(target=run, name="agentfsm-database-read", daemon=True).start()
    return await future


def call_in_thread(seconds: float, function: Callable[..., T], /, *args: Any) -> T:
    """``function(*args)`` in a daemon thread, abandoned after ``seconds``
    (:class:`TimeoutError`); its exception is raised here."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append((True, function(*args)))
        except BaseException as error:  # raised in the caller's thread
            box.append((False, error))

    thread = threading.Thread(target=run, name="agentfsm-database-read", daemon=True)
    thread.start()
    thread.join(seconds)
    if not box:
        raise TimeoutError(f"no answer within {seconds:g} s")
    ok, value = box[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]
