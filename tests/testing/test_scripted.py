"""The shipped test doubles behave as documented."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable

import pytest

from agentfsm import Agent, AssistantMessage, ChatResult, ToolCall, ToolResult, Usage, UserMessage
from agentfsm.engine._protocols import ChatDelta
from agentfsm.testing import ScriptedChat, ScriptedTools, ScriptExhausted, tool_reply


async def test_replies_in_order_and_records_requests() -> None:
    chat = ScriptedChat(
        ["one", AssistantMessage("two"), ChatResult(AssistantMessage("3"), Usage(1, 2))]
    )
    first = await chat([UserMessage("a")], (), temperature=0.5)
    assert first.message == AssistantMessage("one")
    assert first.finish_reason == "stop"
    assert (await chat([UserMessage("b")], ())).message.content == "two"
    third = await chat([UserMessage("c")], (), max_tokens=7)
    assert third.usage == Usage(1, 2)
    assert [r.messages[0].content for r in chat.requests] == ["a", "b", "c"]
    assert chat.requests[0].temperature == 0.5
    assert chat.requests[2].max_tokens == 7
    with pytest.raises(ScriptExhausted, match="called 4 times but has 3 replies"):
        await chat([], ())


async def test_scripted_errors_are_raised() -> None:
    chat = ScriptedChat([TimeoutError("slow")])
    with pytest.raises(TimeoutError, match="slow"):
        await chat([], ())


async def test_function_scripts_and_deltas() -> None:
    async def script(messages: object) -> str:
        return "streamed"

    chat = ScriptedChat(script, usage=Usage(3, 4))
    deltas: list[ChatDelta] = []
    result = await chat([], (), on_delta=deltas.append)
    assert result.usage == Usage(3, 4)
    assert deltas == [ChatDelta("text", "streamed")]


async def test_tool_reply_and_scripted_tools() -> None:
    message = tool_reply(("add", {"a": 1, "b": 2}), ToolCall("x", "fail", {}))
    assert [c.id for c in message.tool_calls] == ["call_1", "x"]
    tools = ScriptedTools(
        {"add": lambda a, b: str(a + b), "fail": lambda: ToolResult(False, "", "no")}
    )
    assert await tools.run(message.tool_calls[0]) == ToolResult(True, "3")
    assert await tools.run(message.tool_calls[1]) == ToolResult(False, "", "no")
    unknown = await tools.run(ToolCall("y", "nope", {}))
    assert not unknown.ok
    assert "available: add, fail" in (unknown.error or "")
    bad_args = await tools.run(ToolCall("z", "add", {"a": 1}))
    assert not bad_args.ok
    assert "TypeError" in (bad_args.error or "")
    assert [s.name for s in tools.specs()] == ["add", "fail"]


async def test_sync_tools_run_in_a_worker_thread() -> None:
    loop_thread = threading.get_ident()
    seen: list[int] = []

    def sync_tool() -> str:
        seen.append(threading.get_ident())
        return "sync"

    async def async_tool() -> str:
        seen.append(threading.get_ident())
        return "async"

    def returns_awaitable() -> Awaitable[str]:
        return async_tool()

    tools = ScriptedTools({"s": sync_tool, "a": async_tool, "r": returns_awaitable})
    assert await tools.run(ToolCall("1", "s", {})) == ToolResult(True, "sync")
    assert await tools.run(ToolCall("2", "a", {})) == ToolResult(True, "async")
    assert await tools.run(ToolCall("3", "r", {})) == ToolResult(True, "async")
    assert seen[0] != loop_thread
    assert seen[1:] == [loop_thread, loop_thread]


async def test_an_interrupt_does_not_wait_for_a_blocking_sync_tool() -> None:
    started = threading.Event()
    release = threading.Event()

    def blocking() -> str:
        started.set()
        release.wait(3)  # blocks its thread for 3 s, like time.sleep(3)
        return "too late"

    agent = Agent(
        ScriptedChat([tool_reply(("blocking", {})), "unreachable"]),
        ScriptedTools({"blocking": blocking}),
    )
    began = time.monotonic()
    try:
        run = asyncio.create_task(agent.run("go"))
        await asyncio.sleep(0.1)
        assert started.is_set()  # the loop stayed free while the tool blocked
        agent.interrupt()
        outcome = await asyncio.wait_for(run, 5)
        took = time.monotonic() - began
    finally:
        release.set()
    assert outcome.stopped_reason == "aborted"
    assert took < 2, f"the interrupt took {took:.2f} s"


def test_a_bare_string_script_is_refused_with_the_list_it_meant() -> None:
    with pytest.raises(TypeError, match=r"did you mean ScriptedChat\(\['hello'\]\)\?"):
        ScriptedChat("hello")
    with pytest.raises(TypeError, match=r"not a bytes"):
        ScriptedChat(b"hello")  # type: ignore[arg-type]
