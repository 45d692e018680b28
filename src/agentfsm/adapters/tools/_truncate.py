"""Cutting long tool output for the model while keeping what can be kept for paging.

The model sees the head and the tail of a long output (or error) with a marker that says how
much was cut and how to read the rest (``read_output``). The :class:`OutputStore` keeps the
full text for the session when it fits its per-entry bound, else a bounded head-and-tail
excerpt, and the marker says which: it never promises more than was kept. The store as a
whole is bounded by bytes; the least recently used entries go first.
"""

from __future__ import annotations

import itertools
import sys
from collections import OrderedDict

from attrs import frozen

__all__ = [
    "DEFAULT_MODEL_OUTPUT_CHARS",
    "MAX_ENTRY_BYTES",
    "MAX_STORE_BYTES",
    "OutputStore",
    "StoredOutput",
    "cut_for_model",
    "truncate_for_model",
]

DEFAULT_MODEL_OUTPUT_CHARS = 20_000
"""Longest tool output the model receives whole."""
MAX_STORE_BYTES = 64 * 1024 * 1024
"""Memory an :class:`OutputStore` keeps at most, all entries together (64 MiB)."""
MAX_ENTRY_BYTES = 8 * 1024 * 1024
"""Memory one stored output takes at most (8 MiB); a larger one is kept as an excerpt."""


def _size(text: str) -> int:
    """The string's memory, in bytes (1, 2 or 4 per character, plus a header)."""
    return sys.getsizeof(text)


@frozen
class StoredOutput:
    """What :meth:`OutputStore.put` kept."""

    id: str
    """The id ``read_output`` takes."""
    chars: int
    """Characters kept."""
    whole: bool
    """The full text was kept; otherwise a head-and-tail excerpt of it."""


class OutputStore:
    """Tool outputs of a session, by id, for ``read_output``.

    Bounded by memory: an entry over ``max_entry_bytes`` is kept as a head-and-tail excerpt
    (about 40 % head, 60 % tail, with a marker where the middle was), and past
    ``max_bytes`` or ``max_entries`` the least recently used entries are dropped (never the
    one just stored).
    """

    def __init__(
        self,
        max_entries: int = 256,
        max_bytes: int = MAX_STORE_BYTES,
        *,
        max_entry_bytes: int = MAX_ENTRY_BYTES,
    ) -> None:
        if max_entries < 1 or max_bytes < 1024 or max_entry_bytes < 1024:
            raise ValueError("OutputStore bounds must be at least 1 entry and 1 KiB")
        self._items: OrderedDict[str, str] = OrderedDict()
        self._bytes = 0
        self._ids = itertools.count(1)
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_entry_bytes = min(max_entry_bytes, max_bytes)

    def store(self, text: str) -> StoredOutput:
        """Keep ``text`` (or a bounded excerpt of it); says what was kept."""
        whole = _size(text) <= self.max_entry_bytes
        if not whole:
            per_char = max(1, (_size(text) - _size("")) // max(1, len(text)))
            keep = max(1, (self.max_entry_bytes - 4096) // per_char)
            text = _head_and_tail(text, keep, "not kept")
        output_id = f"out_{next(self._ids)}"
        self._items[output_id] = text
        self._bytes += _size(text)
        while len(self._items) > 1 and (
            len(self._items) > self.max_entries or self._bytes > self.max_bytes
        ):
            _, dropped = self._items.popitem(last=False)
            self._bytes -= _size(dropped)
        return StoredOutput(output_id, len(text), whole)

    def put(self, text: str) -> str:
        """Keep ``text`` (or a bounded excerpt of it); returns its id."""
        return self.store(text).id

    def get(self, output_id: str) -> str | None:
        """The text stored under ``output_id``, if it is still kept (it becomes the most
        recently used)."""
        text = self._items.get(output_id)
        if text is not None:
            self._items.move_to_end(output_id)
        return text

    @property
    def bytes(self) -> int:
        """Memory the kept texts take."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)


def _snap(text: str, index: int, *, forward: bool, slack: int) -> int:
    """Move a cut point to a nearby line boundary (within ``slack`` characters)."""
    if forward:
        found = text.find("\n", index, index + slack)
        return found + 1 if found != -1 else index
    found = text.rfind("\n", max(0, index - slack), index)
    return found + 1 if found != -1 else index


def _cut_points(text: str, budget: int) -> tuple[int, int]:
    head_end = _snap(text, int(budget * 0.4), forward=False, slack=200)
    tail_start = _snap(text, len(text) - int(budget * 0.6), forward=True, slack=200)
    return head_end, max(head_end, tail_start)


def _head_and_tail(text: str, budget: int, how: str) -> str:
    head_end, tail_start = _cut_points(text, budget)
    cut = tail_start - head_end
    lines = text.count("\n", head_end, tail_start)
    marker = f"\n[… {cut} characters ({lines} lines) cut here; {how} …]\n"
    return text[:head_end] + marker + text[tail_start:]


def truncate_for_model(text: str, limit: int, output_id: str | None) -> str:
    """``text`` if it fits, else its head and tail around a marker.

    The split is adaptive: 40 % head, 60 % tail (errors and summaries tend to come last),
    each cut moved to a line boundary when one is close. With ``output_id`` the marker says
    how ``read_output`` pages the cut part (the full text must be stored under that id).
    """
    if len(text) <= limit:
        return text
    budget = max(limit - 200, 100)
    head_end, tail_start = _cut_points(text, budget)
    how = (
        f"read_output(id={output_id!r}, offset={head_end}, "
        f"limit={min(tail_start - head_end, limit)}) pages it"
        if output_id
        else "the full text was not kept"
    )
    return _head_and_tail(text, budget, how)


def cut_for_model(
    text: str, limit: int, store: OutputStore | None
) -> tuple[str, StoredOutput | None]:
    """``text`` cut to ``limit`` for the model, the whole (or an excerpt) kept in ``store``.

    Returns the text to send and what was stored (``None`` when ``text`` fits or there is no
    store). The marker promises paging only through what the store really kept.
    """
    if len(text) <= limit:
        return text, None
    if store is None:
        return truncate_for_model(text, limit, None), None
    stored = store.store(text)
    if stored.whole:
        return truncate_for_model(text, limit, stored.id), stored
    how = (
        f"only a {stored.chars}-character head-and-tail excerpt was kept: "
        f"read_output(id={stored.id!r}) pages that excerpt"
    )
    return _head_and_tail(text, max(limit - 300, 100), how), stored
