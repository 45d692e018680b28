"""Lifecycle hooks of an :class:`~agentfsm.agent._agent.Agent` run.

Each hook is an optional callable (sync or async) taking one payload object. A hook that
raises is logged and ignored: hooks never fail a run.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any, Literal, TypeAlias

from attrs import Attribute, define, field, frozen

from agentfsm.engine import LoopOutcome, Usage

__all__ = ["ExitReason", "Hooks", "PromptSubmit", "RunStop", "SessionStart", "call_hook"]

logger = logging.getLogger("agentfsm.agent")

ExitReason: TypeAlias = Literal["final", "budget", "aborted", "policy", "failed", "cancelled"]


@frozen
class SessionStart:
    """A new session begins (a run with no prior history)."""

    session_id: str | None
    """The session's id, when recording."""
    session_path: str | None
    """The session file, when recording."""


@frozen
class PromptSubmit:
    """A prompt is about to be sent; the hook may return a rewritten system text."""

    system: str | None
    """The system text the run will use."""
    prompt: str
    """The new user input, as text."""


@frozen
class RunStop:
    """A run ended, whichever way."""

    stopped_reason: ExitReason
    """``final``, ``budget``, ``aborted``, ``policy``, ``failed`` (the run raised) or
    ``cancelled`` (its task was cancelled: the caller gets ``CancelledError``)."""
    usage: Usage
    """Everything the run spent, on every exit path."""
    outcome: LoopOutcome | None = None
    """The outcome, unless the run raised."""
    error: BaseException | None = None
    """The error the run raised, if it did."""


def _hook(_: object, attribute: Attribute[Any], value: object) -> None:
    """A hook is a callable or ``None`` (checked when set, not when the run calls it)."""
    if value is not None and not callable(value):
        payload = attribute.metadata["payload"]
        raise TypeError(
            f"Hooks.{attribute.name} must be a function (sync or async) taking a {payload}, "
            f"or None; got {value!r}"
        )


@define
class Hooks:
    """Callables run at fixed points of every :class:`Agent` run.

    Raises:
        TypeError: a hook that is not callable (when set).
    """

    session_start: Callable[[SessionStart], Any] | None = field(
        default=None, validator=_hook, metadata={"payload": "SessionStart"}
    )
    """Once per session: before the first run of a session with no prior history."""
    user_prompt_submit: Callable[[PromptSubmit], Any] | None = field(
        default=None, validator=_hook, metadata={"payload": "PromptSubmit"}
    )
    """Before each run: sees the system text; returning a string replaces it."""
    stop: Callable[[RunStop], Any] | None = field(
        default=None, validator=_hook, metadata={"payload": "RunStop"}
    )
    """After each run, on every exit path (final, budget, aborted, policy stop, failure,
    cancellation)."""


async def call_hook(name: str, hook: Callable[[Any], Any] | None, payload: object) -> Any:
    """Run ``hook`` (awaiting it if async); log and swallow its errors. Returns its result."""
    if hook is None:
        return None
    try:
        result = hook(payload)
        if inspect.isawaitable(result):
            result = await result
        return result
    except Exception:
        logger.warning("agentfsm: %s hook %r raised; ignored", name, hook, exc_info=True)
        return None
