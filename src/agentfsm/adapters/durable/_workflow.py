"""The durable run: a DBOS workflow around one agent run, and the API to start, await,
resume and list such runs.

The workflow builds the agent from its :class:`~.spec.RunSpec` (through a registered
factory), sets :data:`~agentfsm.engine._steps.current_step_runner` to a
:class:`~.steps.DbosStepRunner` and runs the agent, recording into the spec's session
file. Each (re)execution rewrites that file from the start: the replay regenerates every
record, so the file ends as an uninterrupted run's (timestamps aside).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSClient, SetWorkflowID, WorkflowHandleAsync

from agentfsm.adapters.sessions import SessionHandle
from agentfsm.engine import AgentEvent, LoopOutcome, current_step_runner

from ._spec import DurableAgent, DurableEvent, RunInfo, RunSpec, lookup_factory
from ._steps import DbosStepRunner

__all__ = [
    "UNFINISHED",
    "WORKFLOW_NAME",
    "fork",
    "gather",
    "list_runs",
    "listen",
    "result",
    "resume",
    "running_here",
    "spec_of",
    "submit",
]

WORKFLOW_NAME = "agentfsm.durable_run"
"""The DBOS workflow name of a durable run."""
UNFINISHED = ("PENDING", "ENQUEUED")
"""DBOS statuses of a run that has not finished (a killed process leaves ``PENDING``)."""

EventListener = Callable[[DurableEvent], None]
_listeners: dict[str, EventListener] = {}
_running: set[str] = set()


def running_here() -> frozenset[str]:
    """The ids of the durable runs executing in this process now."""
    return frozenset(_running)


def _listener(run_id: str) -> EventListener | None:
    return _listeners.get(run_id) or _listeners.get("*")


def listen(on_event: EventListener, run_id: str | None = None) -> Callable[[], None]:
    """Send the events of run ``run_id`` (of every run in this process when ``None``) to
    ``on_event``; returns the unsubscriber. Runs DBOS recovers execute on DBOS's own
    event-loop thread: their events arrive there."""
    key = run_id or "*"
    _listeners[key] = on_event

    def unsubscribe() -> None:
        if _listeners.get(key) is on_event:
            del _listeners[key]

    return unsubscribe


@contextlib.asynccontextmanager
async def _agent(spec: RunSpec) -> AsyncIterator[DurableAgent]:
    built = lookup_factory(spec.factory)(spec)
    if isinstance(built, contextlib.AbstractAsyncContextManager):
        async with built as agent:
            yield agent
    else:
        yield built


def _fresh_session(path: Path) -> SessionHandle:
    """The run's session file, emptied: this execution writes every record again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return SessionHandle(path)


@DBOS.workflow(name=WORKFLOW_NAME)
async def durable_run(spec_data: dict[str, Any]) -> LoopOutcome:
    """One agent run as a DBOS workflow (its input: ``RunSpec.to_dict()``)."""
    spec = RunSpec.from_dict(spec_data)
    run_id = DBOS.workflow_id or spec.run_id

    def deliver(event: AgentEvent, replayed: bool) -> None:
        listener = _listener(run_id)
        if listener is not None:
            listener(DurableEvent(run_id, event, replayed))

    runner = DbosStepRunner(deliver)
    token = current_step_runner.set(runner)
    _running.add(run_id)
    try:
        async with _agent(spec) as agent:
            unsubscribe = agent.events.on("*", runner.on_event)
            try:
                handle = _fresh_session(Path(spec.session_path))
                return await agent.run(spec.prompt, session=handle)
            finally:
                unsubscribe()
                runner.finish()
    finally:
        current_step_runner.reset(token)
        _running.discard(run_id)


async def submit(
    spec: RunSpec, *, run_id: str | None = None, on_event: EventListener | None = None
) -> str:
    """Start a durable run in this process (DBOS must be launched); returns its id.

    ``run_id`` defaults to the session file's name. Submitting an id again is idempotent:
    a finished run is not run again. ``on_event`` receives every event, replayed ones
    marked.
    """
    run_id = run_id or spec.run_id
    if on_event is not None:
        _listeners[run_id] = on_event
    with SetWorkflowID(run_id):
        await DBOS.start_workflow_async(durable_run, spec.to_dict())
    return run_id


async def result(run_id: str) -> LoopOutcome:
    """Wait for run ``run_id`` to finish; its outcome, or the error that ended it."""
    try:
        handle: WorkflowHandleAsync[LoopOutcome] = await DBOS.retrieve_workflow_async(run_id)
        outcome: LoopOutcome = await handle.get_result()
        return outcome
    finally:
        _listeners.pop(run_id, None)


async def gather(run_ids: Sequence[str]) -> list[LoopOutcome]:
    """The outcomes of several runs, in order (the first error is raised)."""
    return list(await asyncio.gather(*(result(run_id) for run_id in run_ids)))


async def resume(run_id: str, *, on_event: EventListener | None = None) -> LoopOutcome:
    """Finish an unfinished run (its steps recorded so far are replayed, not paid again).

    DBOS runs it (on its own event loop thread: ``on_event`` is called there); the run's
    agent factory must be registered in this process.
    """
    if on_event is not None:
        _listeners[run_id] = on_event
    await DBOS.resume_workflow_async(run_id)
    return await result(run_id)


async def fork(run_id: str, from_step: int | None = None) -> str:
    """A new run that copies the recorded steps of ``run_id`` before ``from_step`` and
    runs on from there (default: after the last recorded step); returns its id. A run that
    failed on a provider outage continues this way, from its failed step; forking a
    finished run past its last step replays it completely (a determinism check)."""
    if from_step is None:
        steps = await DBOS.list_workflow_steps_async(run_id)
        from_step = max((step["function_id"] for step in steps), default=0) + 1
    handle = await DBOS.fork_workflow_async(run_id, from_step)
    return handle.get_workflow_id()


def _spec_data(status: Any) -> dict[str, Any]:
    """The spec dict a workflow status carries as its input (empty when it has none)."""
    inputs = status.input or {}
    args = inputs.get("args") or ()
    return args[0] if args and isinstance(args[0], dict) else {}


def _info(status: Any, source: Any) -> RunInfo:
    spec = _spec_data(status)
    steps = source.list_workflow_steps(status.workflow_id)
    return RunInfo(
        run_id=status.workflow_id,
        status=str(status.status),
        prompt=str(spec.get("prompt", "")),
        session_path=spec.get("session_path"),
        steps=sum(1 for step in steps if step.get("output") is not None or step.get("error")),
        executor_id=status.executor_id,
        created_at=status.created_at,
    )


def list_runs(
    *,
    unfinished: bool = True,
    run_ids: Sequence[str] | None = None,
    client: DBOSClient | None = None,
) -> list[RunInfo]:
    """Durable runs in the system database, oldest first (only unfinished ones by
    default). Call it outside an event loop, or in a thread. With ``client`` (a
    ``dbos.DBOSClient``) it reads the database without launching DBOS in this process."""
    source: Any = client if client is not None else DBOS
    statuses = source.list_workflows(
        workflow_ids=list(run_ids) if run_ids is not None else None,
        status=list(UNFINISHED) if unfinished else None,
        name=WORKFLOW_NAME,
        load_output=False,
    )
    return [_info(status, source) for status in statuses]


def spec_of(run_id: str, client: DBOSClient | None = None) -> RunSpec | None:
    """The spec run ``run_id`` was started with (``None``: no such durable run)."""
    source: Any = client if client is not None else DBOS
    statuses = source.list_workflows(workflow_ids=[run_id], name=WORKFLOW_NAME, load_output=False)
    for status in statuses:
        data = _spec_data(status)
        if data:
            return RunSpec.from_dict(data)
    return None
