"""Which tool calls may run together.

Consecutive calls of concurrency-safe tools form one parallel batch; anything else (and any
tool whose behaviour is unknown) gets a batch of its own, so ordering around writes, edits
and shell commands holds. Results are always posted in the original call order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._messages import ToolCall, ToolSpec

__all__ = ["plan_tool_batches"]


def plan_tool_batches(
    calls: Sequence[ToolCall], specs: Iterable[ToolSpec]
) -> list[tuple[ToolCall, ...]]:
    """Group ``calls`` into batches, in order."""
    safe = {spec.name for spec in specs if spec.concurrency_safe and not spec.destructive}
    batches: list[tuple[ToolCall, ...]] = []
    current: list[ToolCall] = []
    for call in calls:
        if call.name in safe and call.raw_arguments is None:
            current.append(call)
            continue
        if current:
            batches.append(tuple(current))
            current = []
        batches.append((call,))
    if current:
        batches.append(tuple(current))
    return batches
