"""What a run is given (:class:`LoopParams`) and what it returns (:class:`LoopOutcome`)."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, TypeVar

import attrs
from attrs import field, frozen

from ._messages import AssistantMessage, ChatResult, Message, Usage
from ._protocols import SupportsAbort

__all__ = ["LoopOutcome", "LoopParams", "StopInfo", "StoppedReason", "evolved"]

StoppedReason: TypeAlias = Literal["final", "budget", "aborted", "policy"]
"""Why a run ended without raising."""


def _positive_or_none(_: object, attribute: object, value: int | None) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"context_budget_tokens must be positive or None, got {value}")


def _threshold(_: object, attribute: object, value: float) -> None:
    if not 0 < value <= 1:
        raise ValueError(f"compress_threshold must be in (0, 1], got {value}")


def _signal(_: object, attribute: object, value: Any) -> None:
    if value is not None and not hasattr(value, "aborted"):
        raise TypeError(f"signal must have an 'aborted' flag (an AbortSignal), got {value!r}")


def _max_turns(_: object, attribute: object, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_turns must be an int >= 1, got {value!r}")


@frozen
class LoopParams:
    """Parameters of one run of the loop."""

    max_turns: int = field(validator=_max_turns)
    """LLM-call budget: each turn makes exactly one call; tools between turns are free."""
    system_prompt: str | None = None
    """Seeded into the history by the rules of ``seed_system_prompt``."""
    temperature: float | None = None
    """Passed through to every chat call."""
    max_tokens: int | None = None
    """Passed through to every chat call."""
    context_budget_tokens: int | None = field(default=None, validator=_positive_or_none)
    """Context budget for compression; ``None`` turns compression off."""
    compress_threshold: float = field(default=0.8, validator=_threshold)
    """Compress once the estimate reaches ``budget * threshold``."""
    signal: SupportsAbort | None = field(default=None, validator=_signal)
    """Checked at the top of every turn; an aborted signal ends the run as ``aborted``."""


@frozen
class StopInfo:
    """Which policy stopped a run, and why."""

    policy: str
    """The policy's name."""
    reason: str
    """The reason it gave."""


@frozen
class LoopOutcome:
    """The result of a run that did not raise."""

    messages: list[Message]
    """The working history, post-compression: the same list object the run mutated."""
    final: AssistantMessage | None
    """The final assistant message; ``None`` unless ``stopped_reason == "final"``."""
    result: ChatResult | None
    """The last chat result (``None`` on abort, or when no call was made)."""
    turns_used: int
    """LLM calls made by the loop's turns."""
    stopped_reason: StoppedReason
    """``final``, ``budget``, ``aborted`` or ``policy``."""
    usage: Usage = field(factory=Usage)
    """Tokens of every call the run made (auxiliary calls such as compression included)."""
    stop: StopInfo | None = None
    """Set when a policy stopped the run."""
    session_path: str | None = None
    """The session file the run was recorded in, when recording was on."""
    session_error: str | None = None
    """Why the session file is incomplete (a record could not be written: a full disk…), or
    ``None``: the file holds the run up to its last whole record, and nothing after."""


_INIT_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}
"""Per attrs class, ``(attribute, init argument)`` of the fields its ``__init__`` takes."""

_A = TypeVar("_A")


def evolved(instance: _A, **changes: Any) -> _A:
    """``attrs.evolve(instance, **changes)`` with the class's fields read once per class, not
    once per call (runs evolve their parameters and outcome every time)."""
    cls = type(instance)
    names = _INIT_FIELDS.get(cls)
    if names is None:
        fields: Any = attrs.fields(cls)  # type: ignore[arg-type]
        names = _INIT_FIELDS[cls] = tuple((a.name, a.alias) for a in fields if a.init)
    arguments = {alias: getattr(instance, name) for name, alias in names}
    arguments.update(changes)
    return cls(**arguments)
