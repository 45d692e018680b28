"""Durable runs on DBOS: every effect a recorded step, a killed run resumed without paying
again for the steps it completed (see ``docs/durable.md``).

Needs the ``durable`` extra (``pip install 'agentfsm[durable]'``). Importing this package
registers the durable run's DBOS workflow.

A name imported here as itself (``x as x``) and left out of ``__all__`` is offered to the
other agentfsm packages only: it is not public API.
"""

from ._outage import DatabaseUnreachable
from ._outage import Outage as Outage
from ._outage import call_in_thread as call_in_thread
from ._outage import is_connection_error as is_connection_error
from ._outage import reason_of as reason_of
from ._queue import (
    APPLICATION_VERSION,
    FAILED,
    RETRY_MARK,
    WORKFLOW_FORMAT,
    Attempt,
    BatchProgress,
    Submission,
    TaskResult,
    attempt_id,
    enqueue,
    gather_results,
    latest_attempts,
    open_client,
    progress,
    results,
    retry_session_path,
    submit_tasks,
    task_of_run,
)
from ._queue import QUEUE_NAME as QUEUE_NAME
from ._queue import parse_rate as parse_rate
from ._queue import read_patiently as read_patiently
from ._runtime import DurableRuntime, default_database_url
from ._spec import (
    AgentFactory,
    DurableAgent,
    DurableEvent,
    RunInfo,
    RunSpec,
    StepPreamble,
    agent_factory,
    register_agent_factory,
)
from ._steps import DbosStepRunner, StepFailed
from ._worker import (
    TaskWorker,
    requeue_executor,
)
from ._workflow import UNFINISHED as UNFINISHED
from ._workflow import (
    fork,
    gather,
    list_runs,
    listen,
    result,
    resume,
    submit,
)
from ._workflow import spec_of as spec_of

__all__ = [
    "APPLICATION_VERSION",
    "AgentFactory",
    "Attempt",
    "BatchProgress",
    "DatabaseUnreachable",
    "DbosStepRunner",
    "DurableAgent",
    "DurableEvent",
    "DurableRuntime",
    "FAILED",
    "RETRY_MARK",
    "RunInfo",
    "RunSpec",
    "StepFailed",
    "StepPreamble",
    "Submission",
    "TaskResult",
    "TaskWorker",
    "WORKFLOW_FORMAT",
    "agent_factory",
    "attempt_id",
    "default_database_url",
    "enqueue",
    "fork",
    "gather",
    "gather_results",
    "latest_attempts",
    "list_runs",
    "listen",
    "open_client",
    "progress",
    "register_agent_factory",
    "requeue_executor",
    "result",
    "results",
    "resume",
    "retry_session_path",
    "submit",
    "submit_tasks",
    "task_of_run",
]
