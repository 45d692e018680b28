"""What a durable run is given and what it reports: plain, serializable data."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol

from attrs import field, frozen

from agentfsm.adapters.sessions import SessionHandle
from agentfsm.engine import AgentEmitter, AgentEvent, LoopOutcome, run_step

__all__ = [
    "AgentFactory",
    "DurableAgent",
    "DurableEvent",
    "RunInfo",
    "RunSpec",
    "StepPreamble",
    "agent_factory",
    "register_agent_factory",
]


@frozen(kw_only=True)
class RunSpec:
    """The input of a durable run: everything needed to build and run it again elsewhere.

    The agent itself cannot be a workflow input; ``factory`` names a function registered
    with :func:`register_agent_factory` (in every process that may run or recover the run)
    that builds it from this spec.
    """

    prompt: str
    """The task."""
    factory: str
    """The registered agent factory's name."""
    session_path: str
    """The session file the run is recorded in; rewritten from the start on recovery."""
    options: Mapping[str, Any] = field(factory=dict)
    """The factory's options: JSON-like values only (they are stored with the run)."""

    def to_dict(self) -> dict[str, Any]:
        """The spec as the workflow's input (a plain dict)."""
        return {
            "prompt": self.prompt,
            "factory": self.factory,
            "session_path": self.session_path,
            "options": dict(self.options),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSpec:
        """The spec a workflow was given."""
        return cls(
            prompt=str(data["prompt"]),
            factory=str(data["factory"]),
            session_path=str(data["session_path"]),
            options=dict(data.get("options") or {}),
        )

    @property
    def run_id(self) -> str:
        """The default workflow id: the session file's name without ``.jsonl``."""
        return Path(self.session_path).stem


class DurableAgent(Protocol):
    """What a factory builds: ``agentfsm.Agent`` has this shape."""

    @property
    def events(self) -> AgentEmitter:
        """Every event of the run."""
        ...

    def run(self, prompt_or_messages: str, /, *, session: SessionHandle) -> Awaitable[LoopOutcome]:
        """Run the agent, recording into ``session``."""
        ...


AgentFactory = Callable[[RunSpec], "DurableAgent | AbstractAsyncContextManager[DurableAgent]"]
"""Builds the agent of a run from its spec: the agent, or an async context manager that
yields it (and closes its clients afterwards)."""

_factories: dict[str, AgentFactory] = {}


def register_agent_factory(name: str, factory: AgentFactory) -> None:
    """Make ``factory`` buildable by name in this process (replaces an earlier one)."""
    _factories[name] = factory


def agent_factory(name: str) -> Callable[[AgentFactory], AgentFactory]:
    """Decorator form of :func:`register_agent_factory`."""

    def register(factory: AgentFactory) -> AgentFactory:
        register_agent_factory(name, factory)
        return factory

    return register


def lookup_factory(name: str) -> AgentFactory:
    try:
        return _factories[name]
    except KeyError:
        raise LookupError(
            f"no agent factory {name!r} is registered in this process "
            f"(registered: {', '.join(sorted(_factories)) or 'none'})"
        ) from None


@frozen
class DurableEvent:
    """One event of a durable run, as the durable API's handlers receive it."""

    run_id: str
    """The workflow id."""
    event: AgentEvent
    """The engine's event, unchanged."""
    replayed: bool
    """Re-emitted while a recovered run replays recorded steps (it was emitted before)."""


@frozen(kw_only=True)
class RunInfo:
    """A durable run as the system database knows it."""

    run_id: str
    status: str
    """DBOS's status: ``PENDING``, ``ENQUEUED``, ``SUCCESS``, ``ERROR``, ``CANCELLED`` …"""
    prompt: str
    session_path: str | None
    steps: int
    """Steps recorded so far."""
    executor_id: str | None
    created_at: int | None
    """Milliseconds since the epoch."""


class StepPreamble:
    """A preamble provider whose rendering is a step (``"preamble"``): a recovered run
    gets the text the first execution rendered, not the workspace as the run left it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def render(self) -> str:
        """The inner provider's text, recorded once."""

        async def render() -> str:
            text = self.inner.render()
            if inspect.isawaitable(text):
                text = await text
            return str(text)

        return await run_step("preamble", render)
