"""Executor slots of this machine: the executor id each worker process runs under, held by a
file lock for the life of the process, and the tasks left behind by a slot's process once
it has stopped.

DBOS marks each running workflow with the executor id of the process running it, and a
process launched with an executor id re-enqueues that id's unfinished (``PENDING``)
workflows. :func:`executor_slot` gives each worker process of a machine the first free
slot id (``worker-HOST-0``, ``-1``, …): a killed worker's lock goes with it, so the next
worker started on that machine takes over its slot and finishes its tasks, and two live
workers never share an id (which would let one recover the other's running tasks).

Since the lock says for certain whether a slot's process still runs, a command waiting on
tasks held by a slot of this machine whose process has stopped puts them back on the queue
itself (:func:`requeue_stopped`), holding the slot meanwhile so that no worker launches in
it as they move. A slot of another machine cannot be checked: ``agentfsm worker --requeue
ID`` (:func:`requeue_pending`) is for those, once the machine is known to be gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import socket
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from dbos import DBOSClient

from agentfsm.adapters.sessions import state_home

from ._postgres import is_postgres
from ._workflow import UNFINISHED, WORKFLOW_NAME

__all__ = ["MAX_SLOTS", "executor_slot", "requeue_pending", "requeue_stopped", "slot_is_free"]

MAX_SLOTS = 1024


def slot_prefix() -> str:
    """``worker-HOSTNAME``: the executor ids of this machine's slots start with it."""
    return f"worker-{socket.gethostname()}"


def _database_key(database_url: str) -> str:
    """The database a URL names, spelled one way: a SQLite file's real path; a PostgreSQL
    server's host, port and database (two spellings of one database share slots)."""
    if database_url.startswith("sqlite:///"):
        return "sqlite:" + str(Path(database_url.removeprefix("sqlite:///")).resolve())
    if is_postgres(database_url):
        from sqlalchemy.engine import make_url

        try:
            parsed = make_url(database_url)
            host = (parsed.host or str(parsed.query.get("host", ""))).lower()
            return f"postgresql://{host}:{parsed.port or 5432}/{parsed.database}"
        except (ValueError, TypeError):
            pass
    return database_url


def _lock_path(database_url: str, prefix: str, slot: int) -> Path:
    key = hashlib.sha256(f"{_database_key(database_url)}\0{prefix}".encode()).hexdigest()[:16]
    return state_home() / "agentfsm" / "workers" / f"{key}-{slot}.lock"


def _take(path: Path) -> IO[bytes] | None:
    """The lock file ``path`` opened and locked, or ``None`` when a live process holds it."""
    handle: IO[bytes] = open(path, "ab")  # noqa: SIM115
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


@contextlib.contextmanager
def executor_slot(database_url: str, prefix: str | None = None) -> Iterator[str]:
    """The first executor id ``PREFIX-N`` of this machine not held by a live process
    (``PREFIX``: ``worker-HOSTNAME``), held until the block ends. Slots are per database."""
    prefix = prefix or slot_prefix()
    _lock_path(database_url, prefix, 0).parent.mkdir(parents=True, exist_ok=True)
    for slot in range(MAX_SLOTS):
        handle = _take(_lock_path(database_url, prefix, slot))
        if handle is None:
            continue
        try:
            yield f"{prefix}-{slot}"
        finally:
            handle.close()
        return
    raise RuntimeError(f"no free worker slot among {MAX_SLOTS} on this machine")


def _slot_number(executor_id: str) -> int | None:
    """N when ``executor_id`` is ``worker-HOSTNAME-N`` of this machine, else ``None``."""
    head, dash, number = executor_id.rpartition("-")
    if not dash or head != slot_prefix() or not number.isdigit() or len(number) > 4:
        return None
    slot = int(number)
    return slot if slot < MAX_SLOTS else None


@contextlib.contextmanager
def slot_is_free(executor_id: str, database_url: str) -> Iterator[bool | None]:
    """Whether ``executor_id`` is a slot of this machine that no live process holds (then
    held by this block, so that no worker launches in it meanwhile); ``False`` when a live
    process holds it, ``None`` when it is not a slot of this machine (unknowable here)."""
    slot = _slot_number(executor_id)
    if slot is None:
        yield None
        return
    path = _lock_path(database_url, slot_prefix(), slot)
    if not path.exists():  # never taken on this machine for this database
        yield None
        return
    handle = _take(path)
    if handle is None:
        yield False
        return
    try:
        yield True
    finally:
        handle.close()


def requeue_pending(client: DBOSClient, executor_id: str, queue_name: str) -> list[str]:
    """Put the ``PENDING`` durable runs of ``executor_id`` back on their queue
    (``queue_name`` for one that has none); their ids. Each is moved only while it is still
    ``PENDING`` under that id: one a live worker has dequeued since is left alone.

    Only for an executor that is certainly gone: a live one would run them a second time
    alongside the worker that takes them now."""
    stranded = [
        status.workflow_id
        for status in client.list_workflows(
            executor_id=executor_id,
            status=list(UNFINISHED),
            name=WORKFLOW_NAME,
            load_input=False,
            load_output=False,
        )
        if status.status == "PENDING"
    ]
    # DBOS's own recovery step: back to ENQUEUED only where the row is PENDING under the
    # dead executor, so a duplicate request never re-enqueues a running workflow.
    system: Any = client._sys_db
    return [
        run_id
        for run_id in stranded
        if system.reenqueue_for_recovery(run_id, [executor_id], queue_name)
    ]


def requeue_stopped(
    client: DBOSClient, database_url: str, executors: Iterable[str], queue_name: str
) -> dict[str, list[str]]:
    """For each of ``executors`` that is a slot of this machine whose process has stopped
    (:func:`slot_is_free`), its ``PENDING`` runs put back on the queue, holding the slot
    meanwhile: ``{executor id: run ids}`` of those that had any."""
    moved: dict[str, list[str]] = {}
    for executor in dict.fromkeys(executors):
        with slot_is_free(executor, database_url) as free:
            if free:
                found = requeue_pending(client, executor, queue_name)
                if found:
                    moved[executor] = found
    return moved
