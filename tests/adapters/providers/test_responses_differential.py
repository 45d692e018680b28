"""OpenAIResponses against the official ``openai`` SDK on the same bytes.

The turns are scripted (``agentfsm.testing.responses_reply``: written by the project, not
recorded) and served over loopback; the SDK's own stream accumulator reading them is also
a check that ``FakeProviderServer`` speaks the wire the SDK expects.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentfsm import AssistantMessage, ChatResult, ToolCall, Usage, UserMessage
from agentfsm.adapters.providers import OpenAIResponses, RetryPolicy
from agentfsm.testing import FakeProviderServer, responses_reply

openai = pytest.importorskip("openai", reason="the openai SDK is a dev-only dependency")

TURNS: dict[str, ChatResult] = {
    "text": ChatResult(AssistantMessage("Hello \u2028 there, 東京."), Usage(11, 4)),
    "parallel calls": ChatResult(
        AssistantMessage(
            "Checking both.",
            tool_calls=[
                ToolCall("call_a", "get_weather", {"city": "Paris"}),
                ToolCall("call_b", "get_weather", {"city": "Tokyo"}),
            ],
        ),
        Usage(40, 22, cache_read_tokens=32),
    ),
    "reasoning": ChatResult(
        AssistantMessage(
            "391",
            reasoning="17 * 23 = 391.",
            reasoning_items=[{"encrypted_content": "gAAAA-opaque"}],
        ),
        Usage(20, 50, reasoning_tokens=30),
    ),
    "incomplete": ChatResult(AssistantMessage("1, 2, 3,"), Usage(9, 5), "length"),
}


async def ours(url: str, stream: bool) -> dict[str, Any]:
    chat = OpenAIResponses("m", base_url=url, stream=stream, retry=RetryPolicy(max_attempts=1))
    try:
        result = await chat([UserMessage("x")], [])
    finally:
        await chat.aclose()
    usage = result.usage
    assert usage is not None
    return {
        "text": result.message.content,
        "calls": [(c.id, c.name, c.arguments) for c in result.message.tool_calls],
        "usage": (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens),
        "reasoning_tokens": usage.reasoning_tokens,
        "encrypted": [item["encrypted_content"] for item in result.message.reasoning_items],
        "incomplete": result.finish_reason == "length",
    }


async def sdk(url: str, stream: bool) -> dict[str, Any]:
    client = openai.AsyncOpenAI(base_url=url, api_key="sk-test", max_retries=0)
    try:
        if stream:  # the SDK's accumulator reads every event; the last one holds the response
            async with client.responses.stream(model="m", input="x") as events:
                async for event in events:
                    if event.type in ("response.completed", "response.incomplete"):
                        response = event.response
        else:
            response = await client.responses.create(model="m", input="x")
    finally:
        await client.close()
    usage = response.usage
    assert usage is not None
    calls = [item for item in response.output if item.type == "function_call"]
    return {
        "text": response.output_text,
        "calls": [(c.call_id, c.name, json.loads(c.arguments)) for c in calls],
        "usage": (
            usage.input_tokens,
            usage.output_tokens,
            usage.input_tokens_details.cached_tokens,
        ),
        "reasoning_tokens": usage.output_tokens_details.reasoning_tokens,
        "encrypted": [i.encrypted_content for i in response.output if i.type == "reasoning"],
        "incomplete": response.status == "incomplete",
    }


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "unstreamed"])
@pytest.mark.parametrize("name", list(TURNS))
async def test_the_adapter_reads_what_the_sdk_reads(name: str, stream: bool) -> None:
    async with FakeProviderServer() as server:
        reply = responses_reply(TURNS[name], stream=stream)
        server.enqueue(reply, reply)
        url = f"{server.base_url}/v1"
        got, expected = await ours(url, stream), await sdk(url, stream)
    assert got == expected
