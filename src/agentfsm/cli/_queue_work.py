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
            _say(line)

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
    except KeyboardInterrupt:  # Ctrl-C again: the counts known, said all the same
        now, known = view.known, " when last read"
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
    _say(one_line(f"agentfsm {command}: {when}: {counted}; finish them with: {finish_with}", 2000))


def _say(line: str) -> None:
    """``line`` on stderr in one write: a line another thread writes at the same moment
    comes before or after it, never into it (``print`` writes the newline apart)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


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


def _names(ids: Sequence[str], shown: int = 5) -> str:
    names = ", ".join(repr(run_id[:60]) for run_id in list(ids)[:shown])
    return names + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


class _Notices:
    """What a waiting command says about tasks nobody may be running: the ones it put back
    on the queue (their worker stopped), and, once nothing has moved for a while, the ones
    queued with no worker taking them or running under another executor."""

    def __init__(self, command: str, url: str, own: str | None) -> None:
        self.command = command
        self.url = url
        self.own = own
        """The executor id of this command's own worker (``None``: it runs no tasks)."""

    def requeued(self, executor: str, run_ids: list[str]) -> None:
        taker = "this command runs them" if self.own is not None else "a worker runs them"
        self._print(
            f"{len(run_ids)} task(s) ({_names(run_ids)}) were left running by {executor}, "
            f"whose process has stopped: back on the queue, {taker}"
        )

    def idle(self, now: BatchProgress, seconds: float) -> None:
        worker = command_line(["worker", "--database-url", self.url])
        if now.queued and self.own is None:
            self._print(
                f"{now.queued} task(s) queued and none has moved for {seconds:.0f} s: is a "
                f"worker serving the queue? Start one with: {worker}"
            )
        others = {e: ids for e, ids in now.running_under.items() if e != self.own}
        if others:
            held = sum(len(ids) for ids in others.values())
            first = sorted(others)[0]
            requeue = command_line(["worker", "--database-url", self.url, "--requeue", first])
            self._print(
                f"{held} task(s) running under {_names(sorted(others), 3)} and none has "
                f"ended for {seconds:.0f} s; if that worker has stopped for good, put its "
                f"tasks back on the queue with: {requeue}"
            )

    def _print(self, text: str) -> None:
        _say(one_line(f"agentfsm {self.command}: {text}", 2000))


def _left_in_slot(command: str, worker: Any, taken: frozenset[str]) -> None:
    """One line naming the tasks of others this command's worker leaves in its slot."""
    if taken:
        _say(
            one_line(
                f"agentfsm {command}: the {len(taken)} task(s) of other batches its worker "
                f"was running ({_names(sorted(taken))}) stay pending under "
                f"{worker.executor_id}: a batch waiting on them, or the next worker started "
                "on this machine, puts them back on the queue",
                2000,
            )
        )


def _finish_taken(
    command: str,
    worker: Any,
    own: set[str],
    client: DBOSClient,
    status: DatabaseStatus,
    database_wait: float | None,
    quiet: bool,
) -> int | None:
    """Once the command's own tasks have ended: its worker takes no more, and the tasks of
    others it took are finished before it exits (rather than left pending in its slot,
    where nobody runs them until a worker starts there). ``None`` when they ended; 130
    after Ctrl-C, 1 when the database stopped answering for ``database_wait`` seconds."""
    from agentfsm.adapters.durable import DatabaseUnreachable, Outage, progress, read_patiently

    worker.stop_taking()
    taken = worker.running() - own
    if not taken:
        return None
    if not quiet:
        _say(
            one_line(
                f"agentfsm {command}: its tasks have ended; finishing the {len(taken)} task(s) "
                f"of other batches its worker took ({_names(sorted(taken))}) before it exits",
                2000,
            )
        )

    async def until_ended() -> None:
        outage = Outage(database_wait)
        while worker.running() & taken:
            now = await read_patiently(outage, status.waiting, progress, list(taken), client=client)
            if now.finished:
                return
            await asyncio.sleep(0.5)

    try:
        asyncio.run(until_ended())
    except KeyboardInterrupt:
        _left_in_slot(command, worker, worker.running() & taken)
        return 130
    except DatabaseUnreachable as gone:
        status.gave_up(gone.seconds, gone.reason, "stopping")
        _left_in_slot(command, worker, worker.running() & taken)
        return 1
    return None


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
    (:func:`blamed_option`) left for the user to fill in.

    The command's worker takes any task of the queue while it waits; once its own tasks
    have ended it takes no more and finishes the ones it took before it returns. Tasks
    left running by a stopped worker of this machine are put back on the queue, and tasks
    nobody seems to run are said, with the command that gets them run."""
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
        notices = _Notices(command, url, worker.executor_id if worker is not None else None)
        found = asyncio.run(
            gather_results(
                ids,
                client=client,
                on_progress=view,
                interval=min(poll, 0.5),
                on_wait=view.waiting,
                database_wait=database_wait,
                database_url=url,
                on_requeued=notices.requeued,
                on_idle=notices.idle,
            )
        )
        view.close()
        code = _report(command, found, tasks, out, endpoints, retry_with)
        if worker is not None:
            left = _finish_taken(command, worker, set(ids), client, status, database_wait, quiet)
            code = left if left is not None else code
        return code
    except KeyboardInterrupt:
        view.close()
        taken = worker.running() - set(ids) if worker is not None else frozenset()
        stop_meanwhile()
        _pending(command, ids, client, view, finish_with, "interrupted")
        _left_in_slot(command, worker, taken)
        return 130
    except DatabaseUnreachable as gone:
        view.close()
        taken = worker.running() - set(ids) if worker is not None else frozenset()
        stop_meanwhile()
        status.gave_up(gone.seconds, gone.reason, "the tasks stay in the database")
        _pending(command, ids, client, view, finish_with, "when it answers again")
        _left_in_slot(command, worker, taken)
        return 1
    finally:
        view.close()
        if stopping is not None:
            stopping.join()
        elif worker is not None:
            stop_worker(worker)


def _report(
    command: str,
    found: list[TaskResult],
    tasks: Mapping[str, str],
    out: str | None,
    endpoints: Mapping[str, Endpoint] | None,
    retry_with: Callable[[tuple[str, str] | None], str],
) -> int:
    """The result lines, one line per failed task and the command that retries them;
    the exit code (1 when a task failed)."""
    reported = [evolve(r, id=tasks[r.id], run=r.id if r.id != tasks[r.id] else None) for r in found]
    _write(reported, out)
    failed = [r for r in reported if r.status != "SUCCESS"]
    for result in failed:
        endpoint = endpoints.get(result.id) if endpoints is not None else None
        _say(_failure_line(command, result, endpoint))
    if failed:
        blamed = blamed_option(failed)
        fix = (
            f"give the right {blamed[0]}"
            if blamed is not None
            else "fix the cause (options may change)"
        )
        _say(
            f"agentfsm {command}: {len(failed)} of {len(reported)} task(s) failed; {fix}, "
            f"then rerun them with: {retry_with(blamed)}"
        )
    return 1 if failed else 0
