"""One base-URL rule for both wires: the adapters and the kit's raw probes agree."""

from __future__ import annotations

import pytest

from agentfsm import UserMessage
from agentfsm.adapters.providers import AnthropicChat, OpenAIChat, RetryPolicy, endpoint_url
from agentfsm.adapters.providers._endpoints import WireName
from agentfsm.conformance import LiveTarget
from agentfsm.conformance._context import LiveContext
from agentfsm.conformance._frames import completion
from agentfsm.testing import FakeProviderServer, Reply

ANTHROPIC_ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}
ONCE = RetryPolicy(max_attempts=1)


@pytest.mark.parametrize(
    ("base", "wire", "url"),
    [
        ("http://h:4000", "openai-chat", "http://h:4000/v1/chat/completions"),
        ("http://h:4000/", "openai-chat", "http://h:4000/v1/chat/completions"),
        ("http://h:4000/v1", "openai-chat", "http://h:4000/v1/chat/completions"),
        ("http://h:4000/v1/", "openai-chat", "http://h:4000/v1/chat/completions"),
        ("http://h:4000", "anthropic", "http://h:4000/v1/messages"),
        ("http://h:4000/v1", "anthropic", "http://h:4000/v1/messages"),
        ("http://h:4000/v1/", "anthropic", "http://h:4000/v1/messages"),
        ("https://api.anthropic.com", "anthropic", "https://api.anthropic.com/v1/messages"),
        ("https://api.openai.com/v1", "openai-chat", "https://api.openai.com/v1/chat/completions"),
        (
            "https://api.groq.com/openai/v1",
            "openai-chat",
            "https://api.groq.com/openai/v1/chat/completions",
        ),
        (
            "https://generativelanguage.googleapis.com/v1beta/openai/",
            "openai-chat",
            "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions",
        ),
        (
            "https://models.github.ai/inference",
            "openai-chat",
            "https://models.github.ai/inference/chat/completions",
        ),
        (
            "https://api.deepseek.com/anthropic",
            "anthropic",
            "https://api.deepseek.com/anthropic/v1/messages",
        ),
        (
            "https://r.example/openai/deployments/d?api-version=2024-06-01",
            "openai-chat",
            "https://r.example/openai/deployments/d/chat/completions?api-version=2024-06-01",
        ),
    ],
)
def test_the_rule(base: str, wire: WireName, url: str) -> None:
    assert endpoint_url(base, wire) == url


BASES = ["", "/", "/v1", "/v1/"]


@pytest.mark.parametrize("suffix", BASES)
async def test_openai_chat_posts_to_v1_with_or_without_it(suffix: str) -> None:
    with FakeProviderServer() as server:
        server.enqueue(Reply.json(completion({"role": "assistant", "content": "hi"})))
        chat = OpenAIChat("m", base_url=server.base_url + suffix, stream=False, retry=ONCE)
        try:
            result = await chat([UserMessage("hello")], [])
        finally:
            await chat.aclose()
        assert [r.path for r in server.requests] == ["/v1/chat/completions"]
    assert result.message.content == "hi"


@pytest.mark.parametrize("suffix", BASES)
async def test_anthropic_chat_posts_to_v1_with_or_without_it(suffix: str) -> None:
    with FakeProviderServer() as server:
        server.enqueue(Reply.json(ANTHROPIC_ANSWER))
        chat = AnthropicChat("m", base_url=server.base_url + suffix, stream=False, retry=ONCE)
        try:
            result = await chat([UserMessage("hello")], [])
        finally:
            await chat.aclose()
        assert [r.path for r in server.requests] == ["/v1/messages"]
    assert result.message.content == "hi"


@pytest.mark.parametrize("suffix", BASES)
@pytest.mark.parametrize(
    ("wire", "path"), [("openai-chat", "/v1/chat/completions"), ("anthropic", "/v1/messages")]
)
async def test_the_kit_raw_probes_go_where_the_adapters_go(
    suffix: str, wire: WireName, path: str
) -> None:
    with FakeProviderServer() as server:
        server.enqueue(Reply.json({"ok": True}))
        live = LiveContext(LiveTarget(server.base_url + suffix, "m", wire))
        raw = await live.raw({"messages": []}, name="probe")
        assert [r.path for r in server.requests] == [path]
    assert raw.status == 200
