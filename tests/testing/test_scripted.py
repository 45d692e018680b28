"""The shipped test doubles behave as documented."""

from __future__ import annotations

import pytest

from agentfsm import AssistantMessage, ChatResult, ToolCall, ToolResult, Usage, UserMessage
from agentfsm.engine.protocols import ChatDelta
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
