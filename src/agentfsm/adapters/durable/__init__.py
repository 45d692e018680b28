"""Durable runs on DBOS: every effect a recorded step, a killed run resumed without paying
again for the steps it completed (see ``docs/durable.md``).

Needs the ``durable`` extra (``pip install 'agentfsm[durable]'``). Importing this package
registers the durable run's DBOS workflow.
"""

from .queue import (
    APPLICATION_VERSION,
    QUEUE_NAME,
    WORKFLOW_FORMAT,
    BatchProgress,
    TaskResult,
    declare_queue,
    enqueue,
    gather_results,
    open_client,
    parse_rate,
    progress,
    results,
)
from .runtime import DurableRuntime, default_database_url
from .spec import (
    AgentFactory,
    DurableAgent,
    DurableEvent,
    RunInfo,
    RunSpec,
    StepPreamble,
    agent_factory,
    register_agent_factory,
)
from .steps import DbosStepRunner, StepFailed
from .worker import TaskWorker, executor_slot, requeue_executor
from .workflow import (
    UNFINISHED,
    WORKFLOW_NAME,
    durable_run,
    fork,
    gather,
    list_runs,
    listen,
    result,
    resume,
    spec_of,
    submit,
)

__all__ = [
    "APPLICATION_VERSION",
    "AgentFactory",
    "BatchProgress",
    "DbosStepRunner",
    "DurableAgent",
    "DurableEvent",
    "DurableRuntime",
    "QUEUE_NAME",
    "RunInfo",
    "RunSpec",
    "StepFailed",
    "StepPreamble",
    "TaskResult",
    "TaskWorker",
    "UNFINISHED",
    "WORKFLOW_FORMAT",
    "WORKFLOW_NAME",
    "agent_factory",
    "declare_queue",
    "default_database_url",
    "durable_run",
    "enqueue",
    "executor_slot",
    "fork",
    "gather",
    "gather_results",
    "list_runs",
    "listen",
    "open_client",
    "parse_rate",
    "progress",
    "register_agent_factory",
    "requeue_executor",
    "result",
    "results",
    "resume",
    "spec_of",
    "submit",
]
