"""Durable runs on a shared DBOS queue: enqueue many tasks, let any number of workers run
them, read their progress and results from the system database.

A task is one durable run (the workflow :data:`~.workflow.WORKFLOW_NAME`) enqueued on the
queue :data:`QUEUE_NAME` under the task's id as its workflow id: enqueuing an id that is
already known does nothing (a finished task is not run again, a running one not twice).
Enqueuing and reading go through a ``dbos.DBOSClient``, so a process that only submits
or watches does not launch DBOS; workers (:mod:`.worker`) launch it and dequeue.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from attrs import evolve, field, frozen
from dbos import DBOS, DBOSClient, EnqueueOptions
from dbos._queue import QueueRateLimit

from agentfsm._version import __version__
from agentfsm.engine import AssistantMessage, LoopOutcome, Usage

from ._outage import Outage, in_thread, is_connection_error
from ._postgres import is_postgres, system_engine
from ._runtime import DEFAULT_APP_NAME, default_database_url, prepare_database
from ._slots import requeue_stopped
from ._spec import RunSpec
from ._workflow import WORKFLOW_NAME

__all__ = [
    "APPLICATION_VERSION",
    "Attempt",
    "BatchProgress",
    "FAILED",
    "QUEUE_NAME",
    "RETRY_MARK",
    "Submission",
    "TaskResult",
    "WORKFLOW_FORMAT",
    "attempt_id",
    "declare_queue",
    "enqueue",
    "gather_results",
    "latest_attempts",
    "open_client",
    "parse_rate",
    "progress",
    "read_patiently",
    "results",
    "retry_session_path",
    "submit_tasks",
    "task_of_run",
]

QUEUE_NAME = "agentfsm.tasks"
"""The DBOS queue of ``agentfsm batch`` / ``agentfsm worker`` tasks."""
WORKFLOW_FORMAT = 1
"""Bumped when the durable run's recorded steps change shape: runs recorded under another
format are not recovered by this code (DBOS recovers only its own application version)."""
APPLICATION_VERSION = f"agentfsm-{__version__}-wf{WORKFLOW_FORMAT}"
"""The DBOS application version every runtime of the CLI pins: workers on several machines,
and a later resume after an upgrade that keeps the format, agree on it (DBOS's default, a
hash of the workflow source, would strand unfinished runs after any code change)."""
FAILED = ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
"""DBOS statuses of a task that ended without an outcome."""

T = TypeVar("T")

_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*\.?\d*)\s*(s|sec|m|min|h|hour)?\s*$")
_UNITS = {None: 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hour": 3600.0}


def parse_rate(text: str) -> QueueRateLimit:
    """``"10/60"`` or ``"10/min"`` (at most 10 task starts per rolling minute), ``"2/s"``,
    ``"100/h"``: DBOS's queue limiter. Raises ``ValueError``."""
    match = _RATE.match(text)
    if match is None:
        raise ValueError(f"a rate is LIMIT/PERIOD, e.g. 10/min or 10/60, got {text[:50]!r}")
    limit, amount, unit = match.groups()
    period = (float(amount) if amount else 1.0) * _UNITS[unit]
    if int(limit) < 1 or period <= 0:
        raise ValueError(f"a rate needs a positive limit and period, got {text[:50]!r}")
    return {"limit": int(limit), "period": period}


def declare_queue(
    *,
    concurrency: int | None = None,
    rate: QueueRateLimit | None = None,
    polling_interval: float = 1.0,
) -> None:
    """Declare the task queue in the launched DBOS of this process (its configuration is
    stored in the system database and shared by every worker: the last declaration wins).

    ``concurrency`` is the number of tasks one worker runs at a time; ``rate`` limits task
    starts across all workers."""
    DBOS.register_queue(
        QUEUE_NAME,
        worker_concurrency=concurrency,
        limiter=rate,
        polling_interval_sec=polling_interval,
        on_conflict="always_update",
    )


class _Client(DBOSClient):
    """A DBOS client that disposes of the engine it was given when destroyed."""

    def __init__(self, engine: sa.Engine | None, **options: Any) -> None:
        super().__init__(system_database_engine=engine, **options)
        self._own_engine = engine

    def destroy(self) -> None:
        super().destroy()
        if self._own_engine is not None:
            self._own_engine.dispose()


def open_client(
    database_url: str | None = None, *, retry_connection_errors: bool = True
) -> DBOSClient:
    """A DBOS client on the system database, created (or migrated) first if needed.

    On PostgreSQL its engine bounds every wait (:func:`~._postgres.system_engine`). With
    ``retry_connection_errors`` false, a read or write that loses the database raises
    instead of waiting for it (DBOS's retries have no deadline): the caller waits on its
    own terms, as :func:`gather_results` does."""
    url = database_url or default_database_url()
    prepare_database(url)
    engine = None
    if is_postgres(url):
        engine = system_engine(url, pool_size=5, application_name=f"{DEFAULT_APP_NAME}-client")
    return _Client(
        engine,
        system_database_url=None if engine is not None else url,
        application_name=DEFAULT_APP_NAME,
        retry_connection_errors=retry_connection_errors,
    )


def _known(client: DBOSClient, run_ids: Sequence[str]) -> dict[str, Any]:
    """The workflow statuses of those of ``run_ids`` the database knows (no inputs)."""
    found: dict[str, Any] = {}
    chunk = 500
    for start in range(0, len(run_ids), chunk):
        for status in client.list_workflows(
            workflow_ids=list(run_ids[start : start + chunk]), load_input=False, load_output=False
        ):
            found[status.workflow_id] = status
    return found


def enqueue(
    tasks: Mapping[str, RunSpec],
    *,
    client: DBOSClient,
    app_version: str = APPLICATION_VERSION,
) -> list[str]:
    """Enqueue one durable run per task (``{task id: spec}``) on :data:`QUEUE_NAME`, the
    id as its workflow id; returns the ids that were new. An id the database already knows
    is left as it is, whatever its state: a finished task makes no new model call."""
    known = _known(client, list(tasks))
    new: list[str] = []
    for run_id, spec in tasks.items():
        if run_id in known:
            continue
        _enqueue_one(client, run_id, spec, app_version)
        new.append(run_id)
    return new


def _enqueue_one(client: DBOSClient, run_id: str, spec: RunSpec, app_version: str) -> None:
    options: EnqueueOptions = {
        "queue_name": QUEUE_NAME,
        "workflow_name": WORKFLOW_NAME,
        "workflow_id": run_id,
        "app_version": app_version,
        "application_name": DEFAULT_APP_NAME,
    }
    client.enqueue(options, spec.to_dict())


RETRY_MARK = "@retry"
"""Retry ``N`` (1, 2, …) of task ``ID``, its attempt ``N + 1``, runs as the workflow
``ID@retryN``."""
_RETRY_ID = re.compile(r"^(.*)@retry([1-9]\d*)$", re.DOTALL)


def attempt_id(task_id: str, attempt: int) -> str:
    """The workflow id of attempt ``attempt`` of a task: the task id for the first, then
    ``ID@retry1``, ``ID@retry2`` …"""
    return task_id if attempt == 1 else f"{task_id}{RETRY_MARK}{attempt - 1}"


def task_of_run(run_id: str) -> tuple[str, int]:
    """The task id and attempt number of a workflow id (:func:`attempt_id` reversed)."""
    match = _RETRY_ID.match(run_id)
    return (match.group(1), int(match.group(2)) + 1) if match else (run_id, 1)


@frozen
class Attempt:
    """The latest run of a task the database knows."""

    run_id: str
    attempt: int
    status: str
    """DBOS's status of that run."""
    spec: RunSpec | None
    """The spec it was given (``None`` when its input is unreadable)."""


def latest_attempts(client: DBOSClient, task_ids: Sequence[str]) -> dict[str, Attempt]:
    """The latest attempt of each of ``task_ids`` the database knows (tasks it does not
    know are left out): one query per attempt number, over the tasks still in the race."""
    found: dict[str, Attempt] = {}
    waiting = list(dict.fromkeys(task_ids))
    attempt = 1
    while waiting:
        ids = {attempt_id(task, attempt): task for task in waiting}
        statuses: dict[str, Any] = {}
        id_list = list(ids)
        for start in range(0, len(id_list), 200):
            for status in client.list_workflows(
                workflow_ids=id_list[start : start + 200], load_output=False
            ):
                statuses[status.workflow_id] = status
        for run_id, status in statuses.items():
            data = _spec_input(status)
            spec = RunSpec.from_dict(data) if data else None
            found[ids[run_id]] = Attempt(run_id, attempt, str(status.status), spec)
        waiting = [ids[run_id] for run_id in statuses]
        attempt += 1
    return found


def _spec_input(status: Any) -> dict[str, Any]:
    inputs = status.input or {}
    args = inputs.get("args") or ()
    return args[0] if args and isinstance(args[0], dict) else {}


@frozen(kw_only=True)
class Submission:
    """What :func:`submit_tasks` did: the run watched for each task, and what it left."""

    runs: dict[str, str]
    """Task id -> the workflow id of its current attempt (new or known)."""
    new: list[str] = field(factory=list)
    """Tasks enqueued for the first time."""
    retried: list[str] = field(factory=list)
    """Failed tasks enqueued again, as a new attempt."""
    changed: list[str] = field(factory=list)
    """Known tasks (not retried) whose prompt or options differ from the ones given now."""


_RETRY_SESSION = re.compile(r"\.retry\d+$")


def retry_session_path(session_path: str, attempt: int) -> str:
    """The session file of attempt ``attempt`` beside the first one's, named like its
    workflow: ``task-a.jsonl`` -> ``task-a.retry1.jsonl`` for attempt 2 (the failed
    attempt's file is kept)."""
    path = Path(session_path)
    stem = _RETRY_SESSION.sub("", path.stem)
    retry = attempt - 1
    name = f"{stem}.retry{retry}{path.suffix}" if retry > 0 else f"{stem}{path.suffix}"
    return str(path.with_name(name))


def submit_tasks(
    tasks: Mapping[str, RunSpec],
    *,
    client: DBOSClient,
    retry_failed: bool = False,
    app_version: str = APPLICATION_VERSION,
    on_answer: Callable[[], None] | None = None,
) -> Submission:
    """Enqueue the tasks the database does not know; with ``retry_failed``, also a new
    attempt of each task whose latest attempt ended in error (:data:`FAILED`): the given
    spec (its options, such as the provider's, are the ones used) as the workflow
    ``ID@retryN`` (retry N is attempt N + 1), recording into :func:`retry_session_path`.
    Known tasks are otherwise left as they are: a finished task makes no new model call.
    ``on_answer()`` is called each time the database has answered (the known tasks read,
    each task enqueued): a long submission is slow, not a database that went silent."""
    heard = on_answer or (lambda: None)
    known = latest_attempts(client, list(tasks))
    heard()
    result = Submission(runs={})
    for task_id, spec in tasks.items():
        heard()
        latest = known.get(task_id)
        if latest is None:
            _enqueue_one(client, task_id, spec, app_version)
            result.runs[task_id] = task_id
            result.new.append(task_id)
        elif retry_failed and latest.status in FAILED:
            attempt = latest.attempt + 1
            again = evolve(spec, session_path=retry_session_path(spec.session_path, attempt))
            run_id = attempt_id(task_id, attempt)
            _enqueue_one(client, run_id, again, app_version)
            result.runs[task_id] = run_id
            result.retried.append(task_id)
        else:
            result.runs[task_id] = latest.run_id
            if latest.spec is not None and _differs(latest.spec, spec, latest.attempt):
                result.changed.append(task_id)
    return result


def _differs(stored: RunSpec, given: RunSpec, attempt: int) -> bool:
    """Another prompt or other options (a retry's own session file aside)."""
    if attempt > 1:
        return stored.prompt != given.prompt or dict(stored.options) != dict(given.options)
    return stored.to_dict() != given.to_dict()


@frozen(kw_only=True)
class BatchProgress:
    """Where a set of tasks stands, read from the system database."""

    total: int
    done: int
    """Finished with an outcome (``SUCCESS``)."""
    failed: int
    """Ended without one (``ERROR``, ``CANCELLED`` …)."""
    running: int
    """Taken by a worker (``PENDING``)."""
    queued: int
    """Waiting on the queue (``ENQUEUED``, or not in the database yet)."""
    input_tokens: int = 0
    """Of the finished tasks."""
    output_tokens: int = 0
    running_under: dict[str, tuple[str, ...]] = field(factory=dict)
    """The running tasks (their run ids) by the executor id that holds them."""

    @property
    def finished(self) -> bool:
        """Every task ended (with an outcome or not)."""
        return self.done + self.failed == self.total

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def line(self) -> str:
        """``done 3/10 · running 2 · queued 5 · failed 0 · tokens 1234``."""
        return (
            f"done {self.done}/{self.total} · running {self.running} · queued {self.queued} "
            f"· failed {self.failed} · tokens {self.tokens}"
        )


@frozen(kw_only=True)
class TaskResult:
    """One task as ``agentfsm batch --out`` reports it."""

    id: str
    status: str
    """DBOS's status of the run."""
    stopped_reason: str | None = None
    """The outcome's ``stopped_reason``; ``None`` when the run has none (yet)."""
    final: str | None = None
    """The final answer's text (or the model's last words when it stopped otherwise)."""
    usage: Usage = field(factory=Usage)
    session: str | None = None
    error: str | None = None
    error_kind: str | None = None
    """The error's kind when it says one (a ``ProviderError``'s: ``connection``, ``auth`` …)."""
    executor: str | None = None
    run: str | None = None
    """The workflow id of the attempt reported, when it is not ``id`` (``ID@retryN``)."""

    def to_dict(self) -> dict[str, Any]:
        """The ``--out`` line of the task."""
        return {
            "id": self.id,
            "run": self.run or self.id,
            "status": self.status,
            "stopped_reason": self.stopped_reason,
            "final": self.final,
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
            },
            "session": self.session,
            "error": self.error,
            "error_kind": self.error_kind,
            "executor": self.executor,
        }


def _final_text(outcome: LoopOutcome) -> str | None:
    if outcome.final is not None:
        return outcome.final.content
    for message in reversed(outcome.messages):
        if isinstance(message, AssistantMessage) and message.content.strip():
            return message.content
    return None


def _session(status: Any) -> str | None:
    inputs = status.input or {}
    args = inputs.get("args") or ()
    spec = args[0] if args and isinstance(args[0], dict) else {}
    session = spec.get("session_path")
    return str(session) if session is not None else None


def _result(run_id: str, status: Any) -> TaskResult:
    if status is None:
        return TaskResult(id=run_id, status="UNKNOWN", error="not in the system database")
    outcome = status.output if isinstance(status.output, LoopOutcome) else None
    error = kind = None
    if status.error is not None:
        error = f"{type(status.error).__name__}: {status.error}"
        found = getattr(status.error, "kind", None)
        kind = found if isinstance(found, str) else None
    return TaskResult(
        id=run_id,
        status=str(status.status),
        stopped_reason=outcome.stopped_reason if outcome is not None else None,
        final=_final_text(outcome) if outcome is not None else None,
        usage=outcome.usage if outcome is not None else Usage(),
        session=_session(status),
        error=error,
        error_kind=kind,
        executor=status.executor_id,
    )


def results(run_ids: Sequence[str], *, client: DBOSClient) -> list[TaskResult]:
    """The tasks as the database has them now, in order (finished or not)."""
    found: dict[str, Any] = {}
    chunk = 200
    for start in range(0, len(run_ids), chunk):
        for status in client.list_workflows(workflow_ids=list(run_ids[start : start + chunk])):
            found[status.workflow_id] = status
    return [_result(run_id, found.get(run_id)) for run_id in run_ids]


class _UsageCache:
    """Token usage of finished tasks, read once each (outputs are not read every poll)."""

    def __init__(self) -> None:
        self.usage: dict[str, tuple[int, int]] = {}

    def update(self, client: DBOSClient, finished: Iterable[str]) -> None:
        missing = [run_id for run_id in finished if run_id not in self.usage]
        for start in range(0, len(missing), 200):
            for status in client.list_workflows(
                workflow_ids=missing[start : start + 200], load_input=False
            ):
                usage = status.output.usage if isinstance(status.output, LoopOutcome) else Usage()
                self.usage[status.workflow_id] = (usage.input_tokens, usage.output_tokens)


def progress(
    run_ids: Sequence[str], *, client: DBOSClient, cache: _UsageCache | None = None
) -> BatchProgress:
    """Counts of ``run_ids`` by state, and the tokens of the finished ones."""
    known = _known(client, run_ids)
    counts = {"done": 0, "failed": 0, "running": 0, "queued": 0}
    holders: dict[str, list[str]] = {}
    succeeded: list[str] = []
    for run_id in run_ids:
        status = known.get(run_id)
        state = str(status.status) if status is not None else "ENQUEUED"
        if state == "SUCCESS":
            counts["done"] += 1
            succeeded.append(run_id)
        elif state in FAILED:
            counts["failed"] += 1
        elif state == "PENDING" and status is not None:
            counts["running"] += 1
            holders.setdefault(str(status.executor_id), []).append(run_id)
        else:
            counts["queued"] += 1
    cache = cache if cache is not None else _UsageCache()
    cache.update(client, succeeded)
    tokens = [cache.usage.get(run_id, (0, 0)) for run_id in succeeded]
    return BatchProgress(
        total=len(run_ids),
        input_tokens=sum(i for i, _ in tokens),
        output_tokens=sum(o for _, o in tokens),
        running_under={executor: tuple(ids) for executor, ids in holders.items()},
        **counts,
    )


async def read_patiently(
    outage: Outage,
    on_wait: Callable[[float, str | None], None] | None,
    function: Callable[..., T],
    /,
    *args: Any,
    **kwargs: Any,
) -> T:
    """``function(*args, **kwargs)`` in a thread of its own, retried every second while it
    fails with a connection error (:func:`~._outage.is_connection_error`); ``on_wait``
    gets the seconds without an answer and the last reason, about every second once they
    pass 2 s; :class:`~._outage.DatabaseUnreachable` once they pass ``outage.limit``."""
    while True:
        outage.asking()
        read = asyncio.ensure_future(in_thread(function, *args, **kwargs))
        try:
            while True:
                done, _ = await asyncio.wait({read}, timeout=1.0)
                if done:
                    break
                if outage.shown and on_wait is not None:
                    on_wait(outage.seconds(), outage.reason)
                outage.check()
            value = read.result()
        except Exception as error:
            read.cancel()
            if not is_connection_error(error):
                raise
            outage.failed(error)
            if outage.shown and on_wait is not None:
                on_wait(outage.seconds(), outage.reason)
            outage.check()
            await asyncio.sleep(1.0)
            continue
        except BaseException:
            read.cancel()
            raise
        outage.answered()
        return value


IDLE_AFTER = 30.0
"""Seconds without any of the watched tasks changing state before ``on_idle`` is called."""
IDLE_REPEAT = 300.0
"""Seconds between two ``on_idle`` calls while nothing changes."""
REQUEUE_EVERY = 2.0
"""Seconds between two checks for tasks left by a stopped worker of this machine."""


async def gather_results(
    run_ids: Sequence[str],
    *,
    client: DBOSClient,
    on_progress: Callable[[BatchProgress], None] | None = None,
    interval: float = 0.5,
    on_wait: Callable[[float, str | None], None] | None = None,
    database_wait: float | None = None,
    database_url: str | None = None,
    on_requeued: Callable[[str, list[str]], None] | None = None,
    on_idle: Callable[[BatchProgress, float], None] | None = None,
) -> list[TaskResult]:
    """Wait until every task has ended (whichever workers run them), calling
    ``on_progress`` on each poll; then their results, in order.

    Each read runs in a thread of its own: cancelling the wait (Ctrl-C) never waits on
    the database. With a client that does not retry connection errors itself
    (``open_client(retry_connection_errors=False)``), a database that stops answering is
    polled every second, ``on_wait(seconds, reason)`` is called about every second once it
    has been silent 2 s, and :class:`~._outage.DatabaseUnreachable` is raised after
    ``database_wait`` seconds of silence (``None``: no limit).

    No task is waited on for ever without a word: with ``database_url`` (the client's),
    tasks left running by a worker slot of this machine whose process has stopped are put
    back on the queue (``on_requeued(executor id, run ids)``), and ``on_idle(progress,
    seconds)`` is called once none of the tasks has changed state for :data:`IDLE_AFTER`
    seconds, again every :data:`IDLE_REPEAT` seconds while that lasts."""
    cache = _UsageCache()
    ids = list(run_ids)
    outage = Outage(database_wait)
    loop = asyncio.get_running_loop()
    changed = checked = loop.time()
    told = 0.0
    state: tuple[object, ...] = ()
    while True:
        now = await read_patiently(outage, on_wait, progress, ids, client=client, cache=cache)
        if on_progress is not None:
            on_progress(now)
        if now.finished:
            return await read_patiently(outage, on_wait, results, ids, client=client)
        held = sorted((executor, ids) for executor, ids in now.running_under.items())
        if (now.done, now.failed, now.queued, held) != state:
            state, changed, told = (now.done, now.failed, now.queued, held), loop.time(), 0.0
        if (
            database_url is not None
            and now.running_under
            and loop.time() - checked >= REQUEUE_EVERY
        ):
            checked = loop.time()
            moved = await read_patiently(
                outage,
                on_wait,
                requeue_stopped,
                client,
                database_url,
                list(now.running_under),
                QUEUE_NAME,
            )
            for executor, moved_ids in moved.items():
                if on_requeued is not None:
                    on_requeued(executor, moved_ids)
        idle = loop.time() - changed
        if on_idle is not None and idle >= (told + IDLE_REPEAT if told else IDLE_AFTER):
            told = idle
            on_idle(now, idle)
        await asyncio.sleep(interval)
