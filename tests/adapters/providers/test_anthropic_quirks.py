"""AnthropicQuirks: what AnthropicChat sends for a server that needs a profile."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentfsm import AssistantMessage, Message, ToolCall, ToolMessage, ToolSpec, UserMessage
from agentfsm.adapters.providers import AnthropicChat, AnthropicQuirks, RetryPolicy
from agentfsm.testing import FakeProviderServer, Reply

TOOLS = [ToolSpec("lookup", "Look something up.", {"type": "object", "properties": {}})]
ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "content": [{"type": "text", "text": "done"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}


async def sent(
    server: FakeProviderServer,
    quirks: AnthropicQuirks | None,
    tools: list[ToolSpec],
    messages: list[Message] | None = None,
) -> dict[str, Any]:
    """The JSON body the server received for one call."""
    server.enqueue(Reply.json(ANSWER))
    chat = AnthropicChat(
        "m", base_url=server.base_url, stream=False, quirks=quirks, retry=RetryPolicy(1)
    )
    try:
        await chat(messages or [UserMessage("Look it up.")], tools)
    finally:
        await chat.aclose()
    body: dict[str, Any] = json.loads(server.requests[-1].body)
    return body


async def test_no_tool_choice_by_default(server: FakeProviderServer) -> None:
    body = await sent(server, None, TOOLS)
    assert "tool_choice" not in body
    assert body["tools"][0]["name"] == "lookup"


async def test_explicit_tool_choice_sends_auto_with_tools(server: FakeProviderServer) -> None:
    body = await sent(server, AnthropicQuirks(explicit_tool_choice=True), TOOLS)
    assert body["tool_choice"] == {"type": "auto"}
    assert b'"tool_choice": {"type": "auto"}' in server.requests[-1].body


async def test_explicit_tool_choice_without_tools_sends_none(server: FakeProviderServer) -> None:
    body = await sent(server, AnthropicQuirks(explicit_tool_choice=True), [])
    assert "tool_choice" not in body
    assert "tools" not in body


@pytest.mark.parametrize("string_content", [False, True])
async def test_string_content(server: FakeProviderServer, string_content: bool) -> None:
    history: list[Message] = [
        UserMessage("Look it up."),
        AssistantMessage("", tool_calls=[ToolCall("toolu_1", "lookup", {})]),
        ToolMessage("toolu_1", "found"),
        AssistantMessage("It is found."),
        UserMessage("Thanks."),
    ]
    body = await sent(server, AnthropicQuirks(string_content=string_content), TOOLS, history)
    contents = [turn["content"] for turn in body["messages"]]
    if string_content:
        assert contents[0] == "Look it up."
        assert contents[3] == "It is found."
        assert contents[4] == "Thanks."
    else:
        assert contents[0] == [{"type": "text", "text": "Look it up."}]
        assert contents[4] == [{"type": "text", "text": "Thanks."}]
    # Tool use and tool results stay blocks either way.
    assert contents[1][0]["type"] == "tool_use"
    assert contents[2][0]["type"] == "tool_result"


async def test_stream_with_tools_false_sends_tool_requests_unstreamed(
    server: FakeProviderServer,
) -> None:
    quirks = AnthropicQuirks(stream_with_tools=False)
    for tools in (TOOLS, []):
        server.enqueue(Reply.json(ANSWER))
        chat = AnthropicChat("m", base_url=server.base_url, quirks=quirks, retry=RetryPolicy(1))
        try:
            result = await chat([UserMessage("Look it up.")], tools)
        finally:
            await chat.aclose()
        assert result.message.content == "done"
    with_tools, without = (json.loads(r.body) for r in server.requests)
    assert "stream" not in with_tools
    assert server.requests[0].headers["accept"] == "application/json"
    assert without["stream"] is True
