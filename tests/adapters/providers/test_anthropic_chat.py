"""AnthropicChat against a real HTTP server on loopback."""

from __future__ import annotations

from typing import Any

import pytest

from agentfsm import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from agentfsm.adapters.providers import AnthropicChat, ProviderError, RetryPolicy, Timeouts
from agentfsm.conformance._frames import event
from agentfsm.engine._protocols import ChatDelta
from agentfsm.testing import FakeProviderServer, Reply

FAST = Timeouts(connect=2, first_byte=2, idle=2, terminal_grace=0.3)
TOOLS = [ToolSpec("lookup", "Look something up.", {"type": "object", "properties": {}})]


def chat(server: FakeProviderServer, **options: Any) -> AnthropicChat:
    options.setdefault("timeouts", FAST)
    options.setdefault("retry", RetryPolicy(max_attempts=1))
    return AnthropicChat("claude-test", base_url=server.base_url, **options)


def stream(
    *blocks: str,
    usage_start: dict[str, Any] | None = None,
    stop: str = "end_turn",
    output_tokens: int = 5,
) -> list[str]:
    start = {
        "message": {
            "id": "msg_1",
            "model": "claude-test",
            "usage": usage_start or {"input_tokens": 10, "output_tokens": 1},
        }
    }
    return [
        event("message_start", start),
        event("ping", {}),
        *blocks,
        event(
            "message_delta",
            {"delta": {"stop_reason": stop}, "usage": {"output_tokens": output_tokens}},
        ),
        event("message_stop", {}),
    ]


async def test_stream_text_thinking_and_tool_use(server: FakeProviderServer) -> None:
    frames = stream(
        event(
            "content_block_start",
            {"index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        ),
        event(
            "content_block_delta",
            {"index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me look."}},
        ),
        event(
            "content_block_delta",
            {"index": 0, "delta": {"type": "signature_delta", "signature": "sig=="}},
        ),
        event("content_block_stop", {"index": 0}),
        event("content_block_start", {"index": 1, "content_block": {"type": "text", "text": ""}}),
        event(
            "content_block_delta",
            {"index": 1, "delta": {"type": "text_delta", "text": "Checking."}},
        ),
        event("content_block_stop", {"index": 1}),
        event(
            "content_block_start",
            {
                "index": 2,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "lookup",
                    "input": {},
                },
            },
        ),
        event(
            "content_block_delta",
            {"index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}},
        ),
        event("content_block_stop", {"index": 2}),
        event(
            "content_block_start",
            {
                "index": 3,
                "content_block": {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "lookup",
                    "input": {},
                },
            },
        ),
        event(
            "content_block_delta",
            {"index": 3, "delta": {"type": "input_json_delta", "partial_json": '{"q": '}},
        ),
        event(
            "content_block_delta",
            {"index": 3, "delta": {"type": "input_json_delta", "partial_json": '"x"}'}},
        ),
        event("content_block_stop", {"index": 3}),
        usage_start={
            "input_tokens": 7,
            "cache_read_input_tokens": 9000,
            "cache_creation_input_tokens": 1000,
            "output_tokens": 1,
        },
        stop="tool_use",
        output_tokens=42,
    )
    server.enqueue(Reply.sse(frames))
    deltas: list[ChatDelta] = []
    model = chat(server, api_key="sk-ant-test")
    result = await model(
        [SystemMessage("be brief"), UserMessage("hi")], TOOLS, on_delta=deltas.append
    )
    await model.aclose()
    assert result.message.content == "Checking."
    assert result.message.reasoning == "Let me look."
    assert [(c.id, c.arguments) for c in result.message.tool_calls] == [
        ("toolu_1", {}),
        ("toolu_2", {"q": "x"}),
    ]
    assert result.finish_reason == "tool_calls"
    # Input includes cache reads and writes; message_start and message_delta are not summed.
    assert result.usage == Usage(10007, 42, cache_read_tokens=9000, cache_write_tokens=1000)
    assert deltas == [ChatDelta("thinking", "Let me look."), ChatDelta("text", "Checking.")]
    request = server.requests[0]
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    body = request.json()
    assert body["system"] == "be brief"
    assert body["stream"] is True
    assert body["tools"] == [
        {
            "name": "lookup",
            "description": "Look something up.",
            "input_schema": {"type": "object", "properties": {}},
        }
    ]


async def test_in_stream_overloaded_error_is_retried_before_any_output(
    server: FakeProviderServer,
) -> None:
    overloaded = event("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}})
    ok = stream(
        event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "fine"}}),
    )
    server.enqueue(
        Reply.sse(
            [event("message_start", {"message": {"usage": {"input_tokens": 1}}}), overloaded]
        ),
        Reply.sse(ok),
    )
    model = chat(server, retry=RetryPolicy(max_attempts=3, initial_delay=0.01, jitter=0))
    result = await model([UserMessage("hi")], [], on_delta=lambda d: None)
    await model.aclose()
    assert result.message.content == "fine"
    assert len(server.requests) == 2


async def test_in_stream_error_after_output_is_not_retried(server: FakeProviderServer) -> None:
    frames = [
        event("message_start", {"message": {"usage": {"input_tokens": 1}}}),
        event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "half"}}),
        event("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]
    server.enqueue(Reply.sse(frames), Reply.sse(frames))
    model = chat(server, retry=RetryPolicy(max_attempts=3, initial_delay=0.01))
    with pytest.raises(ProviderError) as raised:
        await model([UserMessage("hi")], [], on_delta=lambda d: None)
    await model.aclose()
    assert (raised.value.kind, raised.value.in_stream, raised.value.response_started) == (
        "overloaded",
        True,
        True,
    )
    assert len(server.requests) == 1


async def test_stream_cut_before_message_stop(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.sse(
            [
                event("message_start", {"message": {"usage": {"input_tokens": 1}}}),
                event(
                    "content_block_start",
                    {"index": 0, "content_block": {"type": "text", "text": ""}},
                ),
            ]
        )
    )
    model = chat(server)
    with pytest.raises(ProviderError) as raised:
        await model([UserMessage("hi")], [])
    await model.aclose()
    assert raised.value.kind == "connection"


async def test_non_streamed_message_and_history_shape(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.json(
            {
                "type": "message",
                "model": "claude-test",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "text", "text": "Both done."},
                ],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 3, "cache_read_input_tokens": 7, "output_tokens": 4},
            }
        )
    )
    history: list[Message] = [
        UserMessage("do two things"),
        AssistantMessage(
            "On it.", tool_calls=(ToolCall("t1", "lookup", {"q": 1}), ToolCall("t2", "lookup", {}))
        ),
        ToolMessage("t1", "one"),
        ToolMessage("t2", "failed", is_error=True),
        ToolMessage("gone", "a result whose call was summarized away"),
    ]
    model = chat(server, stream=False)
    result = await model(history, TOOLS, max_tokens=100, temperature=0)
    await model.aclose()
    assert result.message == AssistantMessage(
        "Both done.",
        reasoning="hmm",
        reasoning_items=({"type": "thinking", "thinking": "hmm", "signature": "s"},),
    )
    assert result.usage == Usage(10, 4, cache_read_tokens=7)
    assert result.finish_reason == "stop"
    body = server.requests[0].json()
    assert body["max_tokens"] == 100
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    results = body["messages"][2]["content"]  # every result of the parallel call in one turn
    assert results[0] == {"type": "tool_result", "tool_use_id": "t1", "content": "one"}
    assert results[1] == {
        "type": "tool_result",
        "tool_use_id": "t2",
        "content": "failed",
        "is_error": True,
    }
    assert results[2]["type"] == "text"
