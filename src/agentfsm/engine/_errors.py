"""Exceptions raised by the loop itself."""

from __future__ import annotations

from agentfsm.sandbox import RunRefused

__all__ = [
    "AGENT_LOOP_ABORTED",
    "MAX_OVERFLOW_COMPACTIONS",
    "AbortError",
    "ContextOverflowUnresolved",
    "PolicyError",
    "PolicyVerdictError",
    "RecordedError",
    "RunRefused",
    "error_name",
    "is_context_overflow",
]

MAX_OVERFLOW_COMPACTIONS = 3
"""Compactions a turn may force after context-overflow errors before the run fails."""

AGENT_LOOP_ABORTED = "agent loop aborted"
"""Message of the :class:`AbortError` the loop reports when it sees an abort at a turn top."""


class AbortError(Exception):
    """The run was aborted through its signal (the Python twin of a DOM ``AbortError``)."""

    name = "AbortError"

    def __init__(self, message: str = AGENT_LOOP_ABORTED) -> None:
        super().__init__(message)

    @property
    def message(self) -> str:
        """The error message."""
        return str(self)


class RecordedError(Exception):
    """An error read back from JSON: its original class name and message, nothing more."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name

    def __repr__(self) -> str:
        return f"RecordedError({self.name!r}, {str(self)!r})"

    def __reduce__(self) -> tuple[type[RecordedError], tuple[str, str]]:
        return (RecordedError, (self.name, str(self)))


def error_name(error: BaseException) -> str:
    """The name an error is recorded under: its own ``name`` if it declares one, else its class."""
    name = getattr(error, "name", None)
    return name if isinstance(name, str) else type(error).__name__


def is_context_overflow(error: BaseException | None) -> bool:
    """Whether a provider error says the request did not fit the model's context window."""
    return error is not None and getattr(error, "kind", None) == "context_overflow"


class ContextOverflowUnresolved(Exception):
    """The request still overflowed the context window after the allowed compactions."""

    def __init__(self, compactions: int) -> None:
        super().__init__(
            f"context overflow: the request still exceeds the model's context window after "
            f"{compactions} compactions in one turn"
        )
        self.compactions = compactions


class PolicyError(Exception):
    """A policy hook raised: the run ends with an ``error`` event carrying this exception.

    Its message names the policy and the hook; the policy's own exception is its
    ``__cause__`` (and ``cause``).
    """

    def __init__(self, policy: str, hook: str, cause: BaseException) -> None:
        super().__init__(f"policy {policy} failed in {hook}: {type(cause).__name__}: {cause}")
        self.policy = policy
        """The policy's name."""
        self.hook = hook
        """The hook that raised (``check_turn``, ``check_final`` …)."""
        self.cause = cause
        """What the hook raised."""


class PolicyVerdictError(TypeError):
    """A policy hook returned a value its hook does not allow (e.g. ``True`` from
    ``check_turn``, ``Stop`` from ``check_final``)."""

    def __init__(self, policy: str, hook: str, value: object, expected: str) -> None:
        shown = repr(value)
        if len(shown) > 200:
            shown = shown[:200] + "…"
        super().__init__(
            f"policy {policy} returned {shown} ({type(value).__name__}) from {hook}; "
            f"expected {expected}"
        )
        self.policy = policy
        """The policy's name."""
        self.hook = hook
        """The hook that returned it."""
