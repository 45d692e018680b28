"""The PostgreSQL tier's database faults (``make test-postgres``): 30 tasks of 3 model calls
each, worked by ``agentfsm batch`` and one ``agentfsm worker`` (4 tasks at a time each),
with a :class:`FaultProxy` on loopback between them and a throwaway PostgreSQL.

Faults, each on its own system database, injected when the model has answered 20 calls:
connections reset 4 times; reset every second for 8 s; all traffic stalled 5 s and 20 s;
new connections refused for 30 s after a reset; the connections open at that moment gone
silent for good (new ones work); the database cut off for good, then Ctrl-C / SIGTERM, or
``--database-wait`` running out; traffic stalled for good, then Ctrl-C / SIGTERM. After a
fault that leaves tasks unfinished, the command the batch printed is run again (with a
worker) through a healthy proxy.

Each fault prints one row: tasks ok / lost / duplicated (a tool's side effect run twice),
repeated model calls, the longest the batch's stderr stayed silent while it ran, how long
the batch and the worker took to end after their signal, how long after the fault ended
the batch printed its next line, the size of the logs, and the lines the user saw. The
whole tier takes about six minutes; the durations above are chosen for that (a 60 s stall
or a 120 s refusal shows nothing the 20 s and 30 s ones do not). The silent connections
are closed after 5 s here (``$AGENTFSM_DATABASE_ANSWER_TIMEOUT``; 30 s by default).
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from dbos._utils import retriable_postgres_exception

from agentfsm.adapters.durable import is_connection_error
from agentfsm.adapters.durable._postgres import ANSWER_TIMEOUT_ENV, BoundedConnection, system_engine
from agentfsm.conformance._frames import DONE, chunk, tool_delta
from agentfsm.testing import FakeProviderServer, RecordedRequest, Reply

from ..pg_server import PostgresServer, postgres_bin
from .batch_helpers import agentfsm, provider_options, task_of, turn_of, write_tasks
from .fault_proxy import FaultProxy

pytestmark = pytest.mark.postgres

TASKS = 30
CALLS = 3
TRIGGER = 20
"""Model calls answered before the fault is injected (tasks are in flight by then)."""
NEEDS = "needs PostgreSQL (apt-get install postgresql)"
HUNG = 60.0
"""A command that has not ended this long after the fault ended is reported as hung."""
STOP_CAP = 30.0
"""A command still running this long after its signal is killed (and reported so)."""
DATABASE_WAIT = 12.0
ANSWER_TIMEOUT = "5"
"""$AGENTFSM_DATABASE_ANSWER_TIMEOUT in this tier: a silent connection is closed after 5 s."""
ROWS: list[str] = []


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    if postgres_bin() is None:
        if os.environ.get("CI"):
            pytest.fail(f"{NEEDS}; CI is set, where every test must run")
        pytest.skip(NEEDS)
    folder = Path(tempfile.mkdtemp(prefix="agentfsm-pg-faults-"))
    server = PostgresServer(folder).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
        if ROWS:
            print("\n" + "\n".join(ROWS))


def _reply(request: RecordedRequest) -> Reply:
    """Calls 1 and 2: a shell call appending ``ID-N`` to ``side.log``; call 3: ``done ID``."""
    task, turn = task_of(request), turn_of(request)
    if turn < CALLS - 1:
        arguments = json.dumps({"command": f"echo {task}-{turn} >> side.log"})
        call = tool_delta(index=0, id=f"c-{task}-{turn}", name="shell", arguments=arguments)
        usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
        answer = Reply.sse([chunk(call), chunk({}, finish="tool_calls", usage=usage), DONE])
    else:
        answer = Reply.sse([chunk({"content": f"done {task}"}), chunk({}, finish="stop"), DONE])
    return Reply.stall(0.2, answer)


class _Watched:
    """A running ``agentfsm`` process whose stderr lines are kept with their times."""

    def __init__(self, name: str, proc: subprocess.Popen[bytes]) -> None:
        self.name = name
        self.proc = proc
        self.started = time.monotonic()
        self.lines: list[tuple[float, str]] = []
        self.ended: float | None = None
        self.signalled: float | None = None
        self.killed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._out = threading.Thread(target=self._drain, daemon=True)
        self._out.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in iter(self.proc.stderr.readline, b""):
            self.lines.append((time.monotonic(), raw.decode(errors="replace").rstrip("\n")))

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout.read()

    def wait(self, limit: float) -> bool:
        """Whether it ended within ``limit`` seconds."""
        try:
            self.proc.wait(timeout=max(0.0, limit))
        except subprocess.TimeoutExpired:
            return False
        if self.ended is None:
            self.ended = time.monotonic()
        return True

    def signal(self, signum: int) -> None:
        if self.proc.poll() is None:
            self.signalled = time.monotonic()
            self.proc.send_signal(signum)

    def stop(self, signum: int) -> float | None:
        """Send ``signum``; seconds until it ended (``None``: killed after STOP_CAP)."""
        if self.proc.poll() is not None:
            self.wait(0)
            return 0.0
        self.signal(signum)
        if self.wait(STOP_CAP):
            assert self.signalled is not None
            assert self.ended is not None
            return self.ended - self.signalled
        self.kill()
        return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.killed = True
            self.proc.kill()
        self.proc.wait(timeout=30)
        if self.ended is None:
            self.ended = time.monotonic()
        self._reader.join(timeout=5)
        self._out.join(timeout=5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def finish(self) -> None:
        self.kill()

    def longest_silence(self) -> float:
        """The longest stretch without a stderr line while it ran."""
        times = [self.started, *(t for t, _ in self.lines)]
        times.append(self.ended if self.ended is not None else time.monotonic())
        return max(b - a for a, b in itertools.pairwise(times))

    def shown(self) -> list[str]:
        """Its stderr lines, runs of plain progress lines folded into one."""
        shown: list[str] = []
        progress = 0
        for _, line in self.lines:
            if line.startswith("done ") and " · running " in line:
                progress += 1
                continue
            if progress:
                shown.append(f"({progress} progress lines)")
                progress = 0
            if not shown or shown[-1] != line:
                shown.append(line)
        if progress:
            shown.append(f"({progress} progress lines)")
        return shown


@dataclass
class _Outcome:
    hold: float = 0.0
    """How long the fault lasted (0: it is still on)."""
    started: float = 0.0
    ended: float | None = None
    notes: list[str] = field(default_factory=list)


Fault = Callable[[FaultProxy, _Outcome], None]


def _resets(times: int, every: float) -> Fault:
    def inject(proxy: FaultProxy, outcome: _Outcome) -> None:
        reset = 0
        for n in range(times):
            if n:
                time.sleep(every)
            reset += proxy.reset()
        outcome.notes.append(f"{reset} connections reset")
        outcome.ended = time.monotonic()

    return inject


def _stall(seconds: float) -> Fault:
    def inject(proxy: FaultProxy, outcome: _Outcome) -> None:
        proxy.stall()
        time.sleep(seconds)
        proxy.flow()
        outcome.ended = time.monotonic()

    return inject


def _refuse(seconds: float) -> Fault:
    def inject(proxy: FaultProxy, outcome: _Outcome) -> None:
        proxy.cut()
        time.sleep(seconds)
        proxy.restore()
        outcome.ended = time.monotonic()

    return inject


def _silence(proxy: FaultProxy, outcome: _Outcome) -> None:
    outcome.notes.append(f"{proxy.silence()} connections silenced")
    outcome.ended = time.monotonic()


def _cut(proxy: FaultProxy, outcome: _Outcome) -> None:
    proxy.cut()


def _stall_forever(proxy: FaultProxy, outcome: _Outcome) -> None:
    proxy.stall()


@dataclass(frozen=True)
class _Case:
    name: str
    fault: Fault
    then: str = "wait"
    """``wait``: for the batch to end; ``signal``: 8 s into the fault, SIGINT the batch and
    SIGTERM the worker; ``give_up``: let ``--database-wait`` run out."""


CASES = [
    _Case("reset x4", _resets(4, 1.5)),
    _Case("reset every 1 s for 8 s", _resets(9, 1.0)),
    _Case("stall 5 s", _stall(5)),
    _Case("stall 20 s", _stall(20)),
    _Case("refused 30 s after a reset", _refuse(30)),
    _Case("open connections silent", _silence),
    _Case("permanent cut, then Ctrl-C / SIGTERM", _cut, then="signal"),
    _Case("permanent cut, --database-wait 12", _cut, then="give_up"),
    _Case("stall for good, then Ctrl-C / SIGTERM", _stall_forever, then="signal"),
]


class _Scenario:
    def __init__(self, folder: Path, postgres: PostgresServer, name: str) -> None:
        self.folder = folder
        self.work = folder / "work"
        self.work.mkdir()
        self.ids = [f"t{i:02d}" for i in range(TASKS)]
        write_tasks(folder / "tasks.jsonl", self.ids)
        self.proxy = FaultProxy(postgres.port).start()
        database = "faults_" + "".join(c if c.isalnum() else "_" for c in name)[:40]
        self.url = self.proxy.url(postgres.url.rsplit("/", 1)[0] + f"/{database}")
        self.server = FakeProviderServer().start()
        self.replied: list[float] = []
        self.asked: list[float] = []

        def handler(request: RecordedRequest) -> Reply:
            self.asked.append(time.monotonic())
            self.replied.append(time.monotonic() + 0.2)
            return _reply(request)

        self.server.handler = handler

    def batch_arguments(self, *extra: str) -> list[str]:
        return [
            "batch",
            str(self.folder / "tasks.jsonl"),
            *provider_options(self.server),
            "--workspace",
            str(self.work),
            "--database-url",
            self.url,
            "--concurrency",
            "4",
            "--poll",
            "0.2",
            "--out",
            str(self.folder / "results.jsonl"),
            *extra,
        ]

    def start_batch(self, arguments: list[str]) -> _Watched:
        return _Watched("batch", agentfsm(self.folder, *arguments))

    def start_worker(self) -> _Watched:
        arguments = ["worker", "--database-url", self.url, "--concurrency", "4", "--poll", "0.2"]
        return _Watched("worker", agentfsm(self.folder, *arguments))

    def close(self) -> None:
        self.proxy.close()
        self.server.stop()

    def results(self) -> dict[str, str]:
        path = self.folder / "results.jsonl"
        if not path.exists():
            return {}
        return {
            line["id"]: line["status"] for line in map(json.loads, path.read_text().splitlines())
        }


def _wait_for(check: Callable[[], bool], limit: float) -> bool:
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _seconds(value: float | None) -> str:
    return "killed" if value is None else f"{value:.1f} s"


@dataclass
class _Run:
    """What one fault did, as the row prints it."""

    ok: int = 0
    duplicated: int = 0
    repeated: int = 0
    hung: bool = False
    batch_stop: float | None = None
    """Seconds from the batch's signal to its exit (``None``: not signalled, or killed)."""
    batch_signalled: bool = False
    worker_stop: float | None = None
    noticed: float | None = None
    """Seconds from the fault's end to the batch's next line."""
    logs: int = 0
    reran: str = ""


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_database_fault(
    postgres: PostgresServer, case: _Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ANSWER_TIMEOUT_ENV, ANSWER_TIMEOUT)
    monkeypatch.setenv("PYTHONFAULTHANDLER", "1")  # SIGABRT prints every thread's stack
    folder = Path(tempfile.mkdtemp(prefix="agentfsm-fault-"))
    scenario = _Scenario(folder, postgres, case.name)
    outcome = _Outcome()
    run = _Run()
    processes: list[_Watched] = []
    extra = ("--database-wait", str(DATABASE_WAIT)) if case.then == "give_up" else ()
    try:
        worker = scenario.start_worker()
        processes.append(worker)
        assert _wait_for(lambda: any("serving" in line for _, line in worker.lines), 60), (
            worker.shown()
        )
        batch = scenario.start_batch(scenario.batch_arguments(*extra))
        processes.append(batch)
        assert _wait_for(lambda: len(scenario.server.requests) >= TRIGGER, 60), (
            batch.shown() + worker.shown()
        )
        outcome.started = time.monotonic()
        injector = threading.Thread(target=case.fault, args=(scenario.proxy, outcome))
        injector.start()
        if case.then == "signal":
            time.sleep(8)
            run.batch_signalled = True
            run.batch_stop = batch.stop(signal.SIGINT)
        else:
            injector.join()
            limit = DATABASE_WAIT + 30 if case.then == "give_up" else HUNG
            if not batch.wait(outcome.started + limit - time.monotonic()):
                run.hung = run.batch_signalled = True
                batch.signal(signal.SIGABRT)  # where each thread waits, then it ends
                run.batch_stop = batch.stop(signal.SIGINT)
        run.worker_stop = worker.stop(signal.SIGTERM)
        injector.join()
        if outcome.ended is not None:
            shown_after = [t for t, _ in batch.lines if t > outcome.ended]
            if shown_after:
                run.noticed = shown_after[0] - outcome.ended
            elif batch.ended is not None and batch.ended > outcome.ended:
                run.noticed = batch.ended - outcome.ended  # its next sign: the end
        # Whatever is unfinished, the user runs the printed command again (with a worker).
        scenario.proxy.restore()
        first = scenario.results()
        if sorted(first) != scenario.ids or set(first.values()) != {"SUCCESS"}:
            rest = scenario.start_batch(_rerun_command(batch, scenario))
            helper = scenario.start_worker()
            processes += [rest, helper]
            finished = rest.wait(120)
            helper.stop(signal.SIGTERM)
            run.reran = f"rerun: {'exit ' + str(rest.proc.returncode) if finished else 'hung'}"
        final = scenario.results()
    finally:
        for process in processes:
            process.finish()
        scenario.close()

    calls = Counter((task_of(r), turn_of(r)) for r in scenario.server.requests)
    side_log = scenario.work / "side.log"
    side = Counter(side_log.read_text().split()) if side_log.exists() else Counter()
    run.ok = sum(1 for task in scenario.ids if final.get(task) == "SUCCESS")
    run.duplicated = sum(1 for count in side.values() if count > 1)
    run.repeated = sum(count - 1 for count in calls.values())
    run.logs = sum(p.stat().st_size for p in (folder / "state").rglob("*.log*") if p.is_file())
    shown = batch.shown()
    silence = batch.longest_silence()
    row = (
        f"{case.name:<40} ok {run.ok:>2}  lost {TASKS - run.ok:>2}  "
        f"duplicated {run.duplicated}  repeated calls {run.repeated:>2}  "
        f"longest silence {silence:5.1f} s  "
        f"batch {'hung' if run.hung else 'exit ' + str(batch.proc.returncode)}"
        + (f" (stop {_seconds(run.batch_stop)})" if run.batch_signalled else "")
        + f"  worker stop {_seconds(run.worker_stop)} (exit {worker.proc.returncode})"
        + (f"  noticed {run.noticed:.1f} s after" if run.noticed is not None else "")
        + (f"  {run.reran}" if run.reran else "")
        + f"  logs {run.logs / 1000:.0f} KB"
        + (f"  ({'; '.join(outcome.notes)})" if outcome.notes else "")
    )
    detail = [f"    batch: {line}" for line in shown] + [
        f"    worker: {line}" for line in worker.shown()
    ]
    ROWS.append(row + "\n" + "\n".join(detail))
    logs = _log_tails(folder / "state")
    shutil.rmtree(folder, ignore_errors=True)
    try:
        _check(case, run, batch, shown, silence, row)
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{logs}") from None


def _log_tails(state: Path, lines: int = 40) -> str:
    """The last lines of each log the commands wrote, for a failure's message."""
    tails = []
    for log in sorted(state.rglob("*.log")):
        last = log.read_text(errors="replace").splitlines()[-lines:]
        tails.append(f"--- {log.name}\n" + "\n".join(line[:300] for line in last))
    return "\n".join(tails)


IN_FLIGHT = 8
"""Tasks two workers run at a time: each may pay its step in flight again when stopped."""


def _check(
    case: _Case, run: _Run, batch: _Watched, shown: list[str], silence: float, row: str
) -> None:
    told = "\n".join(shown)
    assert run.ok == TASKS, row  # none lost, whatever happened
    assert not run.hung, row
    # The user is told while the database does not answer, again every 10 s.
    assert silence < 20, row
    if case.name not in ("reset x4", "reset every 1 s for 8 s"):
        assert "has not answered for" in told, told
    if case.then == "wait":
        assert batch.proc.returncode == 0, told
        assert run.duplicated == run.repeated == 0, row
        # Recovery is told within a few seconds (when the batch outlived the fault).
        assert run.noticed is None or run.noticed < 10, row
        assert run.logs < 200_000, row  # an outage's log is bounded
    else:
        # Stopped: the tasks in flight may pay their step again; nothing else is.
        assert run.repeated <= IN_FLIGHT, row
        assert run.duplicated <= IN_FLIGHT, row
        assert "finish them with: agentfsm batch " in told, told
        assert run.worker_stop is not None, row
        assert run.worker_stop < 10, row  # SIGTERM ends the worker within a few seconds
    if case.then == "signal":
        assert batch.proc.returncode == 130, told
        assert run.batch_stop is not None, row
        assert run.batch_stop < 10, row  # Ctrl-C ends the batch within a few seconds
        assert "interrupted: " in told, told
    if case.then == "give_up":
        assert batch.proc.returncode == 1, told
        assert "giving up (--database-wait 12)" in told, told


def _rerun_command(batch: _Watched, scenario: _Scenario) -> list[str]:
    """The command the batch printed to finish its tasks, else the same command again."""
    for _, line in reversed(batch.lines):
        for marker in ("finish them with: ", "resume them with: "):
            if marker in line:
                command = line.split(marker, 1)[1].split(" (with the database password")[0]
                return shlex.split(command)[1:]
    return scenario.batch_arguments()


def test_a_silent_connection_is_closed_and_replaced(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's bound on a reply, directly: a statement on a connection gone silent
    fails after the answer timeout (the connection closed); the pool's next checkout
    replaces it and the database answers."""
    monkeypatch.setenv(ANSWER_TIMEOUT_ENV, "2")
    with FaultProxy(postgres.port) as proxy:
        engine = system_engine(proxy.url(postgres.url), pool_size=1, application_name="t")
        try:
            with engine.connect() as connection:
                assert connection.execute(sa.text("SELECT 1")).scalar() == 1
                raw = connection.connection.driver_connection
                assert isinstance(raw, BoundedConnection)
                assert proxy.silence() == 1
                started = time.monotonic()
                with pytest.raises(sa.exc.OperationalError, match="did not answer within 2 s"):
                    connection.execute(sa.text("SELECT 2"))
                took = time.monotonic() - started
                assert raw.closed
            with engine.connect() as connection:
                assert connection.execute(sa.text("SELECT 3")).scalar() == 3
        finally:
            engine.dispose()
    print(f"a statement on a silent connection failed after {took:.1f} s (bound 2 s)")
    assert took >= 2


def _fail_next_wait_mid_statement(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Arm a fault in psycopg's wait: the next statement is sent, then the wait fails as
    psycopg's own wait fails when the kernel reports an error on the socket before libpq
    has read it ("connection socket closed"): libpq still counts the statement as running."""
    real = psycopg.waiting.wait
    armed: list[bool] = []

    def wait(gen: Any, fileno: int, interval: float = 0.1, timeout: float | None = None) -> Any:
        if not armed:
            return real(gen, fileno, interval=interval, timeout=timeout)
        try:
            next(gen)  # the statement goes out
        except StopIteration as finished:  # nothing to wait for (autocommit set, no statement)
            return finished.value
        armed.clear()
        raise psycopg.OperationalError("connection socket closed")

    monkeypatch.setattr(psycopg.waiting, "wait", wait)
    return lambda: armed.append(True)


def test_a_socket_failing_mid_statement_closes_its_connection(
    postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement whose socket fails while it is in flight fails as a lost connection,
    which DBOS's own test of an error (``retriable_postgres_exception``) retries; a pool
    ping that meets the same failure replaces the connection instead of failing the
    checkout as a programming error (SQLAlchemy's ping then sets autocommit on a
    connection libpq thinks is busy)."""
    fail_next = _fail_next_wait_mid_statement(monkeypatch)
    engine = system_engine(postgres.url, pool_size=1, application_name="t")
    try:
        with engine.connect() as connection:
            assert connection.execute(sa.text("SELECT 1")).scalar() == 1
            raw = connection.connection.driver_connection
            assert isinstance(raw, BoundedConnection)
            fail_next()
            with pytest.raises(sa.exc.OperationalError, match="connection socket closed") as lost:
                connection.execute(sa.text("SELECT 2"))
            assert raw.closed
        assert lost.value.connection_invalidated
        assert retriable_postgres_exception(lost.value)
        assert is_connection_error(lost.value)
        with engine.connect() as connection:
            assert connection.execute(sa.text("SELECT 3")).scalar() == 3
        fail_next()  # met by the next checkout's ping
        with engine.connect() as connection:
            connection = connection.execution_options(isolation_level="AUTOCOMMIT")
            assert connection.execute(sa.text("SELECT 4")).scalar() == 4
    finally:
        engine.dispose()


def test_connections_reset_under_load_fail_only_as_errors_dbos_retries(
    postgres: PostgresServer,
) -> None:
    """Eight threads run DBOS's kinds of statement (autocommit writes, transactions,
    many-row inserts, which psycopg pipelines) through the engine for 20 s while every
    connection is reset every 50 ms. Each error is judged by DBOS's own test: every one must
    be an error it retries (a lost connection), never one that would fail a task for good
    (a programming error, "another command is already in progress", "cannot exit pipeline
    mode while busy": up to 10 a run before a socket failing mid-statement closed its
    connection). The failure itself ("connection socket closed") comes a few times a minute
    here, not in every run: the test above makes it happen on purpose."""
    database = "engine_resets"
    admin = sa.create_engine(
        postgres.url.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        connection.execute(sa.text(f"DROP DATABASE IF EXISTS {database}"))
        connection.execute(sa.text(f"CREATE DATABASE {database}"))
    admin.dispose()
    url = postgres.url.rsplit("/", 1)[0] + f"/{database}"
    setup = system_engine(url, pool_size=1, application_name="t")
    with setup.begin() as connection:
        connection.execute(sa.text("CREATE TABLE t (id serial PRIMARY KEY, v text)"))
        connection.execute(sa.text("INSERT INTO t (v) VALUES ('first')"))
    setup.dispose()

    def autocommit_write(engine: sa.Engine) -> None:
        with engine.connect() as connection:
            connection = connection.execution_options(isolation_level="AUTOCOMMIT")
            connection.execute(sa.text("UPDATE t SET v = 'x' WHERE id = 1"))

    def many_rows(engine: sa.Engine) -> None:
        with engine.begin() as connection:
            connection.execute(
                sa.text("INSERT INTO t (v) VALUES (:v)"), [{"v": str(n)} for n in range(20)]
            )

    def transaction(engine: sa.Engine) -> None:
        with engine.begin() as connection:
            connection.execute(sa.text("SELECT count(*) FROM t")).scalar()
            connection.execute(sa.text("INSERT INTO t (v) VALUES ('a') RETURNING id")).scalar()

    def slow_read(engine: sa.Engine) -> None:
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT pg_sleep(0.002)"))

    kinds = [autocommit_write, many_rows, transaction, slow_read]
    done: Counter[str] = Counter()
    errors: Counter[tuple[bool, str]] = Counter()
    counting = threading.Lock()
    stop = threading.Event()
    with FaultProxy(postgres.port) as proxy:
        engine = system_engine(proxy.url(url), pool_size=8, application_name="t", hold=5)

        def work(kind: Callable[[sa.Engine], None]) -> None:
            while not stop.is_set():
                try:
                    kind(engine)
                    with counting:
                        done[kind.__name__] += 1
                except Exception as error:  # counted, judged below
                    reason = str(getattr(error, "orig", error)).split("\n")[0][:80]
                    retried = retriable_postgres_exception(error)
                    with counting:
                        errors[(retried, f"{kind.__name__}: {reason}")] += 1

        threads = [threading.Thread(target=work, args=(kinds[n % 4],)) for n in range(8)]
        for thread in threads:
            thread.start()
        resets = 0
        try:
            end = time.monotonic() + 20
            while time.monotonic() < end:
                time.sleep(0.05)
                resets += proxy.reset()
        finally:
            stop.set()
            for thread in threads:
                thread.join(60)
            engine.dispose()
    print(
        f"\n{resets} connections reset under {sum(done.values())} operations done "
        f"({dict(done)}); {sum(errors.values())} errors:"
    )
    sockets = sum(count for (_, reason), count in errors.items() if "socket closed" in reason)
    print(f"  ({sockets} of them a socket failing mid-statement)")
    for (retried, reason), count in errors.most_common():
        print(f"  {count:>4}  {'retried' if retried else 'NOT RETRIED'}  {reason}")
    assert resets > 100
    assert all(done[kind.__name__] for kind in kinds), done
    assert not [reason for (retried, reason) in errors if not retried], errors


def test_a_database_silent_from_the_first_statement_is_given_up_on(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    """The URL check connects; every connection after it goes silent at once, so creating
    or migrating the database gets no answer: ``batch`` says so, gives up after
    --database-wait in one line, exit 1, nothing submitted."""
    (tmp_path / "work").mkdir()
    write_tasks(tmp_path / "tasks.jsonl", ["a", "b"])
    with FaultProxy(postgres.port) as proxy, FakeProviderServer() as server:
        proxy.silent_from = 3  # the check: the database, then "postgres" (not created yet)
        url = proxy.url(postgres.url.rsplit("/", 1)[0] + "/agentfsm_silent_start")
        started = time.monotonic()
        proc = agentfsm(
            tmp_path,
            "batch",
            str(tmp_path / "tasks.jsonl"),
            *provider_options(server),
            "--workspace",
            str(tmp_path / "work"),
            "--database-url",
            url,
            "--database-wait",
            "4",
        )
        try:
            _, err = proc.communicate(timeout=HUNG)
        finally:
            proc.kill()
        took = time.monotonic() - started
        lines = [line for line in err.decode().splitlines() if "WARNING: --no-sandbox" not in line]
        print(f"batch on a database silent after the check: exit {proc.returncode} in {took:.1f} s")
        assert proc.returncode == 1, lines
        assert "Traceback" not in err.decode()
        assert any("giving up (--database-wait 4)" in line for line in lines), lines
        assert lines[-1].startswith("agentfsm batch: the database"), lines
        assert server.requests == []
