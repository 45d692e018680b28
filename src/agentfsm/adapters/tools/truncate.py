"""Cutting long tool output for the model while keeping all of it for paging.

The model sees the head and the tail of a long output with a marker that says how much was
cut and how to read the rest (``read_output``); the full text stays in an
:class:`OutputStore` for the session.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict

__all__ = ["DEFAULT_MODEL_OUTPUT_CHARS", "OutputStore", "truncate_for_model"]

DEFAULT_MODEL_OUTPUT_CHARS = 20_000
"""Longest tool output the model receives whole."""


class OutputStore:
    """Full tool outputs of a session, by id (least recently stored dropped past a cap)."""

    def __init__(self, max_entries: int = 256, max_chars: int = 64 * 1024 * 1024) -> None:
        self._items: OrderedDict[str, str] = OrderedDict()
        self._chars = 0
        self._ids = itertools.count(1)
        self.max_entries = max_entries
        self.max_chars = max_chars

    def put(self, text: str) -> str:
        """Keep ``text``; returns its id."""
        output_id = f"out_{next(self._ids)}"
        self._items[output_id] = text
        self._chars += len(text)
        while self._items and (len(self._items) > self.max_entries or self._chars > self.max_chars):
            _, dropped = self._items.popitem(last=False)
            self._chars -= len(dropped)
        return output_id

    def get(self, output_id: str) -> str | None:
        """The text stored under ``output_id``, if it is still kept."""
        return self._items.get(output_id)

    def __len__(self) -> int:
        return len(self._items)


def _snap(text: str, index: int, *, forward: bool, slack: int) -> int:
    """Move a cut point to a nearby line boundary (within ``slack`` characters)."""
    if forward:
        found = text.find("\n", index, index + slack)
        return found + 1 if found != -1 else index
    found = text.rfind("\n", max(0, index - slack), index)
    return found + 1 if found != -1 else index


def truncate_for_model(text: str, limit: int, output_id: str | None) -> str:
    """``text`` if it fits, else its head and tail around a marker.

    The split is adaptive: 40 % head, 60 % tail (errors and summaries tend to come last),
    each cut moved to a line boundary when one is close.
    """
    if len(text) <= limit:
        return text
    budget = max(limit - 200, 100)
    head_end = _snap(text, int(budget * 0.4), forward=False, slack=200)
    tail_start = _snap(text, len(text) - int(budget * 0.6), forward=True, slack=200)
    cut = tail_start - head_end
    lines = text.count("\n", head_end, tail_start)
    how = (
        f"read_output(id={output_id!r}, offset={head_end}, limit={min(cut, limit)}) pages it"
        if output_id
        else "the full text was not kept"
    )
    marker = f"\n[… {cut} characters ({lines} lines) cut here; {how} …]\n"
    return text[:head_end] + marker + text[tail_start:]
