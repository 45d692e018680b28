"""``Agent.interrupt()`` cuts a running async policy hook short, whichever hook it is."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import attrs
import pytest

from agentfsm import Agent, LoopOutcome, RunContext, ToolResult
from agentfsm.engine._compression import CompressionResult
from agentfsm.engine._params import StopInfo
from agentfsm.engine._policy import Policy
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from ..helpers import Recorder

HOOK_SLEEP = 5.0
"""How long each slow hook would run if nothing cut it short."""

# What each hook answers once its sleep is over (an answer it may give).
_ANSWER: dict[str, Any] = {
    "check_turn": lambda args: None,
    "should_compress": lambda args: False,
    "compress": lambda args: CompressionResult(list(args[0].history), 0),
    "shape_request": lambda args: list(args[-1]),
    "shape_reply": lambda args: None,
    "on_llm_end": lambda args: None,
    "on_tool_result": lambda args: None,
    "on_turn_end": lambda args: None,
    "check_final": lambda args: None,
}


class SlowHook:
    """A policy whose one hook, ``hook``, is async and takes :data:`HOOK_SLEEP` seconds."""

    def __init__(self, hook: str) -> None:
        self.hook = hook
        self.entered = asyncio.Event()
        setattr(self, hook, self._slow)
        if hook == "should_compress":  # a compressor implements both
            self.compress = self._never
        elif hook == "compress":
            self.should_compress = lambda ctx: True

    async def _never(self, *args: Any) -> Any:
        raise AssertionError("compress called after should_compress was cut short")

    async def _slow(self, *args: Any) -> Any:
        self.entered.set()
        await asyncio.sleep(HOOK_SLEEP)
        return _ANSWER[self.hook](args)


class ShapesOutcome:
    """An async outcome shaper that takes a moment, and marks the outcome."""

    async def shape_outcome(self, ctx: RunContext, outcome: LoopOutcome) -> LoopOutcome:
        await asyncio.sleep(0.05)
        return attrs.evolve(outcome, stop=StopInfo("ShapesOutcome", "shaped"))


async def _interrupt_during(hook: str, *others: Policy) -> tuple[LoopOutcome, float, Recorder]:
    """Run an agent (one tool call, then an answer) with a slow ``hook``, interrupt it 0.1 s
    into the hook: the outcome, the seconds from the interrupt to the run's end, the events."""
    slow = SlowHook(hook)
    chat = ScriptedChat([tool_reply(("t", {})), "done"])
    tools = ScriptedTools({"t": lambda: ToolResult(True, "ok")})
    agent = Agent(chat, tools, policies=[slow, *others])
    recorder = Recorder(agent.events)
    task = asyncio.create_task(agent.run("go"))
    await asyncio.wait_for(slow.entered.wait(), 5)
    await asyncio.sleep(0.1)
    fired = time.monotonic()
    agent.interrupt()
    outcome = await asyncio.wait_for(task, HOOK_SLEEP + 5)
    return outcome, time.monotonic() - fired, recorder


@pytest.mark.parametrize("hook", ["check_turn", "check_final"])
async def test_interrupt_cuts_an_async_turn_gate_as_fast_as_a_final_gate(hook: str) -> None:
    outcome, elapsed, recorder = await _interrupt_during(hook)
    assert outcome.stopped_reason == "aborted"
    assert elapsed < 1.0, f"{hook}: the run took {elapsed:.2f} s to end after the interrupt"
    assert recorder.types[-1] == "error"


@pytest.mark.parametrize("hook", sorted(set(_ANSWER) - {"check_turn", "check_final"}))
async def test_interrupt_cuts_every_other_async_hook_short(hook: str) -> None:
    outcome, elapsed, recorder = await _interrupt_during(hook)
    assert outcome.stopped_reason == "aborted"
    assert elapsed < 1.0, f"{hook}: the run took {elapsed:.2f} s to end after the interrupt"
    assert "final" not in recorder.types
    # The history stays well formed: every requested call answered.
    calls = [c.id for m in outcome.messages for c in getattr(m, "tool_calls", ())]
    answered = [m.tool_call_id for m in outcome.messages if m.role == "tool"]
    assert answered == calls


async def test_an_interrupted_run_still_shapes_its_outcome() -> None:
    outcome, elapsed, _ = await _interrupt_during("check_turn", ShapesOutcome())
    assert outcome.stopped_reason == "aborted"
    assert outcome.stop == StopInfo("ShapesOutcome", "shaped")
    assert elapsed < 1.0
