"""``agentfsm run --durable``, ``agentfsm runs list`` and ``agentfsm runs resume ID``.

A durable run is a DBOS workflow recorded in the system database
``$XDG_STATE_HOME/agentfsm/durable.sqlite`` (``--database-url`` for another): every chat
call, tool call and verify command is a step. A run whose process died is finished by
``agentfsm runs resume ID``, or by the next ``agentfsm run --durable`` (DBOS recovers
the unfinished runs of this machine when it starts), without paying again for the steps
it completed. See ``docs/durable.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentfsm.adapters.durable import (
    APPLICATION_VERSION,
    UNFINISHED,
    DurableEvent,
    DurableRuntime,
    RunInfo,
    RunSpec,
    StepPreamble,
    default_database_url,
    list_runs,
    reason_of,
    register_agent_factory,
    result,
    resume,
    retry_session_path,
    spec_of,
    submit,
)
from agentfsm.adapters.providers import LOCAL_CONTEXT_TOKENS
from agentfsm.adapters.sessions import SessionStore
from agentfsm.agent import Agent, WorkspacePreamble
from agentfsm.engine import AgentEmitter, LoopOutcome, printable

from . import _run_cmd as run_cmd
from ._agent_build import build_agent
from ._database_url import check_database_url, hide_secrets
from ._errors import UsageError
from ._logfile import KEY_ENVS, LIBRARY_LOGGERS, SDK_LOGGERS, logs_to_file
from ._render import QuietRenderer
from ._report import Endpoint, RunTally, describe_failure, run_end
from ._run_html import attach_picture
from ._settings_trust import check_submitted, read_run_settings
from ._terminal import cells, fit, one_line

__all__ = ["CLI_FACTORY", "SETTINGS_DIGEST", "run_durable", "runs"]

CLI_FACTORY = "agentfsm.cli"
"""The agent factory of durable CLI runs: the agent ``agentfsm run`` builds."""
SETTINGS_DIGEST = "settings_sha256"
"""The option holding the SHA-256 of the widening workspace settings agreed to at
submission (``None``: they widen nothing); a run whose file differs when it runs fails."""
_OPTIONS = (
    "provider",
    "model",
    "base_url",
    "api_key_env",
    "max_turns",
    "preset",
    "verify_command",
    "allow_network",
    "no_sandbox",
    "temperature",
    "max_tokens",
    "context_budget",
    "quirk",
    "wire",
)


class _Command:
    """What the command running durable runs in this process lends their agents: its name,
    whether the ``--no-sandbox`` warning was printed (once per command, not per task), and
    the ``--otel`` instrumentation."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.begin("run")

    def begin(
        self,
        name: str,
        *,
        warned: bool = False,
        instrument: Any = None,
        report_tasks: bool = False,
    ) -> None:
        """A new command in this process (``run``, ``batch``, ``worker``, ``runs``);
        ``report_tasks``: print one line for each run that ends or fails here (``worker``)."""
        with self.lock:
            self.name, self.warned, self.instrument = name, warned, instrument
            self.report_tasks = report_tasks

    def task_failed(self, error: Exception) -> None:
        if not self.report_tasks:
            return
        from dbos import DBOS

        line = f"agentfsm {self.name}: task {DBOS.workflow_id!r} failed: "
        line += f"{type(error).__name__}: {error}"
        print(one_line(line, 500), file=sys.stderr, flush=True)

    def task_done(self, ending: _Ending, seconds: float) -> None:
        if not self.report_tasks:
            return
        from dbos import DBOS

        calls = f"{ending.calls} model call{'s' if ending.calls != 1 else ''}"
        line = f"agentfsm {self.name}: task {DBOS.workflow_id!r} done "
        line += f"({ending.reason}, {calls}, {seconds:.1f} s)"
        print(one_line(line, 500), file=sys.stderr, flush=True)

    def warn_unsandboxed(self) -> None:
        with self.lock:
            if self.warned:
                return
            self.warned = True
        print(f"agentfsm {self.name}: {run_cmd.NO_SANDBOX_WARNING}", file=sys.stderr, flush=True)


class _Ending:
    """How a task's run ended, from its events: its stop reason and model calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.reason = "ended"

    def __call__(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind == "llm_end":
            self.calls += 1
        elif kind in _REASONS:
            self.reason = _REASONS[kind]


_REASONS = {"final": "final", "budget_exhausted": "budget", "policy_stop": "policy"}

_command = _Command()
"""The command running durable runs in this process (see :class:`_Command`)."""


@contextlib.asynccontextmanager
async def _cli_agent(spec: RunSpec) -> AsyncIterator[Agent]:
    """The agent of a durable CLI run, rebuilt from its spec (in whichever process runs it);
    a run that fails, or ends, is told to the command (``worker`` prints one line)."""
    started = time.monotonic()
    ending = _Ending()
    try:
        async with _built_agent(spec) as agent:
            agent.events.on("*", ending)
            yield agent
    except Exception as error:
        _command.task_failed(error)
        raise
    _command.task_done(ending, time.monotonic() - started)


@contextlib.asynccontextmanager
async def _built_agent(spec: RunSpec) -> AsyncIterator[Agent]:
    options = spec.options
    args = argparse.Namespace(
        **{name: options.get(name) for name in _OPTIONS},
        resume=None,
        instrument=_command.instrument,
    )
    workspace, session_dir = Path(options["workspace"]), Path(options["session_dir"])
    found = read_run_settings(workspace)
    check_submitted(found, options.get(SETTINGS_DIGEST))
    settings = found.settings
    protected = run_cmd._protected(workspace, session_dir)
    sandbox = run_cmd._sandbox(args, workspace, settings, protected, warn=False)
    if args.no_sandbox:
        _command.warn_unsandboxed()
    key_env = run_cmd._key_env(args)
    if key_env is not None:
        KEY_ENVS.add(key_env)  # its value is redacted from the log file
    async with contextlib.AsyncExitStack() as stack:
        chat = await run_cmd._chat(args, QuietRenderer(), stack, settings)
        local = run_cmd._provider(args) == "local"
        budget = args.context_budget or (LOCAL_CONTEXT_TOKENS * 3 // 4 if local else None)
        yield build_agent(
            args,
            chat=chat,
            workspace=workspace,
            session_dir=session_dir,
            sandbox=sandbox,
            protected=protected,
            settings=settings,
            system_prompt=run_cmd.SYSTEM_PROMPT,
            budget=budget,
            max_tokens=args.max_tokens or (run_cmd.LOCAL_MAX_TOKENS if local else None),
            preamble=StepPreamble(WorkspacePreamble(workspace, exclude=protected)),
        )


register_agent_factory(CLI_FACTORY, _cli_agent)


def _runtime(args: argparse.Namespace) -> DurableRuntime:
    """DBOS for this command, under an executor id of its own: DBOS's launch then recovers
    nothing by itself (it would run every unfinished run of the machine in this process,
    and cut them off when the command ends); ``runs resume ID`` picks one explicitly. Nor
    does it take tasks of the task queue (it would cut those off too). The application
    version is pinned (:data:`APPLICATION_VERSION`), so a later agentfsm of the same
    workflow format, on this machine or another, resumes the run."""
    return DurableRuntime(
        getattr(args, "database_url", None),
        executor_id=f"agentfsm-cli-{uuid.uuid4().hex[:12]}",
        application_version=APPLICATION_VERSION,
        queues=(),
    )


def _unfinished_note(own: str) -> None:
    others = [info.run_id for info in list_runs() if info.run_id != own]
    if others:
        print(
            f"agentfsm run: {len(others)} unfinished durable run(s), e.g. {others[0]}: "
            "agentfsm runs list, agentfsm runs resume ID",
            file=sys.stderr,
        )


class _Shown:
    """Forwards a durable run's events to the renderer (live ones) and the tally (all)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.renderer = run_cmd._renderer(args)
        self.tally = RunTally()
        self.live = AgentEmitter()
        self.every = AgentEmitter()
        self.renderer.attach(self.live)
        self.tally.attach(self.every)
        self.replayed = 0

    def __call__(self, event: DurableEvent) -> None:
        self.every.emit(event.event)
        if event.replayed:
            self.replayed += 1
        else:
            self.live.emit(event.event)

    def finish(
        self,
        args: argparse.Namespace,
        outcome: LoopOutcome | None,
        error: BaseException | None,
        session: str,
    ) -> int:
        if self.replayed:
            self.renderer.progress(f"replayed {self.replayed} recorded events")
        reason: str = outcome.stopped_reason if outcome is not None else "failed"
        code = run_cmd.exit_code(outcome) if outcome is not None else 1
        key_env = run_cmd._key_env(args)
        secret = os.environ.get(key_env) if key_env else None
        end = run_end(
            stopped_reason=reason,
            exit_code=code,
            tally=self.tally,
            outcome=outcome,
            session=Path(session),
            error=describe_failure(error, run_cmd._endpoint(args), (secret,) if secret else ())
            if error is not None
            else None,
        )
        attach_picture(end, getattr(args, "html", None))
        self.renderer.finish(end, outcome)
        return code


async def _await(run_id: str) -> tuple[LoopOutcome | None, BaseException | None]:
    try:
        return await result(run_id), None
    except Exception as error:
        return None, error


def run_durable(args: argparse.Namespace) -> int:
    """``agentfsm run --durable``: the run as a DBOS workflow; returns the exit code."""
    try:
        if args.resume is not None:
            raise UsageError(
                "--durable starts a new run; resume one with `agentfsm runs resume ID`"
            )
        run_cmd.check_prompt(args.prompt)
        run_cmd._check_numbers(args)
        refuse_stored_credentials(args)
        args.database_url = check_database_url(args.database_url)
        workspace, session_dir = run_cmd._paths(args)
        run_cmd._check_inputs(args, session_dir, None)
        found = run_cmd.run_settings("agentfsm run", args, workspace)
        settings = found.settings
        protected = run_cmd._protected(workspace, session_dir)
        run_cmd._sandbox(args, workspace, settings, protected)  # refused now, not at a step
        run_cmd.quirks(args, settings)  # a bad profile too
        option = "--session-dir" if args.session_dir else "session folder"
        run_cmd.ensure_session_dir(session_dir, option)
    except UsageError as error:
        print(f"agentfsm run: {one_line(str(error))}", file=sys.stderr)
        return 2
    handle = SessionStore(session_dir).new_handle()
    options: dict[str, Any] = {name: getattr(args, name) for name in _OPTIONS}
    options.update(workspace=str(workspace), session_dir=str(session_dir))
    options[SETTINGS_DIGEST] = found.digest if found.widens else None
    spec = RunSpec(
        prompt=args.prompt, factory=CLI_FACTORY, session_path=str(handle.path), options=options
    )
    shown = _Shown(args)

    async def drive() -> int:
        run_id = await submit(spec, on_event=shown)
        if args.json is False and args.quiet is False:
            shown.renderer.progress(f"durable run {run_id} (resume: agentfsm runs resume {run_id})")
        outcome, error = await _await(run_id)
        code = shown.finish(args, outcome, error, spec.session_path)
        if error is not None and not args.json:
            details = f"; details in {logs[0]}" if logs and logs[0] is not None else ""
            print(
                f"agentfsm run: the run failed; after fixing the cause, run it again with: "
                f"agentfsm runs retry {run_id} (with --base-url, --model … to change them)"
                f"{details}",
                file=sys.stderr,
            )
        return code

    logs: list[Path | None] = []

    _command.begin("run", warned=True, instrument=getattr(args, "instrument", None))
    engine_log = logging.getLogger("agentfsm.engine")
    reported = run_cmd._ReportedHere()  # the failure is reported once, by the renderer
    engine_log.addFilter(reported)
    try:
        with (
            logs_to_file(
                "run",
                verbose=getattr(args, "verbose", False),
                loggers=(*SDK_LOGGERS, *LIBRARY_LOGGERS),
            ) as log,
            _runtime(args),
        ):
            logs.append(log)
            _unfinished_note(spec.run_id)
            return asyncio.run(drive())
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # the database failed (a full disk): no step is lost
        import sqlalchemy as sa

        if not isinstance(error, (OSError, sa.exc.SQLAlchemyError)):
            raise
        reason = hide_secrets(reason_of(error))
        print(
            one_line(
                f"agentfsm run: the durable run stopped: {reason}; the steps recorded are "
                f"kept: once the database can be written, `agentfsm runs resume {spec.run_id}` "
                "continues it (if it started)",
                2000,
            ),
            file=sys.stderr,
        )
        return 1
    finally:
        engine_log.removeFilter(reported)


def _list(args: argparse.Namespace) -> int:
    """Reads the database with a DBOS client: launching DBOS here could pick up runs."""
    url = args.database_url or default_database_url()
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        runs: list[RunInfo] = []
    else:
        from agentfsm.adapters.durable import open_client

        client = open_client(url)  # creates a PostgreSQL system database that is not there yet
        try:
            runs = list_runs(unfinished=not args.all, client=client)
        finally:
            client.destroy()
    if args.json:
        for info in runs:
            print(json.dumps(_jsonable(info)))
        return 0
    if not runs:
        print("no unfinished durable runs" if not args.all else "no durable runs")
        return 0
    # Columns measured in terminal cells (a wide character takes two), every text
    # sanitized first: a control character in an id or prompt neither acts nor shifts them.
    rows = [(one_line(i.run_id, 200), one_line(i.status, 20), i.steps, i.prompt) for i in runs]
    width = max(cells(run_id) for run_id, *_ in rows)
    for run_id, state, steps, prompt in rows:
        shown = fit(one_line(prompt, 200), 60).rstrip()
        line = f"{fit(run_id, width)}  {state:<9} {steps:>4} steps  {shown}"
        print(printable(line, sys.stdout))
    return 0


def _jsonable(info: RunInfo) -> dict[str, Any]:
    return {
        "id": info.run_id,
        "status": info.status,
        "steps": info.steps,
        "prompt": info.prompt,
        "session": info.session_path,
        "executor": info.executor_id,
        "created_at": info.created_at,
    }


def _resume(args: argparse.Namespace) -> int:
    spec = spec_of(args.id)
    if spec is None:
        print(f"agentfsm runs resume: no durable run {args.id[:200]!r}", file=sys.stderr)
        return 2
    [info] = list_runs(unfinished=False, run_ids=[args.id])
    if info.status not in UNFINISHED:
        print(
            f"agentfsm runs resume: run {args.id} is {info.status}, not unfinished", file=sys.stderr
        )
        return 2
    run_args = argparse.Namespace(
        **{name: spec.options.get(name) for name in _OPTIONS},
        json=args.json,
        quiet=args.quiet,
    )
    shown = _Shown(run_args)

    async def drive() -> int:
        try:
            outcome, error = await resume(args.id, on_event=shown), None
        except Exception as failure:
            outcome, error = None, failure
        return shown.finish(run_args, outcome, error, spec.session_path)

    return asyncio.run(drive())


def runs(args: argparse.Namespace) -> int:
    """``agentfsm runs list|resume``; returns the exit code."""
    try:
        args.database_url = check_database_url(args.database_url, create=args.action != "list")
    except UsageError as error:
        print(f"agentfsm runs {args.action}: {one_line(str(error))}", file=sys.stderr)
        return 2
    from ._database_wait import leave

    _command.begin("runs")
    try:
        with logs_to_file(
            f"runs-{args.action}", verbose=args.verbose, loggers=(*SDK_LOGGERS, *LIBRARY_LOGGERS)
        ):
            if args.action == "list":
                return _list(args)
            if args.action == "retry":
                return leave(_retry(args))
            with _runtime(args):
                return _resume(args)
    except KeyboardInterrupt:
        return leave(130)


def refuse_stored_credentials(args: argparse.Namespace) -> None:
    """A ``--base-url`` holding credentials (``user:password@``) is refused: the options of
    a durable run are stored in the database, readable by whoever reads it (the key is read
    from the environment of the process that runs the task, ``--api-key-env``)."""
    base_url = getattr(args, "base_url", None)
    if base_url and "@" in urlsplit(base_url).netloc:
        raise UsageError(
            "--base-url holds credentials (user:password@): a durable run's options are "
            "stored in the database; give the key through --api-key-env instead"
        )


_PROVIDER_OPTIONS = (
    "provider",
    "model",
    "base_url",
    "api_key_env",
    "quirk",
    "temperature",
    "max_tokens",
    "context_budget",
)
"""What ``runs retry`` takes from its own command line when it names a provider."""
_NAMES_PROVIDER = ("provider", "model", "base_url", "api_key_env")


def _retry_spec(args: argparse.Namespace, spec: RunSpec) -> RunSpec:
    """The failed run's spec (prompt, workspace, policies, sandbox) with the provider of
    this command line when it names one (else the run's own), decided now, recording from
    the first attempt's session file name (:func:`submit_tasks` names the attempt's own)."""
    options = dict(spec.options)
    if any(getattr(args, name) for name in _NAMES_PROVIDER):
        options.update({name: getattr(args, name) for name in _PROVIDER_OPTIONS})
        options["provider"] = run_cmd._provider(args)
    return RunSpec(
        prompt=spec.prompt,
        factory=spec.factory,
        session_path=retry_session_path(spec.session_path, 1),
        options=options,
    )


def _spec_endpoint(spec: RunSpec) -> Endpoint:
    """Where a run's calls go, from its spec (to explain its failure)."""
    return run_cmd._endpoint(
        argparse.Namespace(
            provider=spec.options.get("provider"),
            base_url=spec.options.get("base_url"),
            api_key_env=spec.options.get("api_key_env"),
        )
    )


def _retry(args: argparse.Namespace) -> int:
    """``agentfsm runs retry ID...``: a new attempt of each failed run, on the task queue,
    run by this process; one result line per run."""
    from agentfsm.adapters.durable import (
        FAILED,
        DatabaseUnreachable,
        latest_attempts,
        open_client,
        submit_tasks,
        task_of_run,
    )

    from ._database_wait import DatabaseStatus
    from ._queue_work import command_line, work_queue

    if any(getattr(args, name) for name in _NAMES_PROVIDER):
        checked = argparse.Namespace(**vars(args), resume=None, max_turns=1)
        try:
            run_cmd._check_numbers(checked)
            run_cmd._check_inputs(checked, Path("."), None)
            refuse_stored_credentials(args)
        except UsageError as error:
            print(f"agentfsm runs retry: {one_line(str(error))}", file=sys.stderr)
            return 2
    status = DatabaseStatus("runs retry", args.database_url, args.database_wait)
    try:  # creating or migrating the database waits on it like any read
        client = status.patiently(
            lambda _: open_client(args.database_url, retry_connection_errors=False)
        )
    except DatabaseUnreachable as gone:
        status.gave_up(gone.seconds, gone.reason, "nothing was retried")
        return 1
    try:
        tasks: dict[str, RunSpec] = {}
        task_ids = [task_of_run(run_id)[0] for run_id in args.ids]
        latest = status.patiently(lambda _: latest_attempts(client, task_ids))
        for run_id in args.ids:
            task = task_of_run(run_id)[0]
            attempt = latest.get(task)
            problem = None
            if attempt is None or attempt.spec is None:
                problem = "no such durable run"
            elif attempt.spec.factory != CLI_FACTORY:
                problem = f"built by the agent factory {attempt.spec.factory!r}, not the CLI's"
            elif attempt.status in UNFINISHED and attempt.attempt > 1:
                # A retry cut off (the command killed): this command runs it on.
                print(
                    f"agentfsm runs retry: continuing {attempt.run_id} ({attempt.status})",
                    file=sys.stderr,
                )
            elif attempt.status in UNFINISHED:
                problem = (
                    f"it is {attempt.status}, not failed: finish it with "
                    f"agentfsm runs resume {attempt.run_id}"
                )
            elif attempt.status not in FAILED:
                problem = f"its latest attempt {attempt.run_id} is {attempt.status}, not failed"
            if problem is not None or attempt is None or attempt.spec is None:
                line = f"agentfsm runs retry: {run_id[:200]!r}: {problem}"
                print(one_line(line), file=sys.stderr)
                return 2
            tasks[task] = _retry_spec(args, attempt.spec)
        submitted = status.patiently(
            lambda heard: submit_tasks(tasks, client=client, retry_failed=True, on_answer=heard)
        )
        if not args.quiet and submitted.retried:
            names = ", ".join(submitted.runs[task] for task in submitted.retried)
            print(f"agentfsm runs retry: enqueued {names}", file=sys.stderr)
        return work_queue(
            "runs retry",
            url=args.database_url,
            client=client,
            runs=submitted.runs,
            work=True,
            quiet=args.quiet,
            out=args.out,
            finish_with=command_line(getattr(args, "argv", None) or ["runs", "retry", *args.ids]),
            retry_with=lambda blamed: command_line(
                ["runs", "retry", *submitted.runs.values()], blank=dict([blamed]) if blamed else {}
            ),
            database_wait=args.database_wait,
            endpoints={task: _spec_endpoint(spec) for task, spec in tasks.items()},
        )
    except DatabaseUnreachable as gone:
        status.gave_up(gone.seconds, gone.reason, "nothing was retried")
        return 1
    finally:
        client.destroy()
