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
import asyncio
import hashlib
import json
import re
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from agentfsm.adapters.sessions import default_session_dir

from . import run_cmd
from ._database_url import check_database_url
from .parser import add_batch_arguments, add_worker_arguments
from .terminal import json_safe

if TYPE_CHECKING:
    from agentfsm.adapters.durable import BatchProgress, RunSpec, TaskResult

# The commands import the durable extra (dbos) when they run, not when the parser is built.

__all__ = ["add_batch_arguments", "add_worker_arguments", "batch", "worker"]

MAX_ID = 200
"""Longest task id (it is the workflow id and names the session file)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class _Usage(run_cmd.UsageError):
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
    where = f"{args.tasks}:{number}"
    try:
        data = json.loads(line)
    except ValueError as error:
        raise _Usage(f"{where}: not JSON ({error})") from None
    if not isinstance(data, dict):
        raise _Usage(f"{where}: a task is a JSON object")
    task_id, prompt = data.get("id"), data.get("prompt")
    if not isinstance(task_id, str) or not 1 <= len(task_id) <= MAX_ID or not task_id.isprintable():
        raise _Usage(f"{where}: id must be a printable string of 1 to {MAX_ID} characters")
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
        session_dir = default_session_dir(workspace)
        try:
            run_cmd.ensure_session_dir(session_dir, "the session folder")
            found = run_cmd.run_settings("agentfsm batch", args, workspace)
        except run_cmd.UsageError as error:
            raise _Usage(f"{where}: workspace {str(workspace)[:200]!r}: {error}") from None
        settings = found.settings
        protected = run_cmd._protected(workspace, session_dir)
        run_cmd._sandbox(args, workspace, settings, protected)  # refused now, not in a worker
        try:
            run_cmd.quirks(args, settings)  # a bad profile is refused now, not in a worker
        except run_cmd.UsageError as error:
            raise _Usage(f"{where}: {error}") from None
        checked[workspace] = found.digest if found.widens else None
    from agentfsm.adapters.durable import RunSpec

    from .durable_cmd import _OPTIONS, CLI_FACTORY, SETTINGS_DIGEST

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


def read_tasks(args: argparse.Namespace) -> dict[str, RunSpec]:
    """The tasks of the file, checked (a duplicate id is a usage error)."""
    path = Path(args.tasks)
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise _Usage(f"cannot read {args.tasks[:200]!r}: {error}") from None
    tasks: dict[str, RunSpec] = {}
    checked: dict[Path, str | None] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        task_id, spec = _task(line, number, path.resolve().parent, args, checked)
        if task_id in tasks:
            raise _Usage(f"{args.tasks}:{number}: duplicate id {task_id[:100]!r}")
        tasks[task_id] = spec
    if not tasks:
        raise _Usage(f"{args.tasks[:200]!r} has no tasks")
    return tasks


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


def _check(args: argparse.Namespace) -> None:
    from agentfsm.adapters.durable import parse_rate

    args.resume = None
    run_cmd._check_numbers(args)
    run_cmd._check_inputs(args, Path("."), None)
    if args.rate is not None:
        try:
            args.rate = parse_rate(args.rate)
        except ValueError as error:
            raise _Usage(f"--rate: {error}") from None
    if args.poll <= 0:
        raise _Usage("--poll must be positive")
    args.database_url = check_database_url(args.database_url)


def batch(args: argparse.Namespace) -> int:
    """``agentfsm batch``; returns the exit code (1 when a task failed)."""
    from agentfsm.adapters.durable import (
        QUEUE_NAME,
        TaskWorker,
        default_database_url,
        enqueue,
        gather_results,
        open_client,
    )

    try:
        _check(args)
        tasks = read_tasks(args)
    except run_cmd.UsageError as error:
        print(f"agentfsm batch: {run_cmd._one_line(str(error))}", file=sys.stderr)
        return 2
    url = args.database_url or default_database_url()
    worker_: Any = None
    view: _ProgressView | None = None
    client = open_client(url)
    try:
        new = enqueue(tasks, client=client)
        if not args.quiet:
            known = len(tasks) - len(new)
            print(
                f"agentfsm batch: {len(new)} task(s) enqueued on {QUEUE_NAME}"
                + (f", {known} already known (not run again)" if known else ""),
                file=sys.stderr,
            )
        if args.detach:
            return 0
        if not args.no_work:
            worker_ = TaskWorker(
                url, concurrency=args.concurrency, rate=args.rate, polling_interval=args.poll
            ).start()
        view = _ProgressView(len(tasks), args.quiet)
        found = asyncio.run(
            gather_results(
                list(tasks), client=client, on_progress=view, interval=min(args.poll, 0.5)
            )
        )
        view.close()
        view = None
        _write(found, args.out)
        return 0 if all(r.status == "SUCCESS" for r in found) else 1
    except KeyboardInterrupt:
        return 130
    except OSError as error:
        print(f"agentfsm batch: {error}", file=sys.stderr)
        return 1
    finally:
        if view is not None:
            view.close()
        if worker_ is not None:
            worker_.stop()
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
    from agentfsm.adapters.durable import (
        QUEUE_NAME,
        TaskWorker,
        default_database_url,
        parse_rate,
        requeue_executor,
    )

    from . import durable_cmd  # noqa: F401  registers the agent factory of CLI tasks

    try:
        url = check_database_url(args.database_url)
    except run_cmd.UsageError as error:
        print(f"agentfsm worker: {run_cmd._one_line(str(error))}", file=sys.stderr)
        return 2
    if args.requeue is not None:
        ids = requeue_executor(args.requeue, url)
        print(f"agentfsm worker: {len(ids)} task(s) of {args.requeue} back on {QUEUE_NAME}")
        return 0
    try:
        rate = parse_rate(args.rate) if args.rate is not None else None
    except ValueError as error:
        print(f"agentfsm worker: --rate: {error}", file=sys.stderr)
        return 2
    stop = threading.Event()
    restore = _on_signals(stop)
    try:
        with TaskWorker(
            url,
            concurrency=args.concurrency,
            rate=rate,
            executor_id=args.executor_id,
            polling_interval=args.poll,
        ) as serving:
            print(
                f"agentfsm worker {serving.executor_id}: serving {QUEUE_NAME} "
                f"(concurrency {args.concurrency}); Ctrl-C stops it",
                file=sys.stderr,
                flush=True,
            )
            while not stop.wait(0.5):
                pass
            print(f"agentfsm worker {serving.executor_id}: stopping", file=sys.stderr, flush=True)
    finally:
        restore()
    return 0
