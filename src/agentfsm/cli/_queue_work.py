"""Working and watching queued durable runs, for ``agentfsm batch`` and ``agentfsm runs
retry``: the progress line, one line per failed task, the result lines, and after Ctrl-C
how many tasks are pending and the command that finishes them."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import evolve

from ._terminal import json_safe, one_line, sanitize

if TYPE_CHECKING:
    from dbos import DBOSClient
    from dbos._queue import QueueRateLimit

    from agentfsm.adapters.durable import BatchProgress, TaskResult

__all__ = ["command_line", "work_queue"]


class _ProgressView:
    """The batch's progress on stderr: a rich bar on a terminal (with the ``cli`` extra),
    else a plain line whenever the counts change."""

    def __init__(self, total: int, quiet: bool) -> None:
        self.quiet = quiet
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

    def __call__(self, now: BatchProgress) -> None:
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


def _write(results_: list[TaskResult], out: str | None) -> None:
    lines = "".join(json_safe(json.dumps(r.to_dict(), ensure_ascii=False)) + "\n" for r in results_)
    if out is None:
        sys.stdout.write(lines)
        return
    Path(out).write_text(lines, "utf-8")


_PASSWORD = re.compile(r"(://[^/@:\s]*:)[^@/\s]+@")


def command_line(argv: Sequence[str] | None, extra: str | None = None) -> str:
    """``agentfsm ARGS`` as the user typed them (quoted for a shell, safe on a terminal),
    with ``extra`` appended when it is not there yet. A password in a URL is shown as
    ``***`` (the line may end up in a CI log)."""
    arguments = list(argv or ())
    if extra is not None and extra not in arguments:
        arguments.append(extra)
    hidden = [_PASSWORD.sub(r"\1***@", argument) for argument in arguments]
    note = " (with the database password in place of ***)" if hidden != arguments else ""
    return sanitize(shlex.join(["agentfsm", *hidden])) + note


def _failure_line(command: str, found: TaskResult) -> str:
    reason = one_line(found.error or found.stopped_reason or "no outcome", 300)
    run = f" (run {found.run})" if found.run else ""
    return one_line(f"agentfsm {command}: task {found.id!r}{run} {found.status}: {reason}", 500)


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
    retry_with: str,
) -> int:
    """Wait for ``runs`` (task id -> workflow id) to end, running them in this process
    unless not ``work``; write their result lines; report each failed task in one line.
    Returns 0 (all succeeded), 1 (one failed) or 130 (Ctrl-C: the pending count and
    ``finish_with`` are printed)."""
    from agentfsm.adapters.durable import TaskWorker, gather_results, progress

    worker: Any = None
    view: _ProgressView | None = None
    ids = list(runs.values())
    tasks = {run_id: task for task, run_id in runs.items()}
    try:
        if work:
            worker = TaskWorker(
                url, concurrency=concurrency, rate=rate, polling_interval=poll
            ).start()
        view = _ProgressView(len(ids), quiet)
        found = asyncio.run(
            gather_results(ids, client=client, on_progress=view, interval=min(poll, 0.5))
        )
        view.close()
        view = None
    except KeyboardInterrupt:
        if view is not None:
            view.close()
            view = None
        now = progress(ids, client=client)
        pending = now.total - now.done - now.failed
        print(
            f"agentfsm {command}: interrupted: {pending} of {now.total} task(s) pending "
            f"({now.running} running, {now.queued} queued); finish them with: {finish_with}",
            file=sys.stderr,
            flush=True,
        )
        return 130
    finally:
        if view is not None:
            view.close()
        if worker is not None:
            worker.stop()
    reported = [evolve(r, id=tasks[r.id], run=r.id if r.id != tasks[r.id] else None) for r in found]
    _write(reported, out)
    failed = [r for r in reported if r.status != "SUCCESS"]
    for result in failed:
        print(_failure_line(command, result), file=sys.stderr)
    if failed:
        print(
            f"agentfsm {command}: {len(failed)} of {len(reported)} task(s) failed; after fixing "
            f"the cause (options may change), rerun them with: {retry_with}",
            file=sys.stderr,
        )
    return 1 if failed else 0
