"""Both adapters report the provider's response id, streamed and not."""

from __future__ import annotations

from agentfsm import UserMessage
from agentfsm.adapters.providers import AnthropicChat, OpenAIChat
from agentfsm.conformance._frames import DONE, chunk, completion, event
from agentfsm.testing import FakeProviderServer, Reply


async def test_openai_response_id_streamed_and_not() -> None:
    with FakeProviderServer() as server:
        server.enqueue(
            Reply.sse([chunk({"content": "hi"}), chunk({}, finish="stop"), DONE]),
            Reply.json(completion({"role": "assistant", "content": "hi"})),
        )
        streamed = OpenAIChat("m", base_url=f"{server.base_url}/v1", api_key="k")
        plain = OpenAIChat("m", base_url=f"{server.base_url}/v1", api_key="k", stream=False)
        first = await streamed([UserMessage("x")], ())
        second = await plain([UserMessage("x")], ())
    assert (first.response_id, second.response_id) == ("chatcmpl-1", "chatcmpl-1")


async def test_anthropic_response_id_streamed_and_not() -> None:
    message = {"id": "msg_01", "model": "claude-test", "usage": {"input_tokens": 1}}
    body = {
        "id": "msg_02",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    frames = [
        event("message_start", {"message": message}),
        event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "hi"}}),
        event("content_block_stop", {"index": 0}),
        event("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {}}),
        event("message_stop", {}),
    ]
    with FakeProviderServer() as server:
        server.enqueue(Reply.sse(frames), Reply.json(body))
        streamed = AnthropicChat("claude-test", base_url=server.base_url, api_key="k")
        plain = AnthropicChat("claude-test", base_url=server.base_url, api_key="k", stream=False)
        first = await streamed([UserMessage("x")], ())
        second = await plain([UserMessage("x")], ())
    assert (first.response_id, second.response_id) == ("msg_01", "msg_02")
