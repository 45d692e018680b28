"""Replies read as their wire documents them, where a looser reading lost something: the
deprecated ``function_call``, tool calls keyed by index (a name split over fragments, calls
out of order), calls without an index told apart by where their JSON ends, a cut never
hidden by the calls it cut, usage counts that are not integers, several gzip members, an
event stream under another label, the Responses API's final output, and Anthropic's
thinking signatures kept and sent back."""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx
import pytest

from agentfsm import AssistantMessage, Message, ToolMessage, UserMessage
from agentfsm.adapters.providers import (
    AnthropicChat,
    OpenAIChat,
    OpenAIResponses,
    ProviderError,
    ReplayTransport,
    RetryPolicy,
    Timeouts,
)
from agentfsm.adapters.providers._replay import RecordedResponse
from agentfsm.conformance._frames import DONE, chunk, completion, event, openai_url
from agentfsm.testing import FakeProviderServer, Reply

FAST = Timeouts(connect=2, first_byte=2, idle=2, terminal_grace=0.3)
ONCE = RetryPolicy(max_attempts=1)
_SSE = (("content-type", "text/event-stream"),)

openai = pytest.importorskip("openai", reason="the openai SDK is a dev-only dependency")


async def _read(body: str | bytes, headers: tuple[tuple[str, str], ...] = _SSE) -> Any:
    data = body.encode("utf-8") if isinstance(body, str) else body
    response = RecordedResponse(200, headers, data)
    async with httpx.AsyncClient(transport=ReplayTransport([response])) as client:
        model = OpenAIChat("m", base_url="http://replay/v1", http_client=client, retry=ONCE)
        return await model([UserMessage("x")], [])


async def _sdk_calls(body: str) -> list[tuple[str, str]]:
    """What the official SDK accumulates from the same bytes: (name, arguments) per call."""
    response = RecordedResponse(200, _SSE, body.encode("utf-8"))
    async with httpx.AsyncClient(transport=ReplayTransport([response])) as http:
        client = openai.AsyncOpenAI(
            api_key="replay", base_url="http://replay/v1", http_client=http, max_retries=0
        )
        async with client.chat.completions.stream(
            model="m", messages=[{"role": "user", "content": "x"}]
        ) as stream:
            async for _ in stream:
                pass
            final = await stream.get_final_completion()
    calls = final.choices[0].message.tool_calls or []
    return [(c.function.name, c.function.arguments) for c in calls]


def _fragment(**call: Any) -> str:
    return chunk({"tool_calls": [call]})


async def test_the_deprecated_function_call_is_a_tool_call() -> None:
    legacy = {"name": "get_current_weather", "arguments": '{"location": "Boston"}'}
    body = completion({"role": "assistant", "content": None, "function_call": legacy})
    body["choices"][0]["finish_reason"] = "function_call"
    result = await _read(json.dumps(body), (("content-type", "application/json"),))
    ((name, arguments),) = [(c.name, c.arguments) for c in result.message.tool_calls]
    assert (name, arguments) == ("get_current_weather", {"location": "Boston"})
    assert (result.message.content, result.finish_reason) == ("", "tool_calls")
    stream = (
        chunk({"role": "assistant", "function_call": {"name": "get_current", "arguments": ""}})
        + chunk({"function_call": {"name": "_weather", "arguments": '{"location": '}})
        + chunk({"function_call": {"arguments": '"Boston"}'}})
        + chunk({}, finish="function_call")
        + DONE
    )
    result = await _read(stream)
    ((name, arguments),) = [(c.name, c.arguments) for c in result.message.tool_calls]
    assert (name, arguments) == ("get_current_weather", {"location": "Boston"})


async def test_an_empty_function_call_beside_text_is_no_call() -> None:
    """Snowflake's answer: ``function_call: {name: "", arguments: ""}`` beside the text."""
    empty = {"name": "", "arguments": ""}
    body = completion({"role": "assistant", "content": "Hi", "function_call": empty})
    result = await _read(json.dumps(body), (("content-type", "application/json"),))
    assert (result.message.content, result.message.tool_calls) == ("Hi", ())


async def test_a_name_split_over_fragments_is_joined_as_the_sdk_joins_it() -> None:
    body = (
        _fragment(index=0, id="call_1", type="function", function={"name": "get_", "arguments": ""})
        + _fragment(index=0, function={"name": "weather", "arguments": '{"city": "Paris"}'})
        + chunk({}, finish="tool_calls")
        + DONE
    )
    result = await _read(body)
    assert [(c.name, c.arguments) for c in result.message.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert await _sdk_calls(body) == [("get_weather", '{"city": "Paris"}')]


async def test_calls_come_in_the_order_of_their_indexes() -> None:
    """A fragment's ``index`` is its call's place in the message's ``tool_calls``."""
    body = (
        _fragment(index=1, id="call_b", type="function", function={"name": "b", "arguments": "{}"})
        + _fragment(
            index=0, id="call_a", type="function", function={"name": "a", "arguments": "{}"}
        )
        + chunk({}, finish="tool_calls")
        + DONE
    )
    result = await _read(body)
    assert [c.name for c in result.message.tool_calls] == ["a", "b"]


def _unindexed(*arguments: str) -> str:
    frames = [_fragment(type="function", function={"name": "f", "arguments": a}) for a in arguments]
    return "".join(frames) + chunk({}, finish="tool_calls") + DONE


@pytest.mark.parametrize(
    ("fragments", "calls"),
    [
        # A brace inside a string does not end the object; two objects are two calls.
        (('{"s": "a}', '{b"}', '{"c": 1}'), [{"s": "a}{b"}, {"c": 1}]),
        # A nested object arrives in a fragment that opens with a brace: still one call.
        (
            ('{"k": "xxxxxxxxxxxxxxx", "n": ', '{"z": 1}}', '{"c": 1}'),
            [
                {"k": "xxxxxxxxxxxxxxx", "n": {"z": 1}},
                {"c": 1},
            ],
        ),
        (('{"a": 1}', '{"a": 2}', '{"a": 3}'), [{"a": 1}, {"a": 2}, {"a": 3}]),
        (('{"a": "\\\\"', "}", '{"b": "\\""}'), [{"a": "\\"}, {"b": '"'}]),
    ],
)
async def test_calls_without_an_index_part_where_their_json_ends(
    fragments: tuple[str, ...], calls: list[dict[str, Any]]
) -> None:
    """No index, no id, the tool's name in every fragment: a fragment that opens a new JSON
    value after a whole one is the next call; any other continues the call."""
    result = await _read(_unindexed(*fragments))
    assert [c.arguments for c in result.message.tool_calls] == calls
    assert all(c.raw_arguments is None for c in result.message.tool_calls)


@pytest.mark.parametrize("reason", ["length", "content_filter"])
async def test_a_cut_inside_a_tool_call_is_the_finish_reason(reason: str) -> None:
    body = (
        _fragment(
            index=0,
            id="call_1",
            type="function",
            function={"name": "write_file", "arguments": '{"path": "a.py", "content": "import'},
        )
        + chunk({}, finish=reason)
        + DONE
    )
    result = await _read(body)
    assert (result.finish_reason, result.finish_reason_raw) == (reason, None)
    (call,) = result.message.tool_calls
    assert call.raw_arguments == '{"path": "a.py", "content": "import'


def _usage_body(**usage: Any) -> str:
    body = completion({"role": "assistant", "content": "hi"})
    body["usage"] = usage
    return json.dumps(body)


@pytest.mark.parametrize(
    ("usage", "counts"),
    [
        ({"prompt_tokens": "12", "completion_tokens": 3}, (12, 3)),
        ({"prompt_tokens": 12.0, "completion_tokens": 3}, (12, 3)),
    ],
)
async def test_usage_counts_written_otherwise_are_read_exactly(
    usage: dict[str, Any], counts: tuple[int, int]
) -> None:
    result = await _read(_usage_body(**usage), (("content-type", "application/json"),))
    assert (result.usage.input_tokens, result.usage.output_tokens) == counts


@pytest.mark.parametrize("count", ["1e999", "NaN", "12.9", "-3", '"twelve"', "true"])
async def test_a_usage_count_that_is_no_count_is_a_bad_response(count: str) -> None:
    body = _usage_body(prompt_tokens=0).replace('"prompt_tokens": 0', f'"prompt_tokens": {count}')
    with pytest.raises(ProviderError) as caught:
        await _read(body, (("content-type", "application/json"),))
    assert caught.value.kind == "bad_response"
    assert "usage.prompt_tokens" in str(caught.value)
    stream = chunk({"content": "hi"}, finish="stop") + chunk(choices=False, usage={"x": 1})
    stream = stream.replace('{"x": 1}', f'{{"prompt_tokens": {count}}}') + DONE
    with pytest.raises(ProviderError) as caught:
        await _read(stream)
    assert (caught.value.kind, caught.value.in_stream) == ("bad_response", True)


async def test_every_gzip_member_is_read(server: FakeProviderServer) -> None:
    """A body of several gzip members (RFC 1952), over a real socket: httpx alone reads the
    first member only."""
    frames = [chunk({"content": "Hel"}), chunk({"content": "lo"}), chunk({}, finish="stop"), DONE]
    body = b"".join(gzip.compress(f.encode()) for f in frames)
    headers = {"content-type": "text/event-stream", "content-encoding": "gzip"}
    server.enqueue(Reply.raw(body, headers=headers))
    model = OpenAIChat("m", base_url=openai_url(server), retry=ONCE, timeouts=FAST)
    try:
        result = await model([UserMessage("x")], [])
    finally:
        await model.aclose()
    assert (result.message.content, result.finish_reason) == ("Hello", "stop")
    assert server.requests[0].headers["accept-encoding"] == "gzip, deflate"


async def test_a_broken_gzip_body_is_a_bad_response() -> None:
    headers = (("content-type", "application/json"), ("content-encoding", "gzip"))
    with pytest.raises(ProviderError) as caught:
        await _read(b"\x1f\x8bnot gzip at all", headers)
    assert (caught.value.kind, caught.value.provider_code) == ("bad_response", "bad_encoding")


_STREAM = chunk({"role": "assistant", "content": "Hello"}) + chunk({}, finish="stop") + DONE


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ((("content-type", "Text/Event-Stream; charset=utf-8"),), _STREAM),
        ((("content-type", "application/json"),), _STREAM),  # the SDK reads it as a stream
        ((), (": ok\n\n" + _STREAM).replace("\n", "\r")),  # no label, CR line ends
    ],
)
async def test_an_event_stream_is_read_whatever_its_label(
    headers: tuple[tuple[str, str], ...], body: str
) -> None:
    result = await _read(body, headers)
    assert (result.message.content, result.finish_reason) == ("Hello", "stop")


def _responses_stream(final_output: list[dict[str, Any]]) -> str:
    message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Hi", "annotations": []}],
    }
    head = {"id": "resp_1", "object": "response", "model": "gpt-5", "output": []}

    def sse(kind: str, **payload: Any) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n"

    return (
        sse("response.created", response={**head, "status": "in_progress"})
        + sse("response.output_item.added", output_index=0, item={**message, "content": []})
        + sse("response.output_text.delta", output_index=0, item_id="msg_1", delta="Hi")
        + sse("response.output_item.done", output_index=0, item=message)
        + sse(
            "response.completed", response={**head, "status": "completed", "output": final_output}
        )
    )


async def test_the_final_response_output_is_the_answer() -> None:
    message = {"type": "message", "content": [{"type": "output_text", "text": "Hi"}]}
    call = {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    }
    response = RecordedResponse(200, _SSE, _responses_stream([message, call]).encode())
    async with httpx.AsyncClient(transport=ReplayTransport([response])) as client:
        model = OpenAIResponses("m", base_url="http://replay/v1", http_client=client, retry=ONCE)
        result = await model([UserMessage("x")], [])
    assert result.message.content == "Hi"
    assert [(c.id, c.name, c.arguments) for c in result.message.tool_calls] == [
        ("call_1", "get_weather", {"city": "Paris"})
    ]


async def test_responses_items_without_an_index_cost_linear_time() -> None:
    added = 'data: {"type":"response.output_item.added","item":{"type":"message"}}\n\n'
    done = 'data: {"type":"response.completed","response":{"status":"completed","output":[]}}\n\n'
    response = RecordedResponse(200, _SSE, (added * 5000 + done).encode())
    async with httpx.AsyncClient(transport=ReplayTransport([response])) as client:
        model = OpenAIResponses("m", base_url="http://replay/v1", http_client=client, retry=ONCE)
        with pytest.raises(ProviderError) as caught:
            await model([UserMessage("x")], [])
    assert (caught.value.kind, caught.value.limit) == ("too_large", "max_blocks")


_THINKING = [
    event("message_start", {"message": {"id": "msg_1", "model": "claude", "usage": {}}}),
    event("content_block_start", {"index": 0, "content_block": {"type": "thinking"}}),
    event(
        "content_block_delta", {"index": 0, "delta": {"type": "thinking_delta", "thinking": "Hm."}}
    ),
    event(
        "content_block_delta",
        {"index": 0, "delta": {"type": "signature_delta", "signature": "c2ln"}},
    ),
    event("content_block_stop", {"index": 0}),
    event(
        "content_block_start",
        {"index": 1, "content_block": {"type": "redacted_thinking", "data": "EmwKAhgB"}},
    ),
    event("content_block_stop", {"index": 1}),
    event(
        "content_block_start",
        {
            "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
        },
    ),
    event("content_block_stop", {"index": 2}),
    event("message_delta", {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
    event("message_stop", {}),
]


async def test_thinking_signatures_are_kept_and_sent_back(server: FakeProviderServer) -> None:
    """Anthropic requires a tool-use turn's thinking blocks back, signed, unchanged."""
    server.enqueue(Reply.sse(_THINKING), Reply.json({"type": "message", "content": []}))
    model = AnthropicChat("claude", base_url=server.base_url, retry=ONCE, timeouts=FAST)
    try:
        first = await model([UserMessage("x")], [])
        assert first.message.reasoning == "Hm."
        assert first.message.reasoning_items == (
            {"type": "thinking", "thinking": "Hm.", "signature": "c2ln"},
            {"type": "redacted_thinking", "data": "EmwKAhgB"},
        )
        history: list[Message] = [UserMessage("x"), first.message, ToolMessage("toolu_1", "done")]
        await model(history, [])
    finally:
        await model.aclose()
    sent = server.requests[1].json()["messages"][1]
    assert sent["role"] == "assistant"
    assert sent["content"] == [
        {"type": "thinking", "thinking": "Hm.", "signature": "c2ln"},
        {"type": "redacted_thinking", "data": "EmwKAhgB"},
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
    ]


async def test_unsigned_thinking_and_other_wires_items_are_not_sent_to_anthropic(
    server: FakeProviderServer,
) -> None:
    server.enqueue(Reply.json({"type": "message", "content": []}))
    items = (
        {"type": "thinking", "thinking": "no signature"},
        {"type": "reasoning", "encrypted_content": "gAAAA"},  # the Responses API's
    )
    model = AnthropicChat("claude", base_url=server.base_url, retry=ONCE, timeouts=FAST)
    try:
        history: list[Message] = [UserMessage("x"), AssistantMessage("Hi", reasoning_items=items)]
        await model([*history, UserMessage("y")], [])
    finally:
        await model.aclose()
    assert server.requests[0].json()["messages"][1]["content"] == [{"type": "text", "text": "Hi"}]
