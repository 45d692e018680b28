"""One path to build and run the loop, shared by :func:`run_conversation` and ``Agent``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentfsm.sandbox import CommandSandbox

from ._context import RunContext
from ._events import AgentEmitter
from ._history import seed_system_prompt
from ._messages import Message
from ._params import LoopOutcome, LoopParams
from ._policy import Policy, PolicySet
from ._protocols import ChatFn, ToolRunner
from ._runner import LoopRunner

__all__ = ["build_run", "run_conversation"]


def build_run(
    chat: ChatFn,
    tools: ToolRunner | None,
    messages: Sequence[Message],
    params: LoopParams,
    *,
    policies: Sequence[Policy] | PolicySet = (),
    emitter: AgentEmitter | None = None,
    interruptible: bool = False,
    deltas: bool = False,
    policy_state: dict[str, Any] | None = None,
    sandbox: CommandSandbox | None = None,
    protected_paths: Sequence[str] = (),
    pinned: int = 0,
) -> LoopRunner:
    """Build one run of the loop: the one path behind :func:`run_conversation` and ``Agent``.

    Seeds the system prompt into a copy of ``messages``, offers the tools' specs, builds the
    run's :class:`RunContext` and its runner (``run()`` it once). ``sandbox``,
    ``protected_paths`` (absolute) and ``pinned`` are the run's (see :class:`RunContext`).
    """
    history = seed_system_prompt(messages, params.system_prompt)
    specs = tuple(tools.specs()) if tools is not None else ()
    ctx = RunContext(
        params=params,
        history=history,
        tool_specs=specs,
        interruptible=interruptible,
        policy_state=policy_state if policy_state is not None else {},
        sandbox=sandbox,
        protected_paths=tuple(protected_paths),
        pinned=pinned,
    )
    return LoopRunner(chat, tools, ctx, emitter=emitter, policies=policies, deltas=deltas)


async def run_conversation(
    chat: ChatFn,
    tools: ToolRunner | None,
    messages: Sequence[Message],
    params: LoopParams,
    *,
    emitter: AgentEmitter | None = None,
    policies: Sequence[Policy] = (),
) -> LoopOutcome:
    """Run the agent loop: call the model, run the tools it asks for, repeat.

    Args:
        chat: The chat model.
        tools: The tool runner (``None``: no tools are offered).
        messages: The conversation so far; never mutated.
        params: Budget, sampling, compression and abort settings.
        emitter: Receives every event of the run.
        policies: Policy objects consulted at the machine's fixed points.

    Returns:
        The outcome; ``outcome.messages`` is the working history, mutated in place.

    Raises:
        TypeError: a policy implements no hook (checked before the run starts).
        Exception: whatever the chat call raised, after an ``error`` event; a
            ``PolicyError`` naming the policy when a policy hook raised.
    """
    runner = build_run(chat, tools, messages, params, policies=policies, emitter=emitter)
    return await runner.run()
