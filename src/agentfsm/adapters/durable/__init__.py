"""Durable runs on DBOS: every effect a recorded step, a killed run resumed without paying
again for the steps it completed (see ``docs/durable.md``).

Needs the ``durable`` extra (``pip install 'agentfsm[durable]'``). Importing this package
registers the durable run's DBOS workflow.
"""

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
    "AgentFactory",
    "DbosStepRunner",
    "DurableAgent",
    "DurableEvent",
    "DurableRuntime",
    "RunInfo",
    "RunSpec",
    "StepFailed",
    "StepPreamble",
    "UNFINISHED",
    "WORKFLOW_NAME",
    "agent_factory",
    "default_database_url",
    "durable_run",
    "fork",
    "gather",
    "list_runs",
    "listen",
    "register_agent_factory",
    "result",
    "resume",
    "spec_of",
    "submit",
]
