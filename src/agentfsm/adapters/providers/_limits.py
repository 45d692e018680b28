"""Bounds on what a provider's reply may cost: sizes, counts, nesting, and the call's deadline.

A server may be broken or hostile. Every bound here, once exceeded, ends the call with a
:class:`~agentfsm.adapters.providers.ProviderError` (``too_large`` for sizes and counts,
``bad_response`` for nesting and wrong shapes, ``timeout`` with phase ``total`` for the
deadline) instead of growing memory or time without end.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from attrs import frozen

from agentfsm.engine import json_shape

__all__ = ["MiB", "BadShape", "Deadline", "Limits", "TooLarge", "loads_bounded"]

MiB = 1024 * 1024


@frozen
class Limits:
    """Size, count and nesting bounds of one reply.

    The defaults leave room for real replies (a tool call that writes a whole file carries a
    few MiB of arguments in one SSE line) while keeping a hostile server's reply far from
    exhausting memory.
    """

    max_line_bytes: int = 8 * MiB
    """One line of a server-sent-event stream (``too_large``, limit ``max_line_bytes``)."""
    max_event_bytes: int = 16 * MiB
    """One server-sent event: its ``data`` lines together."""
    max_body_bytes: int = 64 * MiB
    """A non-streamed body after content decoding (gzip, deflate …); also the text,
    reasoning and arguments a stream accumulates in all."""
    max_error_body_bytes: int = 64 * 1024
    """An error response's body after decoding; the rest is not read (no error)."""
    max_tool_calls: int = 128
    """Tool calls in one reply."""
    max_argument_bytes: int = 8 * MiB
    """One tool call's arguments (the JSON text)."""
    max_json_depth: int = 128
    """Nesting of arrays and objects in any JSON the server sends (``bad_response``)."""
    max_blocks: int = 1024
    """Content blocks of one Anthropic reply (text, thinking and tool-use blocks)."""


class TooLarge(Exception):
    """A bound of :class:`Limits` was exceeded (internal; becomes a ``too_large`` error)."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


class BadShape(Exception):
    """A reply's JSON is well formed but not of the expected shape (internal)."""

    def __init__(self, message: str, limit: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.limit = limit
        self.code = code


def loads_bounded(text: str | bytes, max_depth: int) -> Any:
    """``json.loads`` that never raises ``RecursionError``: deeper than ``max_depth`` is
    :class:`BadShape` (judged on the text's brackets, in linear time).

    Other malformed text raises ``ValueError`` as ``json.loads`` does.
    """
    too_deep = BadShape(f"JSON nested deeper than {max_depth} levels", "max_json_depth")
    try:
        value = json.loads(text)
    except RecursionError:
        raise too_deep from None
    if json_shape(text)[0] > max_depth:
        raise too_deep
    return value


class Deadline:
    """The end of a call's total time, on the running loop's clock."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.at = None if seconds is None else asyncio.get_running_loop().time() + seconds

    def remaining(self) -> float | None:
        """Seconds left (never negative), or ``None`` without a deadline."""
        if self.at is None:
            return None
        return max(0.0, self.at - asyncio.get_running_loop().time())

    def bound(self, step: float | None) -> tuple[float | None, bool]:
        """The timeout for one step: the smaller of ``step`` and the time left, and whether
        the deadline is the binding one."""
        left = self.remaining()
        if left is None:
            return step, False
        if step is None or left <= step:
            return left, True
        return step, False

    @property
    def expired(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0
