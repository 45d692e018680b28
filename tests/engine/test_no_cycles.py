"""A finished run leaves no reference cycles: its objects go as soon as nothing refers to them,
without waiting for the garbage collector (whose passes would otherwise come every few runs
and grow with everything the process holds)."""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable
from pathlib import Path

from agentfsm import Agent, AssistantMessage, ChatResult, LoopParams, ToolCall, UserMessage
from agentfsm.adapters.tools import ToolBox
from agentfsm.engine._loop import run_conversation
from agentfsm.policies import presets
from agentfsm.testing import ScriptedChat, Streamed


async def echo(text: str) -> str:
    """Return the text."""
    return text


TOOLS = ToolBox([echo])


def script(turns: int) -> ScriptedChat:
    """``turns`` tool turns (streamed: the runner's ``on_delta`` is used), then an answer."""
    replies: list[Streamed] = [
        Streamed(
            ["Looking."],
            thinking=[f"Echo number {i} now."],
            then=ChatResult(
                AssistantMessage("", tool_calls=(ToolCall(f"c{i}", "echo", {"text": f"m{i}"}),)),
                finish_reason="tool_calls",
            ),
        )
        for i in range(turns)
    ]
    return ScriptedChat([*replies, Streamed(["do", "ne"])])


async def garbage_of(run: Callable[[], Awaitable[object]]) -> list[object]:
    """The objects the garbage collector finds unreachable after ``run`` (after a warm-up
    run, with the collector off while it runs)."""
    await run()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        await run()
        gc.collect()
        found = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    return found


async def test_the_core_loop_leaves_no_cycles() -> None:
    async def run() -> object:
        return await run_conversation(
            script(3),
            TOOLS,
            [UserMessage("go")],
            LoopParams(max_turns=5, system_prompt="You echo."),
        )

    assert await garbage_of(run) == []


async def test_the_agent_with_the_coding_preset_and_a_session_leaves_no_cycles(
    tmp_path: Path,
) -> None:
    policies = presets.coding_agent(
        workspace=tmp_path, context_budget_tokens=10**9, spend_tokens=10**12
    )
    agent = Agent(
        script(0),
        TOOLS,
        policies=policies,
        system_prompt="You echo.",
        session_dir=tmp_path / "sessions",
        max_turns=12,
    )
    events: list[object] = []
    agent.events.on("*", events.append)

    async def run() -> object:
        agent.chat = script(10)
        outcome = await agent.run("go")
        assert outcome.stopped_reason == "final"
        return outcome

    assert await garbage_of(run) == []
    assert any(type(e).__name__ == "TextDeltaEvent" for e in events)
