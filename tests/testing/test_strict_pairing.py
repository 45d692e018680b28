"""``FakeProviderServer(strict=True)``: the providers' tool-call pairing rules, on the wire."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agentfsm import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from agentfsm.adapters.providers import AnthropicChat, OpenAIChat, ProviderError
from agentfsm.testing import FakeProviderServer, Reply
from agentfsm.testing._pairing import (
    anthropic_pairing_problem,
    openai_pairing_problem,
    pairing_problem,
)

CALL = AssistantMessage("", tool_calls=(ToolCall("c1", "ls", {}), ToolCall("c2", "ls", {})))
VALID: list[Message] = [
    UserMessage("go"),
    CALL,
    ToolMessage("c2", "b"),
    ToolMessage("c1", "a"),
    UserMessage("more"),
]
UNANSWERED: list[Message] = [UserMessage("go"), CALL, ToolMessage("c1", "a"), UserMessage("x")]


def _openai(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "messages": list(messages)}


def test_openai_rules() -> None:
    asked = {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]}
    user = {"role": "user", "content": "x"}
    answer_a = {"role": "tool", "tool_call_id": "a", "content": "1"}
    answer_b = {"role": "tool", "tool_call_id": "b", "content": "2"}
    assert openai_pairing_problem(_openai(user, asked, answer_b, answer_a, user)) is None
    assert "not answered: b" in str(openai_pairing_problem(_openai(user, asked, answer_a, user)))
    assert "without a tool message: a, b" in str(openai_pairing_problem(_openai(user, asked)))
    assert "answers none" in str(openai_pairing_problem(_openai(user, answer_a)))
    twice = _openai(user, asked, answer_a, answer_a, answer_b)
    assert "answers none" in str(openai_pairing_problem(twice))
    assert openai_pairing_problem({"messages": 5}) == "messages: expected an array"


def test_anthropic_rules() -> None:
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls"}]}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    text = {"type": "text", "text": "and"}
    good = {
        "messages": [
            {"role": "user", "content": "go"},
            use,
            {"role": "user", "content": [result, text]},
        ]
    }
    assert anthropic_pairing_problem(good) is None
    missing = {
        "messages": [{"role": "user", "content": "go"}, use, {"role": "user", "content": "x"}]
    }
    assert "without `tool_result`" in str(anthropic_pairing_problem(missing))
    late = {
        "messages": [
            {"role": "user", "content": "go"},
            use,
            {"role": "user", "content": [text, result]},
        ]
    }
    assert "must come first" in str(anthropic_pairing_problem(late))
    stray = {"messages": [{"role": "user", "content": [result]}]}
    assert "unexpected `tool_use_id`" in str(anthropic_pairing_problem(stray))
    twice = {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}
    assert "alternate" in str(anthropic_pairing_problem(twice))
    assert pairing_problem("/v1/messages?beta=1", twice) is not None
    assert pairing_problem("/v1/models", twice) is None


OPENAI_OK = Reply.json(
    {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }
)
ANTHROPIC_OK = Reply.json(
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_strict_server_rejects_broken_histories_like_the_providers(provider: str) -> None:
    async with FakeProviderServer(strict=True) as server:
        if provider == "openai":
            chat: Any = OpenAIChat("m", base_url=f"{server.base_url}/v1", api_key="k", stream=False)
            ok = OPENAI_OK
        else:
            chat = AnthropicChat("m", base_url=server.base_url, api_key="k", stream=False)
            ok = ANTHROPIC_OK
        server.enqueue(ok)
        result = await chat(VALID, [])
        assert result.message.content == "ok"
        with pytest.raises(ProviderError) as caught:
            await chat(UNANSWERED, [])
        assert caught.value.status == 400
        assert caught.value.kind == "bad_request"
        assert "not answered" in str(caught.value) or "without `tool_result`" in str(caught.value)
        # The adapters send an orphan result as user text; sent raw, it is refused.
        path = "/v1/chat/completions" if provider == "openai" else "/v1/messages"
        body = (
            {
                "messages": [
                    {"role": "user", "content": "go"},
                    {"role": "tool", "tool_call_id": "c9"},
                ]
            }
            if provider == "openai"
            else {
                "messages": [
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c9"}]}
                ]
            }
        )
        async with httpx.AsyncClient() as client:
            response = await client.post(f"{server.base_url}{path}", json=body)
        assert response.status_code == 400
        assert response.json()["error"]["type"] == "invalid_request_error"
        assert server.pending == 0
        assert len(server.requests) == 3


async def test_the_default_server_is_not_strict() -> None:
    async with FakeProviderServer() as server:
        server.enqueue(OPENAI_OK)
        chat = OpenAIChat("m", base_url=f"{server.base_url}/v1", api_key="k", stream=False)
        assert (await chat(UNANSWERED, [])).message.content == "ok"
