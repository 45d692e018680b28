"""One tool call as the runner makes it: a failure of the tool runner becomes a failed
result, never the run's end."""

from __future__ import annotations

import asyncio
import logging

from ._cancellation import cancelled_from_outside
from ._messages import ToolCall, ToolResult
from ._protocols import SupportsAbort, ToolRunner
from ._steps import run_step

__all__ = ["run_tool"]

logger = logging.getLogger("agentfsm.engine")


async def run_tool(
    tools: ToolRunner | None, call: ToolCall, signal: SupportsAbort | None
) -> ToolResult:
    """Run ``call`` through ``tools`` as a step (``tool <name>``): its result, or a failed
    result when there are no tools, the runner raised (``CancelledError`` included, unless
    the cancellation came from outside) or returned something else."""
    if tools is None:
        return ToolResult(ok=False, output="", error=f"unknown tool {call.name!r}: no tools")
    try:
        result: object = await run_step(f"tool {call.name}", lambda: tools.run(call, signal=signal))
    except asyncio.CancelledError:
        if cancelled_from_outside():
            raise
        # The tool raised CancelledError by itself: a failed call, not the run's end.
        logger.warning("agentfsm: tool %s raised CancelledError", call.name)
        return ToolResult(ok=False, output="", error="tool raised CancelledError")
    except Exception as exc:  # a ToolRunner must not raise; keep the run alive if it does
        logger.warning("agentfsm: tool runner raised on %s: %r", call.name, exc)
        return ToolResult(ok=False, output="", error=f"tool raised {type(exc).__name__}: {exc}")
    if not isinstance(result, ToolResult):
        return ToolResult(
            ok=False, output="", error=f"tool runner returned {type(result).__name__}"
        )
    return result
