"""Tool calls that a stopped run leaves open, and the results that answer them.

Providers reject a history with an assistant tool call that no tool result answers, so
every call of a run is answered, whatever stopped it:

* an outside cancellation (``task.cancel()``) answers each open call with a cancelled
  ``tool_call_end`` before the ``error`` event and the re-raised ``CancelledError``;
* a session file whose run was killed (``kill -9``) before a result was written reads back
  with a failed result for each unanswered call (see
  :func:`agentfsm.adapters.sessions.read_session_messages`).

The result says whether the tool had started, so the model knows it may have acted.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING

from ._messages import ToolCall, ToolResult

if TYPE_CHECKING:
    from ._context import ToolOutcome

__all__ = [
    "CANCELLED_BEFORE_TOOL",
    "CANCELLED_DURING_TOOL",
    "UNRECORDED_BEFORE_TOOL",
    "UNRECORDED_DURING_TOOL",
    "cancelled_from_outside",
    "cancelled_result",
    "open_calls",
    "unrecorded_result",
]

CANCELLED_DURING_TOOL = "cancelled: the run stopped while this tool was running; it may have acted"
"""Error of the result closing a call that was running when the run was cancelled."""
CANCELLED_BEFORE_TOOL = "cancelled: the run stopped before this tool ran; it did not run"
"""Error of the result closing a call that had not started when the run was cancelled."""
UNRECORDED_DURING_TOOL = (
    "the run stopped while this tool was running; it may have acted (its result was not recorded)"
)
"""Error of the result a session reads back for a started call whose result is missing."""
UNRECORDED_BEFORE_TOOL = "the run stopped before this tool ran; it did not run"
"""Error of the result a session reads back for a call that never started."""


def cancelled_result(started: bool) -> ToolResult:
    """The result closing a call open when the run was cancelled."""
    return ToolResult(
        ok=False, output="", error=CANCELLED_DURING_TOOL if started else CANCELLED_BEFORE_TOOL
    )


def unrecorded_result(started: bool) -> ToolResult:
    """The result a session reads back for a call whose result was never recorded."""
    return ToolResult(
        ok=False, output="", error=UNRECORDED_DURING_TOOL if started else UNRECORDED_BEFORE_TOOL
    )


def cancelled_from_outside() -> bool:
    """Whether the current task is being cancelled (``task.cancel()`` was called on it).

    A ``CancelledError`` raised while this is false came from the code awaited (a tool that
    raised it by itself), not from a cancellation of the run.
    """
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def open_calls(
    calls: Sequence[ToolCall], answered: Iterable[ToolOutcome], started: Collection[int]
) -> list[tuple[ToolCall, ToolResult]]:
    """The calls among ``calls`` (a reply's, in order) that no outcome in ``answered`` (the
    turn's) answers, each with the cancelled result that closes it (``started``: the
    positions in ``calls`` of the calls whose tool ran).

    Calls are told apart by position, not by id: a reply may repeat an id, and each of its
    calls is closed once. Outcomes are posted in call order, so the first ``k`` calls of an
    id that ``k`` outcomes answer are the answered ones."""
    answers = Counter(outcome.call.id for outcome in answered)
    left: list[tuple[ToolCall, ToolResult]] = []
    for position, call in enumerate(calls):
        if answers[call.id] > 0:
            answers[call.id] -= 1
            continue
        left.append((call, cancelled_result(position in started)))
    return left
