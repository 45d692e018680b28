"""One path to build and run the loop, shared by :func:`run_conversation` and ``Agent``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentfsm.sandbox import CommandSandbox

from ._context import RunContext
from ._events import AgentEmitter
from ._history import seed_system_prompt
from ._messages import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from ._params import LoopOutcome, LoopParams
from ._policy import Policy, PolicySet
from ._protocols import ChatFn, ToolRunner
from ._runner import LoopRunner

__all__ = ["build_run", "check_messages", "run_conversation"]

_MESSAGE_TYPES = (SystemMessage, UserMessage, AssistantMessage, ToolMessage)


def _short(text: str | bytes) -> str:
    """``text`` cut to 40 characters, for a hint."""
    shown = text if isinstance(text, str) else text.decode("utf-8", "replace")
    return shown if len(shown) <= 40 else shown[:39] + "…"


def check_messages(messages: object, caller: str) -> None:
    """A ``TypeError`` now, naming what was probably meant, for ``messages`` that are no
    sequence of messages: otherwise the run fails deep inside the runner.

    Args:
        messages: What ``caller`` was given as its messages.
        caller: Who was given them, for the message (``run_conversation``, ``Agent.run``).
    """
    if isinstance(messages, (str, bytes)):
        raise TypeError(
            f"{caller} takes a list of messages, not a {type(messages).__name__}: did you "
            f"mean [UserMessage({_short(messages)!r})]? (Agent.run takes a string)"
        )
    if not isinstance(messages, Sequence):
        raise TypeError(
            f"{caller} takes a list of messages (SystemMessage, UserMessage, "
            f"AssistantMessage, ToolMessage), not {type(messages).__name__}"
        )
    for index, message in enumerate(messages):
        if not isinstance(message, _MESSAGE_TYPES):
            hint = (
                f": did you mean UserMessage({_short(message)!r})?"
                if isinstance(message, str)
                else " (build messages with UserMessage(...), AssistantMessage(...) …; "
                "agentfsm.converter.structure(data, Message) reads them from JSON)"
            )
            raise TypeError(
                f"{caller}: message {index} is a {type(message).__name__}, not a message{hint}"
            )


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


def _check_params(params: object) -> None:
    if not isinstance(params, LoopParams):
        turns = params if isinstance(params, int) and not isinstance(params, bool) else "..."
        raise TypeError(
            f"run_conversation's params must be a LoopParams, not {type(params).__name__}: "
            f"did you mean LoopParams(max_turns={turns})?"
        )


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
        TypeError: ``messages`` is not a list of messages (a string, say), ``params`` is
            not a :class:`LoopParams`, or a policy implements no hook (all checked before
            the run starts).
        Exception: whatever the chat call raised, after an ``error`` event; a
            ``PolicyError`` naming the policy when a policy hook raised.
    """
    check_messages(messages, "run_conversation")
    _check_params(params)
    runner = build_run(chat, tools, messages, params, policies=policies, emitter=emitter)
    return await runner.run()
