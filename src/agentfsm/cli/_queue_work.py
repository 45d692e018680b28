"""Working and watching queued durable runs, for ``agentfsm batch`` and ``agentfsm runs
retry``: the progress line, one line per failed task, the result lines, and after Ctrl-C
(or ``--database-wait`` running out) how many tasks are pending and the command that
finishes them."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import evolve

from ._database_url import hide_secrets
from ._database_wait import DatabaseStatus, stop_worker
from ._terminal import json_safe, one_line, sanitize

if TYPE_CHECKING:
    from dbos import DBOSClient
    from dbos._queue import QueueRateLimit

    from agentfsm.adapters.durable import BatchProgress, TaskResult

    from ._report import Endpoint

__all__ = ["command_line", "work_queue"]


class _ProgressView:
    """The batch's progress on stderr: a rich bar on a terminal (with the ``cli`` extra),
    else a plain line whenever the counts change."""

    def __init__(self, total: int, quiet: bool, status: DatabaseStatus) -> None:
        self.quiet = quiet
        self.status = status
        self.waited = 0.0
        self.known: BatchProgress | None = None
        self.last = ""
        self.bar: Any = None
        self.task: Any = None
        if quiet or not sys.stderr.isatty():
            return
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
        except ImportError:
            return
        self.bar = Progress(
            TextColumn("batch"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            console=Console(stderr=True),
            transient=False,
        )
        self.task = self.bar.add_task("", total=total)
        self.bar.start()

    def waiting(self, seconds: float, reason: str | None) -> None:
        """The database has not answered for ``seconds``: said on the bar, or in a line."""
        self.waited = seconds
        if self.bar is not None:
            self.bar.update(self.task, description=self.status.line(seconds, reason))
            return
        self.status.waiting(seconds, reason)

    def __call__(self, now: BatchProgress) -> None:
        self.known = now
        if self.waited:
            if self.bar is None:
                self.status.answered(self.waited)
            self.waited = 0.0
        if self.quiet:
            return
        if self.bar is not None:
            detail = f"running {now.running} · failed {now.failed} · tokens {now.tokens}"
            self.bar.update(self.task, completed=now.done + now.failed, description=detail)
            return
        line = now.line()
        if line != self.last:
            self.last = line
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


INTERRUPT_READ = 2.0
"""Seconds an interrupted command waits for the database to count the pending tasks."""


def _pending(
    command: str,
    ids: list[str],
    client: DBOSClient,
    view: _ProgressView,
    finish_with: str,
    when: str,
) -> None:
    """``interrupted: 3 of 10 task(s) pending (…); finish them with: CMD``, the counts read
    within :data:`INTERRUPT_READ` seconds (else the last ones known, or none)."""
    from agentfsm.adapters.durable import call_in_thread, progress, reason_of

    try:
        now: BatchProgress | None = call_in_thread(
            INTERRUPT_READ, lambda: progress(ids, client=client)
        )
        known = ""
    except Exception as error:
        now = view.known
        why = "no answer" if isinstance(error, TimeoutError) else reason_of(error)
        known = f" when last read (the database does not answer: {why})"
    if now is None:
        counted = f"{len(ids)} task(s) not known to have ended{known}"
    else:
        pending = now.total - now.done - now.failed
        counted = (
            f"{pending} of {now.total} task(s) pending ({now.running} running, "
            f"{now.queued} queued){known}"
        )
    print(
        one_line(f"agentfsm {command}: {when}: {counted}; finish them with: {finish_with}", 2000),
        file=sys.stderr,
        flush=True,
    )


def _write(results_: list[TaskResult], out: str | None) -> None:
    lines = "".join(json_safe(json.dumps(r.to_dict(), ensure_ascii=False)) + "\n" for r in results_)
    if out is None:
        sys.stdout.write(lines)
        return
    Path(out).write_text(lines, "utf-8")


def command_line(
    argv: Sequence[str] | None, extra: str | None = None, *, blank: Mapping[str, str] = {}
) -> str:
    """``agentfsm ARGS`` as the user typed them (quoted for a shell, safe on a terminal),
    with ``extra`` appended when it is not there yet, and each option of ``blank`` given
    its placeholder (``{"--base-url": "URL"}``: added when it is not there). A password in
    a URL (``user:PASSWORD@``, ``?password=``) is shown as ``***`` (the line may end up in
    a CI log)."""
    arguments = list(argv or ())
    for option, placeholder in blank.items():
        found = False
        for index, argument in enumerate(arguments):
            if argument == option and index + 1 < len(arguments):
                arguments[index + 1] = placeholder
                found = True
            elif argument.startswith(f"{option}="):
                arguments[index] = f"{option}={placeholder}"
                found = True
        if not found:
            arguments += [option, placeholder]
    if extra is not None and extra not in arguments:
        arguments.append(extra)
    hidden = [hide_secrets(argument) for argument in arguments]
    note = " (with the database password in place of ***)" if hidden != arguments else ""
    return sanitize(shlex.join(["agentfsm", *hidden])) + note


_BLAMED = {"connection": ("--base-url", "URL"), "timeout": ("--base-url", "URL")}
"""The option a failure of each kind points at, and its placeholder in the retry hint."""
_BLAMED_AUTH = ("--api-key-env", "VAR")


def blamed_option(failed: Sequence[TaskResult]) -> tuple[str, str] | None:
    """The provider option every failure points at (``--base-url`` for an unreachable
    server, ``--api-key-env`` for a refused key), or ``None``."""
    options = {
        _BLAMED_AUTH if r.error_kind == "auth" else _BLAMED.get(r.error_kind or "") for r in failed
    }
    return options.pop() if len(options) == 1 and None not in options else None


def _failure_line(command: str, found: TaskResult, endpoint: Endpoint | None) -> str:
    """``agentfsm batch: task 'ID' ERROR: …``, with where the calls went and a hint when
    the provider could not be reached or refused the key (as ``agentfsm run`` says)."""
    reason = one_line(found.error or found.stopped_reason or "no outcome", 300)
    run = f" (run {found.run})" if found.run else ""
    kind = found.error_kind
    where = hint = ""
    if endpoint is not None and kind is not None:
        address = endpoint.address() if kind in ("connection", "timeout") else None
        where = f" (at {address})" if address else ""
        told = endpoint.hint(kind, address)
        hint = f"; hint: {told}" if told else ""
    return one_line(
        f"agentfsm {command}: task {found.id!r}{run} {found.status}: {reason}{where}{hint}", 800
    )


def work_queue(
    command: str,
    *,
    url: str,
    client: DBOSClient,
    runs: Mapping[str, str],
    work: bool,
    concurrency: int = 4,
    rate: QueueRateLimit | None = None,
    poll: float = 1.0,
    quiet: bool = False,
    out: str | None = None,
    finish_with: str,
    retry_with: Callable[[tuple[str, str] | None], str],
    database_wait: float | None = None,
    endpoints: Mapping[str, Endpoint] | None = None,
) -> int:
    """Wait for ``runs`` (task id -> workflow id) to end, running them in this process
    unless not ``work``; write their result lines; report each failed task in one line.
    Returns 0 (all succeeded), 1 (one failed, or the database did not answer for
    ``database_wait`` seconds) or 130 (Ctrl-C); after Ctrl-C or the give-up, the pending
    count and ``finish_with`` are printed. ``client`` should not retry connection errors
    itself (``open_client(..., retry_connection_errors=False)``). A failed task's line
    names where its calls went (``endpoints``: task id -> its provider); ``retry_with``
    gives the command that retries the failed ones, with the option they all point at
    (:func:`blamed_option`) left for the user to fill in."""
    from agentfsm.adapters.durable import DatabaseUnreachable, TaskWorker, gather_results

    worker: Any = None
    stopping: threading.Thread | None = None

    def stop_meanwhile() -> None:
        """Stop the worker while the pending tasks are counted (both may wait 2-3 s)."""
        nonlocal stopping
        if worker is not None:
            stopping = threading.Thread(target=stop_worker, args=(worker,), daemon=True)
            stopping.start()

    status = DatabaseStatus(command, url, database_wait)
    view = _ProgressView(len(runs), quiet, status)
    ids = list(runs.values())
    tasks = {run_id: task for task, run_id in runs.items()}
    try:
        if work:
            worker = TaskWorker(url, concurrency=concurrency, rate=rate, polling_interval=poll)
            worker.start()
        found = asyncio.run(
            gather_results(
                ids,
                client=client,
                on_progress=view,
                interval=min(poll, 0.5),
                on_wait=view.waiting,
                database_wait=database_wait,
            )
        )
        view.close()
    except KeyboardInterrupt:
        view.close()
        stop_meanwhile()
        _pending(command, ids, client, view, finish_with, "interrupted")
        return 130
    except DatabaseUnreachable as gone:
        view.close()
        stop_meanwhile()
        status.gave_up(gone.seconds, gone.reason, "the tasks stay in the database")
        _pending(command, ids, client, view, finish_with, "when it answers again")
        return 1
    finally:
        view.close()
        if stopping is not None:
            stopping.join()
        elif worker is not None:
            stop_worker(worker)
    reported = [evolve(r, id=tasks[r.id], run=r.id if r.id != tasks[r.id] else None) for r in found]
    _write(reported, out)
    failed = [r for r in reported if r.status != "SUCCESS"]
    for result in failed:
        endpoint = endpoints.get(result.id) if endpoints is not None else None
        print(_failure_line(command, result, endpoint), file=sys.stderr)
    if failed:
        blamed = blamed_option(failed)
        fix = (
            f"give the right {blamed[0]}"
            if blamed is not None
            else "fix the cause (options may change)"
        )
        print(
            f"agentfsm {command}: {len(failed)} of {len(reported)} task(s) failed; {fix}, "
            f"then rerun them with: {retry_with(blamed)}",
            file=sys.stderr,
        )
    return 1 if failed else 0
