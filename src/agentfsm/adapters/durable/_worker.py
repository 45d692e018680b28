"""A worker of the task queue: DBOS launched under a stable executor id, serving
:data:`~.queue.QUEUE_NAME`.

**Executor ids and recovery.** DBOS marks each running workflow with the executor id of the
process running it; a process launched with an executor id re-enqueues that id's
unfinished (``PENDING``) workflows at launch, back on their queue, where any worker takes
them. Each worker takes a slot of its machine (:mod:`._slots`); tasks of a machine that is
gone for good are put back on the queue with :func:`requeue_executor` (``agentfsm worker
--requeue EXECUTOR_ID``).

**A worker that stops taking tasks.** :meth:`TaskWorker.stop_taking` ends the dequeuing and
leaves the tasks in flight running: a command whose own tasks have ended finishes the ones
it took for others (:meth:`TaskWorker.running`) before it exits, rather than leaving them
pending in its slot.
"""

from __future__ import annotations

import contextlib
import threading
import time
from types import TracebackType
from typing import Any

import sqlalchemy as sa
from dbos import DBOSClient
from dbos._queue import QueueRateLimit

from ._postgres import is_postgres, system_engine
from ._queue import APPLICATION_VERSION, QUEUE_NAME, declare_queue, open_client
from ._runtime import DurableRuntime, dbos_threads, default_database_url
from ._slots import executor_slot, requeue_pending, slot_is_free
from ._workflow import running_here

__all__ = ["TaskWorker", "requeue_executor"]

HOLD = 60.0
"""Seconds a worker's failed connection attempt is retried (every second) before DBOS's own
retries, whose pauses grow to 90 s, take over: a database back within this time is
noticed within about a second."""


def requeue_executor(
    executor_id: str, database_url: str | None = None, *, client: DBOSClient | None = None
) -> list[str]:
    """Put the unfinished tasks of a dead executor back on the task queue; their ids.

    Only for an executor that is certainly gone: a live one would run them a second time
    alongside the worker that takes them now. A slot of this machine is checked: one a
    live process holds raises ``ValueError``. ``client``: read and write through it
    (else a client of its own on ``database_url``, whose waits are bounded)."""
    url = database_url or default_database_url()
    own = client is None
    source = client if client is not None else open_client(url)
    try:
        with slot_is_free(executor_id, url) as free:
            if free is False:
                raise ValueError(
                    f"{executor_id} is held by a live process on this machine: it runs its "
                    "tasks (stop it first)"
                )
            return requeue_pending(source, executor_id, QUEUE_NAME)
    finally:
        if own:
            source.destroy()


class TaskWorker:
    """Serves the task queue in this process: ``with TaskWorker(url): ...`` (or
    ``start()`` / ``stop()``). Tasks run on DBOS's own event-loop thread.

    Args:
        database_url: The shared system database (default: SQLite in the state folder).
        concurrency: Tasks this worker runs at a time (stored with the queue: every worker
            of the database uses the last value declared).
        rate: Task starts per period, across all workers (``parse_rate``).
        executor_id: A fixed executor id; default: a free slot of this machine
            (:func:`executor_slot`), which recovers a killed worker's tasks.
        polling_interval: Seconds between the queue's polls (DBOS's default is 1 s).

    On PostgreSQL every wait on the database is bounded (see ``docs/durable.md``): a
    connection that goes silent is closed and replaced, and a failed connection attempt is
    retried every second for :data:`HOLD` seconds.
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
        concurrency: int | None = 4,
        rate: QueueRateLimit | None = None,
        executor_id: str | None = None,
        polling_interval: float = 1.0,
        application_version: str = APPLICATION_VERSION,
    ) -> None:
        self.database_url = database_url or default_database_url()
        self.concurrency = concurrency
        self.rate = rate
        self.polling_interval = polling_interval
        self.application_version = application_version
        self.executor_id = executor_id
        self._slot: contextlib.ExitStack | None = None
        self._runtime: DurableRuntime | None = None
        self._probe: Any = None

    def start(self) -> TaskWorker:
        """Take an executor id, launch DBOS (recovering that id's unfinished tasks) and
        declare the queue; DBOS's queue thread then dequeues and runs tasks."""
        if self._runtime is not None:
            return self
        stack = contextlib.ExitStack()
        try:
            if self.executor_id is None:
                self.executor_id = stack.enter_context(executor_slot(self.database_url))
            runtime = DurableRuntime(
                self.database_url,
                executor_id=self.executor_id,
                polling_interval=min(self.polling_interval, 1.0),
                application_version=self.application_version,
                queues=(QUEUE_NAME,),
                hold=HOLD,
            )
            runtime.launch()
            stack.callback(runtime.destroy)
            declare_queue(
                concurrency=self.concurrency,
                rate=self.rate,
                polling_interval=self.polling_interval,
            )
        except BaseException:
            stack.close()
            raise
        self._slot, self._runtime = stack, runtime
        return self

    def stop_taking(self, timeout: float = 3.0) -> None:
        """Take no more tasks; the ones running go on (:meth:`running`). Waits at most
        ``timeout`` seconds for DBOS's queue threads to end, so that a task they were
        claiming meanwhile has started too."""
        if self._runtime is None:
            return
        self._runtime.stop_taking()
        deadline = time.monotonic() + timeout
        for thread in threading.enumerate():
            if thread.name.startswith("queue-worker-") or thread.name.endswith("(queue_thread)"):
                thread.join(max(0.0, deadline - time.monotonic()))

    @staticmethod
    def running() -> frozenset[str]:
        """The ids of the tasks (durable runs) executing in this process now."""
        return running_here()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop taking tasks and shut DBOS down; tasks still running stay ``PENDING`` under
        this executor id (the next worker in this slot, or ``requeue_executor``, finishes
        them).

        With ``timeout``, waits at most that many seconds for DBOS's shutdown and its
        threads; returns ``False`` when they are still running (waiting on a database that
        does not answer): a process should then end without waiting for them, as their
        work is recorded in the database or will run again."""
        stack, self._slot, self._runtime = self._slot, None, None
        probe, self._probe = self._probe, None
        if probe is not None:
            probe.dispose()
        if stack is None:
            return True
        if timeout is None:
            stack.close()
            return True
        deadline = time.monotonic() + timeout
        closed = threading.Event()

        def close() -> None:
            try:
                stack.close()
            finally:
                closed.set()

        threading.Thread(target=close, name="agentfsm-worker-stop", daemon=True).start()
        if not closed.wait(timeout):
            return False
        for thread in dbos_threads():
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in dbos_threads())

    def probe(self) -> None:
        """Ask the database ``SELECT 1`` on a connection of the worker's own (PostgreSQL;
        a SQLite file is not probed). Raises the driver's error when it does not answer."""
        if not is_postgres(self.database_url):
            return
        if self._probe is None:
            self._probe = system_engine(
                self.database_url, pool_size=1, application_name="agentfsm-probe"
            )
        with self._probe.connect() as connection:
            connection.execute(sa.text("SELECT 1"))

    def __enter__(self) -> TaskWorker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
