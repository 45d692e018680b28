"""Tool-use ids on the Anthropic wire: a reply's repeated ids are made unique (as on the
OpenAI wire), and every id sent matches ``^[a-zA-Z0-9_-]+$`` within 64 characters, rewritten
the same way in a ``tool_use`` and its ``tool_result``, also after a ``Router`` failover from
an OpenAI-wire provider."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pytest

from agentfsm import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from agentfsm.adapters.providers import (
    AnthropicChat,
    OpenAIChat,
    RetryPolicy,
    Router,
    Timeouts,
)
from agentfsm.adapters.providers._anthropic_wire import MAX_TOOL_USE_ID, build_request
from agentfsm.agent import Agent
from agentfsm.conformance._frames import event
from agentfsm.testing import FakeProviderServer, Reply, ScriptedTools

FAST = Timeouts(connect=2, first_byte=2, idle=2, terminal_grace=0.3)
ONCE = RetryPolicy(max_attempts=1)
TOOLS = [ToolSpec("lookup", "Look something up.", {"type": "object", "properties": {}})]
PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")

ODD_IDS = [
    "call_abc.def:1",
    "call_abc.def:2",
    "call|one",
    "call one",
    "call_é",
    "call_\udcff\ud800",
    "x\u2028y",
    "",
    "a" * 200,
    "a" * 199 + "b",
    "toolu_01ABCdef",
    "call_abc_def_1",  # what a naive rewrite of "call_abc.def:1" would give
]


def message(*blocks: dict[str, Any], stop: str = "tool_use") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(blocks),
        "stop_reason": stop,
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }


def use(call_id: str, city: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "lookup", "input": {"city": city}}


def streamed(*blocks: dict[str, Any]) -> Reply:
    frames = [event("message_start", {"message": {"id": "msg_1", "model": "m", "usage": {}}})]
    for index, block in enumerate(blocks):
        start = {**block, "input": {}}
        frames.append(event("content_block_start", {"index": index, "content_block": start}))
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        frames.append(event("content_block_delta", {"index": index, "delta": delta}))
        frames.append(event("content_block_stop", {"index": index}))
    frames.append(event("message_delta", {"delta": {"stop_reason": "tool_use"}, "usage": {}}))
    frames.append(event("message_stop", {}))
    return Reply.sse(frames)


async def calls_of(reply: Reply, *, stream: bool) -> list[tuple[str, Any]]:
    with FakeProviderServer() as server:
        server.enqueue(reply)
        chat = AnthropicChat(
            "m", base_url=server.base_url, timeouts=FAST, retry=ONCE, stream=stream
        )
        try:
            result = await chat([UserMessage("Weather?")], TOOLS)
        finally:
            await chat.aclose()
    return [(c.id, c.arguments["city"]) for c in result.message.tool_calls]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_a_repeated_tool_use_id_is_made_unique(stream: bool) -> None:
    blocks = [use("toolu_a", "Paris"), use("toolu_b", "Tokyo"), use("toolu_a", "Lima")]
    reply = streamed(*blocks) if stream else Reply.json(message(*blocks))
    got = await calls_of(reply, stream=stream)
    assert [city for _, city in got] == ["Paris", "Tokyo", "Lima"]
    assert got[0][0] == "toolu_a"
    assert got[1][0] == "toolu_b"
    assert len({call_id for call_id, _ in got}) == 3
    assert PATTERN.match(got[2][0])


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_empty_ids_get_distinct_ones(stream: bool) -> None:
    blocks = [use("", "Paris"), use("", "Tokyo")]
    reply = streamed(*blocks) if stream else Reply.json(message(*blocks))
    got = await calls_of(reply, stream=stream)
    ids = [call_id for call_id, _ in got]
    assert all(ids)
    assert len(set(ids)) == 2


def history(ids: Sequence[str]) -> list[Message]:
    """One assistant turn calling with each id, its results in order, then a later turn
    reusing the first id."""
    calls = [ToolCall(call_id, "lookup", {"n": n}) for n, call_id in enumerate(ids)]
    out: list[Message] = [UserMessage("go"), AssistantMessage("", tool_calls=tuple(calls))]
    out.extend(ToolMessage(call_id, f"result {n}") for n, call_id in enumerate(ids))
    out.append(AssistantMessage("", tool_calls=(ToolCall(ids[0], "lookup", {"n": 99}),)))
    out.append(ToolMessage(ids[0], "result 99"))
    return out


def pairs(body: dict[str, Any]) -> tuple[list[tuple[str, Any]], list[tuple[str, str]]]:
    uses, results = [], []
    for turn in body["messages"]:
        if not isinstance(turn["content"], list):
            continue
        for block in turn["content"]:
            if block["type"] == "tool_use":
                uses.append((block["id"], block["input"]["n"]))
            elif block["type"] == "tool_result":
                results.append((block["tool_use_id"], block["content"]))
    return uses, results


def assert_valid_pairing(body: dict[str, Any], count: int) -> None:
    uses, results = pairs(body)
    assert len(uses) == len(results) == count + 1
    for (use_id, n), (result_id, content) in zip(uses, results, strict=True):
        assert PATTERN.match(use_id), use_id
        assert len(use_id) <= MAX_TOOL_USE_ID, use_id
        assert result_id == use_id
        assert content == f"result {n}"
    first_turn = [use_id for use_id, _ in uses[:count]]
    assert len(set(first_turn)) == count  # the API rejects a turn repeating an id


def test_odd_ids_are_rewritten_consistently_and_stay_distinct() -> None:
    body = build_request(
        "m", history(ODD_IDS), TOOLS, temperature=None, max_tokens=None, stream=False
    )
    assert_valid_pairing(body, len(ODD_IDS))
    uses, _ = pairs(body)
    assert uses[-1][0] == uses[0][0]  # the same id in a later turn: the same wire id
    valid = {i for i in ODD_IDS if PATTERN.match(i) and len(i) <= MAX_TOOL_USE_ID}
    assert {u for u, _ in uses} >= valid  # ids the API accepts are sent as they are
    again = build_request(
        "m", history(ODD_IDS), TOOLS, temperature=None, max_tokens=None, stream=False
    )
    assert again == body  # deterministic: every request of a run rewrites the same way


def test_a_turn_repeating_an_id_sends_distinct_ids_paired_in_order() -> None:
    ids = ["dup", "dup", "call.x", "call.x", "other"]
    body = build_request("m", history(ids), TOOLS, temperature=None, max_tokens=None, stream=False)
    assert_valid_pairing(body, len(ids))
    uses, _ = pairs(body)
    assert uses[0][0] == "dup"
    assert uses[1][0] != "dup"


def test_a_result_without_its_call_stays_text() -> None:
    messages: list[Message] = [
        UserMessage("go"),
        AssistantMessage("", tool_calls=(ToolCall("a.b", "lookup", {"n": 0}),)),
        ToolMessage("a.b", "result 0"),
        ToolMessage("a.b", "again"),  # a second answer to one call
    ]
    body = build_request("m", messages, TOOLS, temperature=None, max_tokens=None, stream=False)
    blocks = body["messages"][-1]["content"]
    assert [b["type"] for b in blocks] == ["tool_result", "text"]
    assert "again" in blocks[1]["text"]


def openai_tool_reply(ids: Sequence[str]) -> Reply:
    calls = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"n": n})},
        }
        for n, call_id in enumerate(ids)
    ]
    return Reply.json(
        {
            "id": "c1",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "tool_calls": calls},
                    "finish_reason": "tool_calls",
                }
            ],
        }
    )


async def test_router_failover_from_openai_sends_a_valid_anthropic_history() -> None:
    ids = ["call_abc.def:1", "call|2", "call 3", "call_é", "x" * 100]
    with FakeProviderServer() as openai_server, FakeProviderServer() as anthropic_server:
        openai_server.enqueue(
            openai_tool_reply(ids), Reply.json({"error": {"message": "down"}}, 500)
        )
        text = {"type": "text", "text": "done"}
        anthropic_server.enqueue(Reply.json(message(text, stop="end_turn")))
        first = OpenAIChat(
            "m",
            base_url=openai_server.base_url,
            timeouts=FAST,
            retry=ONCE,
            stream=False,
            name="first",
        )
        second = AnthropicChat(
            "m",
            base_url=anthropic_server.base_url,
            timeouts=FAST,
            retry=ONCE,
            stream=False,
            name="second",
        )
        router = Router([first, second])
        tools = ScriptedTools({"lookup": lambda n: f"result {n}"})
        try:
            outcome = await Agent(router, tools).run("go")
        finally:
            await first.aclose()
            await second.aclose()
    assert outcome.stopped_reason == "final"
    assert router.attempts == ["first", "second"]
    (request,) = anthropic_server.requests
    body = request.json()
    uses, results = pairs(body)
    assert [n for _, n in uses] == list(range(len(ids)))
    assert len({u for u, _ in uses}) == len(ids)
    for (use_id, n), (result_id, content) in zip(uses, results, strict=True):
        assert PATTERN.match(use_id), use_id
        assert len(use_id) <= MAX_TOOL_USE_ID
        assert result_id == use_id
        assert content == f"result {n}"
