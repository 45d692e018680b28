"""What ``agentfsm batch``, ``worker`` and ``runs retry`` do while their system database does
not answer: one line saying so (the URL with its password hidden, for how long, why), the
same line again every :data:`REFRESH` seconds, one line when it answers again; past
``--database-wait`` seconds they give up (exit code 1) with the command that resumes.

Stopping never waits on the database: a worker's DBOS is given :data:`STOP_WAIT` seconds to
shut down, and when its threads are still waiting on the database the process ends
without them (:func:`leave`): what they were doing is recorded, or runs again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

from ._database_url import _shown, hide_secrets
from ._terminal import one_line

__all__ = [
    "REFRESH",
    "STOP_WAIT",
    "DatabaseStatus",
    "end_process",
    "interrupt",
    "leave",
    "stop_worker",
    "terminated",
]

REFRESH = 10.0
"""Seconds between two lines about the same wait."""
STOP_WAIT = 3.0
"""Seconds a stopping command gives DBOS to shut down before it ends without it."""

T = TypeVar("T")

_left_running = threading.Event()


class DatabaseStatus:
    """The lines about one command's waits on its database."""

    def __init__(self, command: str, url: str, limit: float | None) -> None:
        self.command = command
        self.shown_url = _shown(url)
        self.limit = limit
        self._printed: float | None = None
        self._lock = threading.Lock()

    def line(self, seconds: float, reason: str | None) -> str:
        """``the database 'URL' has not answered for 12 s (REASON); waiting up to 300 s``."""
        because = f" ({hide_secrets(reason)})" if reason else ""
        wait = (
            f"; waiting up to {self.limit:.0f} s (--database-wait)"
            if self.limit is not None
            else "; waiting"
        )
        return one_line(
            f"the database {self.shown_url} has not answered for {seconds:.0f} s{because}{wait}",
            600,
        )

    def waiting(self, seconds: float, reason: str | None) -> None:
        """Called about every second of a wait: prints the line at first, then every
        :data:`REFRESH` seconds."""
        if self.limit is not None and seconds > self.limit:
            return  # giving up: :meth:`gave_up` says so
        with self._lock:
            if self._printed is not None and seconds - self._printed < REFRESH:
                return
            self._printed = seconds
        self._print(self.line(seconds, reason))

    def answered(self, seconds: float | None = None) -> None:
        """The database answers again: one line, when the wait was shown."""
        with self._lock:
            printed, self._printed = self._printed, None
        if printed is not None:
            after = f" after {seconds:.0f} s" if seconds is not None else ""
            self._print(f"the database answers again{after}")

    def patiently(self, read: Callable[[Callable[[], None]], T]) -> T:
        """``read(heard)`` (in a thread of its own), retried every second while the
        database does not answer, the wait told; ``DatabaseUnreachable`` past the limit. A
        long read calls ``heard()`` each time the database answers it a part: the silence
        is counted from then."""
        from agentfsm.adapters.durable import Outage, read_patiently

        outage = Outage(self.limit)
        read_now = functools.partial(read, outage.heard)
        value = asyncio.run(read_patiently(outage, self.waiting, read_now))
        self.answered(outage.last_silence)
        return value

    def gave_up(self, seconds: float, reason: str | None, then: str) -> None:
        """The wait passed ``--database-wait``: one line, with what to do next."""
        because = f" ({hide_secrets(reason)})" if reason else ""
        self._print(
            one_line(
                f"the database {self.shown_url} has not answered for {seconds:.0f} s{because}: "
                f"giving up (--database-wait {self.limit:.0f}); {then}",
                1200,
            )
        )

    def _print(self, text: str) -> None:
        print(f"agentfsm {self.command}: {text}", file=sys.stderr, flush=True)


terminated = threading.Event()
"""Set once SIGTERM has interrupted a command (:func:`interrupt`): its exit code is 143."""


def interrupt(signum: int, frame: FrameType | None) -> None:
    """A SIGTERM handler that stops a command as Ctrl-C does (what is pending is told)."""
    terminated.set()
    raise KeyboardInterrupt


def stop_worker(worker: Any) -> None:
    """Stop a :class:`~agentfsm.adapters.durable.TaskWorker` within :data:`STOP_WAIT`
    seconds; when DBOS is still waiting on the database then, :func:`leave` ends the
    process without it."""
    if not worker.stop(timeout=STOP_WAIT):
        _left_running.set()


def leave(code: int) -> int:
    """``code``; but when a stopped worker left DBOS's threads waiting on the database
    (the interpreter would wait for them at exit, for ever if the database is gone), the
    process ends now with ``code`` (:func:`end_process`)."""
    if _left_running.is_set():
        end_process(code)
    return code


def end_process(code: int) -> None:
    """End the ``agentfsm`` process with ``code`` once a durable command is done: the exit
    handlers run and the logs and streams are flushed, but the interpreter does not tear
    down the modules DBOS brings (over a second) nor wait for threads left waiting on the
    database."""
    import atexit

    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)
