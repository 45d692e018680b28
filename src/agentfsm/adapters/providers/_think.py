"""Reasoning sent as text: ``<think>…</think>`` at the start of an answer (Qwen3, DeepSeek-R1
and their distills behind routers that pass the model's output through unparsed)."""

from __future__ import annotations

__all__ = ["CLOSE_TAG", "MAX_LEADING_SPACE", "OPEN_TAG", "ThinkSplitter", "split_think"]

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"
MAX_LEADING_SPACE = 1024
"""Whitespace held back before a possible ``<think>`` at most (characters): past it the
answer is text, so a stream of blanks never piles up outside the reply's size bound."""


def _held(text: str, tag: str) -> int:
    """The length of the longest end of ``text`` that could begin ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


class ThinkSplitter:
    """Splits streamed answer text into (text, reasoning) pieces as it arrives.

    Only a ``<think>`` opening the answer (after at most :data:`MAX_LEADING_SPACE`
    characters of whitespace) counts; the reasoning runs to
    the first ``</think>``, and the whitespace right after that tag is dropped. A tag split
    across pieces is held back until it is whole. An answer whose ``<think>`` is never
    closed is all reasoning (a reply cut off while thinking has no answer text). Text
    without a leading ``<think>`` passes through unchanged.
    """

    def __init__(self) -> None:
        self._state = "start"  # start -> inside -> after -> text
        self._pending = ""
        self._fed = False

    def feed(self, piece: str) -> tuple[str, str]:
        """The (text, reasoning) that ``piece`` completes."""
        if not piece:
            return "", ""
        self._fed = True
        if self._state == "text":
            return piece, ""
        if self._state == "after":
            return self._after(piece)
        if self._state == "start":
            self._pending += piece
            stripped = self._pending.lstrip()
            near = len(self._pending) - len(stripped) <= MAX_LEADING_SPACE
            if near and stripped.startswith(OPEN_TAG):
                self._state = "inside"
                rest, self._pending = stripped[len(OPEN_TAG) :], ""
                return self._inside(rest)
            if near and OPEN_TAG.startswith(stripped):
                return "", ""  # whitespace, or the tag's first characters: wait
            self._state = "text"
            text, self._pending = self._pending, ""
            return text, ""
        return self._inside(piece)

    @property
    def fed(self) -> bool:
        """Some answer text arrived (it may all have been reasoning)."""
        return self._fed

    def _inside(self, piece: str) -> tuple[str, str]:
        combined = self._pending + piece
        end = combined.find(CLOSE_TAG)
        if end >= 0:
            self._pending = ""
            self._state = "after"
            text, _ = self._after(combined[end + len(CLOSE_TAG) :])
            return text, combined[:end]
        keep = _held(combined, CLOSE_TAG)
        self._pending = combined[len(combined) - keep :] if keep else ""
        return "", combined[: len(combined) - keep]

    def _after(self, piece: str) -> tuple[str, str]:
        text = piece.lstrip()
        if text:
            self._state = "text"
        return text, ""

    def finish(self) -> tuple[str, str]:
        """The end of the answer: what was held back, as (text, reasoning)."""
        pending, self._pending = self._pending, ""
        if self._state == "start":
            self._state = "text"
            return pending, ""
        if self._state == "inside":
            return "", pending
        return "", ""


def split_think(content: str) -> tuple[str, str]:
    """A whole answer as (text, reasoning), split as :class:`ThinkSplitter` splits a stream."""
    splitter = ThinkSplitter()
    text, reasoning = splitter.feed(content)
    more_text, more_reasoning = splitter.finish()
    return text + more_text, reasoning + more_reasoning
