"""The error every command shares: bad command-line input."""

__all__ = ["UsageError"]


class UsageError(Exception):
    """Bad command-line input (exit code 2)."""
