"""AnthropicChat folds consecutive ``tool_use`` blocks that share one id into one call.

LiteLLM's Messages route streams a tool call as one ``tool_use`` block per chunk, every block
with the same id and name and one fragment of the arguments.
"""

from __future__ import annotations

import json
from typing import Any

from agentfsm import ToolSpec, UserMessage
from agentfsm.adapters.providers import AnthropicChat, RetryPolicy, Timeouts
from agentfsm.conformance._frames import event
from agentfsm.testing import FakeProviderServer, Reply

FAST = Timeouts(connect=2, first_byte=2, idle=2, terminal_grace=0.3)
TOOLS = [
    ToolSpec(
        "get_weather",
        "Get the weather.",
        {"type": "object", "properties": {"city": {"type": "string"}}},
    )
]


def tool_block(index: int, call_id: str, *parts: str) -> list[str]:
    block = {"type": "tool_use", "id": call_id, "name": "get_weather", "input": {}}
    return [
        event("content_block_start", {"index": index, "content_block": block}),
        *(
            event(
                "content_block_delta",
                {"index": index, "delta": {"type": "input_json_delta", "partial_json": p}},
            )
            for p in parts
        ),
        event("content_block_stop", {"index": index}),
    ]


def stream(*blocks: list[str]) -> Reply:
    start = {"message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 9}}}
    return Reply.sse(
        [
            event("message_start", start),
            *(frame for block in blocks for frame in block),
            event("message_delta", {"delta": {"stop_reason": "tool_use"}, "usage": {}}),
            event("message_stop", {}),
        ]
    )


async def calls_of(reply: Reply) -> list[tuple[str, str, Any, Any]]:
    with FakeProviderServer() as server:
        server.enqueue(reply)
        chat = AnthropicChat(
            "m", base_url=server.base_url, timeouts=FAST, retry=RetryPolicy(max_attempts=1)
        )
        try:
            result = await chat([UserMessage("Weather in Paris?")], TOOLS)
        finally:
            await chat.aclose()
    return [(c.id, c.name, c.arguments, c.raw_arguments) for c in result.message.tool_calls]


async def test_one_block_per_chunk_with_one_id_is_one_call() -> None:
    fragments = ['{"ci', 'ty": ', '"Par', 'is"}']
    blocks = [tool_block(i + 1, "toolu_x", part) for i, part in enumerate(fragments)]
    assert await calls_of(stream(*blocks)) == [("toolu_x", "get_weather", {"city": "Paris"}, None)]


async def test_the_same_index_restarted_with_the_same_id_keeps_earlier_fragments() -> None:
    blocks = [tool_block(1, "toolu_x", '{"city": '), tool_block(1, "toolu_x", '"Paris"}')]
    assert await calls_of(stream(*blocks)) == [("toolu_x", "get_weather", {"city": "Paris"}, None)]


async def test_many_chunks_stay_one_call_within_the_block_limit() -> None:
    text = json.dumps({"city": "Paris " * 400})
    blocks = [tool_block(i + 1, "toolu_x", ch) for i, ch in enumerate(text)]
    assert len(blocks) > 1024
    assert await calls_of(stream(*blocks)) == [("toolu_x", "get_weather", json.loads(text), None)]


async def test_different_ids_stay_separate_calls_and_a_repeated_id_is_made_unique() -> None:
    blocks = [
        tool_block(1, "toolu_a", '{"city": "Paris"}'),
        tool_block(2, "toolu_b", '{"city": "Tokyo"}'),
        tool_block(3, "toolu_a", '{"city": "Lima"}'),
    ]
    got = await calls_of(stream(*blocks))
    assert [a for _, _, a, _ in got] == [{"city": "Paris"}, {"city": "Tokyo"}, {"city": "Lima"}]
    assert [i for i, _, _, _ in got[:2]] == ["toolu_a", "toolu_b"]
    assert got[2][0] not in ("toolu_a", "toolu_b")  # one reply never repeats an id
