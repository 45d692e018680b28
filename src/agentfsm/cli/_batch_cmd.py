"""``agentfsm batch TASKS.jsonl`` and ``agentfsm worker``: many durable runs on a DBOS queue.

``batch`` reads one task a line (``{"id": …, "prompt": …}``, optional ``workspace`` and
``max_turns``), enqueues one durable run per task under the task's id (a known id is not
enqueued again: resubmitting a file makes no new model call for a finished task), works
the queue in this process unless ``--no-work``, shows done / running / failed / tokens,
and writes one result line per task (``--out``). ``worker`` serves the same queue from any
machine that reaches the database. See ``docs/durable.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from agentfsm.adapters.sessions import default_session_dir
from agentfsm.sandbox import check_workspace

from . import _run_cmd as run_cmd
from ._database_url import check_database_url, hide_secrets
from ._database_wait import DatabaseStatus, interrupt, leave, stop_worker
from ._errors import UsageError
from ._logfile import LIBRARY_LOGGERS, SDK_LOGGERS, logs_to_file
from ._parser import add_batch_arguments, add_worker_arguments
from ._queue_work import command_line, work_queue
from ._terminal import one_line

if TYPE_CHECKING:
    from agentfsm.adapters.durable import RunSpec

# The commands import the durable extra (dbos) when they run, not when the parser is built.

__all__ = ["add_batch_arguments", "add_worker_arguments", "batch", "worker"]

TASK_KEYS = ("id", "prompt", "workspace", "max_turns")
"""The keys of a task line; any other is refused (rather than silently ignored)."""
MAX_ID = 200
"""Longest task id (it is the workflow id and names the session file)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_RETRY_SUFFIX = re.compile(r"@retry\d+$")


class _Usage(UsageError):
    pass


def _session_path(session_dir: Path, task_id: str) -> Path:
    """``task-ID.jsonl``; an id with other characters than ``[A-Za-z0-9_.-]`` gets a digest."""
    safe = _UNSAFE.sub("-", task_id).strip("-.")[:80] or "task"
    if safe != task_id:
        safe += "-" + hashlib.sha256(task_id.encode()).hexdigest()[:10]
    return session_dir / f"task-{safe}.jsonl"


def _task(
    line: str, number: int, base: Path, args: argparse.Namespace, checked: dict[Path, str | None]
) -> tuple[str, RunSpec]:
    where = f"{args.tasks[:200]}:{number}"
    try:
        data = json.loads(line)
    except ValueError as error:
        raise _Usage(f"{where}: not JSON ({error})") from None
    except RecursionError:
        raise _Usage(f"{where}: not a task (JSON nested too deeply)") from None
    if not isinstance(data, dict):
        raise _Usage(f"{where}: a task is a JSON object")
    for key, value in data.items():
        if isinstance(value, str) and not _storable(value):
            raise _Usage(
                f"{where}: {key[:40]!r} holds a NUL character or a lone surrogate, "
                "which no database or provider takes"
            )
    unknown = sorted(str(key) for key in data if key not in TASK_KEYS)
    if unknown:
        names = ", ".join(repr(key[:40]) for key in unknown[:5])
        raise _Usage(
            f"{where}: unknown key(s) {names}; a task has {', '.join(TASK_KEYS)} "
            "(the provider options, such as --base-url and --model, are the command's, "
            "for every task)"
        )
    task_id, prompt = data.get("id"), data.get("prompt")
    if not isinstance(task_id, str) or not 1 <= len(task_id) <= MAX_ID or not task_id.isprintable():
        raise _Usage(f"{where}: id must be a printable string of 1 to {MAX_ID} characters")
    if _RETRY_SUFFIX.search(task_id):
        raise _Usage(f"{where}: id must not end in @retryN (the names of retry attempts)")
    if not isinstance(prompt, str) or not prompt.strip():
        raise _Usage(f"{where}: prompt must be a non-empty string")
    max_turns = data.get("max_turns", args.max_turns)
    if (
        isinstance(max_turns, bool)
        or not isinstance(max_turns, int)
        or not 1 <= max_turns <= run_cmd.MAX_TURNS
    ):
        raise _Usage(f"{where}: max_turns must be between 1 and {run_cmd.MAX_TURNS}")
    folder = data.get("workspace")
    if folder is not None and not isinstance(folder, str):
        raise _Usage(f"{where}: workspace must be a path")
    workspace = (base / folder).resolve() if folder else Path(args.workspace).resolve()
    if workspace not in checked:
        if not workspace.is_dir():
            raise _Usage(f"{where}: workspace {str(workspace)[:200]!r} is not a folder")
        try:
            check_workspace(workspace)
        except ValueError as error:
            raise _Usage(f"{where}: {error}") from None
        session_dir = default_session_dir(workspace)
        try:
            found = run_cmd.run_settings("agentfsm batch", args, workspace)
        except UsageError as error:
            raise _Usage(f"{where}: workspace {str(workspace)[:200]!r}: {error}") from None
        settings = found.settings
        protected = run_cmd._protected(workspace, session_dir)
        # Refused now, not in a worker; its warnings are printed once, for the first.
        run_cmd._sandbox(
            args, workspace, settings, protected, warn=not checked and not args.no_sandbox
        )
        try:
            run_cmd.quirks(args, settings)  # a bad profile is refused now, not in a worker
            run_cmd.ensure_session_dir(session_dir, "session folder")
        except UsageError as error:
            raise _Usage(f"{where}: {error}") from None
        checked[workspace] = found.digest if found.widens else None
    from agentfsm.adapters.durable import RunSpec

    from ._durable_cmd import _OPTIONS, CLI_FACTORY, SETTINGS_DIGEST

    session_dir = default_session_dir(workspace)
    options: dict[str, Any] = {name: getattr(args, name) for name in _OPTIONS}
    options.update(
        provider=run_cmd._provider(args),  # decided here, not by each worker's environment
        max_turns=max_turns,
        workspace=str(workspace),
        session_dir=str(session_dir),
    )
    options[SETTINGS_DIGEST] = checked[workspace]  # what the worker may apply
    return task_id, RunSpec(
        prompt=prompt,
        factory=CLI_FACTORY,
        session_path=str(_session_path(session_dir, task_id)),
        options=options,
    )


def _storable(text: str) -> bool:
    """Whether ``text`` has neither NUL nor a lone surrogate (PostgreSQL refuses the one,
    UTF-8 the other)."""
    if "\0" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_tasks(args: argparse.Namespace) -> dict[str, RunSpec]:
    """The tasks of the file, checked (a duplicate id is a usage error). Lines end at
    ``\\n`` only (a U+2028 in a prompt is text); a UTF-8 byte order mark at the start is
    skipped."""
    path = Path(args.tasks)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise _Usage(f"cannot read {args.tasks[:200]!r}: {error.strerror or error}") from None
    lines = data.removeprefix(b"\xef\xbb\xbf").split(b"\n")
    tasks: dict[str, RunSpec] = {}
    checked: dict[Path, str | None] = {}
    for number, raw in enumerate(lines, 1):
        try:
            line = raw.removesuffix(b"\r").decode("utf-8")
        except UnicodeDecodeError as error:
            raise _Usage(
                f"{args.tasks[:200]}:{number}: not UTF-8 (byte {error.start + 1} of the line)"
            ) from None
        if "\0" in line:
            raise _Usage(f"{args.tasks[:200]}:{number}: a NUL byte (not a JSON Lines file)")
        if not line.strip():
            continue
        task_id, spec = _task(line, number, path.resolve().parent, args, checked)
        if task_id in tasks:
            raise _Usage(f"{args.tasks[:200]}:{number}: duplicate id {task_id[:100]!r}")
        tasks[task_id] = spec
    if not tasks:
        raise _Usage(f"{args.tasks[:200]!r} has no tasks")
    return tasks


def _check(args: argparse.Namespace) -> None:
    from agentfsm.adapters.durable import parse_rate

    from ._durable_cmd import refuse_stored_credentials

    args.resume = None
    run_cmd._check_numbers(args)
    run_cmd._check_inputs(args, Path("."), None)
    refuse_stored_credentials(args)
    if args.rate is not None:
        try:
            args.rate = parse_rate(args.rate)
        except ValueError as error:
            raise _Usage(f"--rate: {error}") from None
    if args.poll <= 0:
        raise _Usage("--poll must be positive")


def _warn_changed(changed: list[str]) -> None:
    """One line naming the known tasks given now with another prompt or other options."""
    if not changed:
        return
    names = ", ".join(repr(task[:100]) for task in changed[:5])
    more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
    print(
        one_line(
            f"agentfsm batch: WARNING: task(s) {names}{more} already known with another "
            "prompt or other options: kept as they are, not run again (--retry-failed "
            "reruns failed ones with the options given now)",
            1000,
        ),
        file=sys.stderr,
    )


def batch(args: argparse.Namespace) -> int:
    """``agentfsm batch``; returns the exit code (1 when a task failed)."""
    if getattr(args, "otel", False):
        from ._otel import run_with_otel  # needs the cli-otel extra

        return run_with_otel(args, batch, command="batch")
    from . import _durable_cmd as durable_cmd

    try:
        _check(args)
        tasks = read_tasks(args)
        args.database_url = check_database_url(args.database_url)
    except UsageError as error:
        print(f"agentfsm batch: {one_line(str(error))}", file=sys.stderr)
        return 2
    if args.no_sandbox:  # once for the command, not once per task
        print(f"agentfsm batch: {run_cmd.NO_SANDBOX_WARNING}", file=sys.stderr)
    durable_cmd._command.begin("batch", warned=True, instrument=getattr(args, "instrument", None))
    loggers = (*SDK_LOGGERS, *LIBRARY_LOGGERS)
    previous = signal.signal(signal.SIGTERM, interrupt)  # as Ctrl-C: what is pending is told
    try:
        with logs_to_file("batch", verbose=args.verbose, loggers=loggers, announce=not args.quiet):
            code = _submit_and_work(args, tasks)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return leave(code)


def _submit_and_work(args: argparse.Namespace, tasks: dict[str, RunSpec]) -> int:
    from agentfsm.adapters.durable import (
        QUEUE_NAME,
        DatabaseUnreachable,
        open_client,
        reason_of,
        submit_tasks,
    )

    argv = getattr(args, "argv", None) or ["batch", args.tasks]
    finish_with = command_line([a for a in argv if a != "--retry-failed"])
    status = DatabaseStatus("batch", args.database_url, args.database_wait)
    try:  # creating or migrating the database waits on it like any read
        client = status.patiently(
            lambda _: open_client(args.database_url, retry_connection_errors=False)
        )
    except KeyboardInterrupt:
        print(f"agentfsm batch: interrupted; run it again with: {finish_with}", file=sys.stderr)
        return 130
    except DatabaseUnreachable as gone:
        status.gave_up(gone.seconds, gone.reason, f"submit the tasks again with: {finish_with}")
        return 1
    except Exception as error:  # the database was checked: it went away since
        print(f"agentfsm batch: {one_line(hide_secrets(reason_of(error)))}", file=sys.stderr)
        return 1
    try:
        submitted = status.patiently(
            lambda heard: submit_tasks(
                tasks, client=client, retry_failed=args.retry_failed, on_answer=heard
            )
        )
        _warn_changed(submitted.changed)
        if not args.quiet:
            known = len(tasks) - len(submitted.new) - len(submitted.retried)
            print(
                f"agentfsm batch: {len(submitted.new)} task(s) enqueued on {QUEUE_NAME}"
                + (f", {len(submitted.retried)} failed one(s) retried" if submitted.retried else "")
                + (f", {known} already known (not run again)" if known else ""),
                file=sys.stderr,
            )
        if args.detach:
            return 0
        return work_queue(
            "batch",
            url=args.database_url,
            client=client,
            runs=submitted.runs,
            work=not args.no_work,
            concurrency=args.concurrency,
            rate=args.rate,
            poll=args.poll,
            quiet=args.quiet,
            out=args.out,
            finish_with=finish_with,
            retry_with=lambda blamed: command_line(
                argv, "--retry-failed", blank=dict([blamed]) if blamed else {}
            ),
            database_wait=args.database_wait,
            endpoints=dict.fromkeys(tasks, run_cmd._endpoint(args)),
        )
    except DatabaseUnreachable as gone:
        status.gave_up(gone.seconds, gone.reason, f"submit the tasks again with: {finish_with}")
        return 1
    except KeyboardInterrupt:  # while submitting (work_queue tells its own)
        print(f"agentfsm batch: interrupted; run it again with: {finish_with}", file=sys.stderr)
        return 130
    except Exception as error:  # a full disk, a statement the database refused
        import sqlalchemy as sa

        if not isinstance(error, (OSError, sa.exc.SQLAlchemyError)):
            raise
        reason = hide_secrets(reason_of(error))
        print(
            one_line(
                f"agentfsm batch: {reason}; what was submitted stays in the database, "
                f"run it again with: {finish_with}",
                2000,
            ),
            file=sys.stderr,
        )
        return 1
    finally:
        client.destroy()


def _on_signals(stop: threading.Event) -> Callable[[], None]:
    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


def worker(args: argparse.Namespace) -> int:
    """``agentfsm worker``: serve the task queue until SIGINT or SIGTERM."""
    from agentfsm.adapters.durable import QUEUE_NAME, parse_rate, requeue_executor

    from . import _durable_cmd as durable_cmd  # registers the agent factory of CLI tasks

    try:
        url = check_database_url(args.database_url)
    except UsageError as error:
        print(f"agentfsm worker: {one_line(str(error))}", file=sys.stderr)
        return 2
    if args.requeue is not None:
        try:
            ids = requeue_executor(args.requeue, url)
        except ValueError as error:
            print(f"agentfsm worker: --requeue: {one_line(str(error))}", file=sys.stderr)
            return 2
        print(f"agentfsm worker: {len(ids)} task(s) of {args.requeue} back on {QUEUE_NAME}")
        return 0
    try:
        rate = parse_rate(args.rate) if args.rate is not None else None
    except ValueError as error:
        print(f"agentfsm worker: --rate: {error}", file=sys.stderr)
        return 2
    durable_cmd._command.begin("worker", report_tasks=True)
    with logs_to_file(
        "worker", verbose=args.verbose, loggers=(*SDK_LOGGERS, *LIBRARY_LOGGERS), announce=True
    ):
        code = _serve(args, url, rate)
    return leave(code)


PROBE_EVERY = 2.0
"""Seconds between a worker's checks that its PostgreSQL database answers."""


def _serve(args: argparse.Namespace, url: str, rate: Any) -> int:
    from agentfsm.adapters.durable import QUEUE_NAME, TaskWorker, reason_of

    stop = threading.Event()
    restore = _on_signals(stop)
    serving = TaskWorker(
        url,
        concurrency=args.concurrency,
        rate=rate,
        executor_id=args.executor_id,
        polling_interval=args.poll,
    )
    name = "agentfsm worker"
    try:
        started = _started(serving, stop)
        if isinstance(started, BaseException):
            reason = one_line(reason_of(started), 300)
            print(f"{name}: cannot start: {reason}", file=sys.stderr, flush=True)
            return 1
        if not started:
            print(f"{name}: stopped while starting", file=sys.stderr, flush=True)
            return 0
        name = f"agentfsm worker {serving.executor_id}"
        print(
            f"{name}: serving {QUEUE_NAME} (concurrency {args.concurrency}); Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )
        status = DatabaseStatus(f"worker {serving.executor_id}", url, args.database_wait)
        code = _watch(serving, status, stop, args.database_wait)
        print(f"{name}: stopping", file=sys.stderr, flush=True)
        return code
    finally:
        restore()
        stop_worker(serving)


def _started(serving: Any, stop: threading.Event) -> bool | BaseException:
    """Start ``serving`` in a thread of its own: ``True`` once it serves, ``False`` when
    a signal came first (its launch is abandoned), or the error that stopped it."""
    outcome: list[bool | BaseException] = []

    def start() -> None:
        try:
            serving.start()
            outcome.append(True)
        except BaseException as error:  # reported by the command
            outcome.append(error)

    thread = threading.Thread(target=start, name="agentfsm-worker-start", daemon=True)
    thread.start()
    while not outcome and not stop.wait(0.1):
        pass
    return outcome[0] if outcome else False


def _watch(serving: Any, status: DatabaseStatus, stop: threading.Event, wait: float) -> int:
    """Serve until a signal, checking every :data:`PROBE_EVERY` seconds that the database
    answers; 1 when it has not for ``wait`` seconds."""
    from agentfsm.adapters.durable import DatabaseUnreachable, Outage, is_connection_error

    outage = Outage(wait)
    probe: list[BaseException | None] = []
    probing: threading.Thread | None = None
    next_probe = time.monotonic() + PROBE_EVERY

    def ask() -> None:
        try:
            serving.probe()
            probe.append(None)
        except Exception as error:  # judged by the loop
            probe.append(error)

    while not stop.wait(0.5):
        if probing is not None and probe:
            error = probe.pop()
            probing = None
            if error is None:
                silent = outage.seconds()
                if outage.answered() is not None:
                    status.answered(silent)
            elif is_connection_error(error):
                outage.failed(error)
            else:
                raise error
        if probing is None and time.monotonic() >= next_probe:
            next_probe = time.monotonic() + PROBE_EVERY
            outage.asking()
            probing = threading.Thread(target=ask, name="agentfsm-database-probe", daemon=True)
            probing.start()
        if outage.shown:
            status.waiting(outage.seconds(), outage.reason)
        try:
            outage.check()
        except DatabaseUnreachable as gone:
            status.gave_up(
                gone.seconds,
                gone.reason,
                f"stopping: its unfinished tasks stay pending under {serving.executor_id} "
                "(a worker started in its slot finishes them)",
            )
            return 1
    return 0
