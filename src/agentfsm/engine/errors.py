"""Exceptions raised by the loop itself."""

from __future__ import annotations

__all__ = ["AGENT_LOOP_ABORTED", "AbortError", "RecordedError", "error_name"]

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


def error_name(error: BaseException) -> str:
    """The name an error is recorded under: its own ``name`` if it declares one, else its class."""
    name = getattr(error, "name", None)
    return name if isinstance(name, str) else type(error).__name__
