"""Durable runs on DBOS: every effect a recorded step, a killed run resumed without paying
again for the steps it completed (see ``docs/durable.md``).

Needs the ``durable`` extra (``pip install 'agentfsm[durable]'``). Importing this package
registers the durable run's DBOS workflow.
"""

from agentfsm._deprecated import package_getattr as _package_getattr

from ._queue import (
    APPLICATION_VERSION,
    WORKFLOW_FORMAT,
    BatchProgress,
    TaskResult,
    enqueue,
    gather_results,
    open_client,
    progress,
    results,
)
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
from ._workflow import (
    fork,
    gather,
    list_runs,
    listen,
    result,
    resume,
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
    "RunInfo",
    "RunSpec",
    "StepFailed",
    "StepPreamble",
    "TaskResult",
    "TaskWorker",
    "WORKFLOW_FORMAT",
    "agent_factory",
    "default_database_url",
    "enqueue",
    "fork",
    "gather",
    "gather_results",
    "list_runs",
    "listen",
    "open_client",
    "progress",
    "register_agent_factory",
    "requeue_executor",
    "result",
    "results",
    "resume",
    "submit",
]

__getattr__ = _package_getattr(__name__)
