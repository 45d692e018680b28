"""OpenAIChat against a real HTTP server on loopback: every quirk the loop must survive."""

from __future__ import annotations

import json
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
from agentfsm.adapters.providers import (
    OpenAIChat,
    OpenAIQuirks,
    ProviderError,
    RetryPolicy,
    Timeouts,
)
from agentfsm.conformance._frames import DONE, chunk, completion, data, openai_url, tool_delta
from agentfsm.engine._protocols import ChatDelta
from agentfsm.testing import Drop, FakeProviderServer, Pause, Reply

TOOLS = [
    ToolSpec(
        "get_weather",
        "Weather for a city.",
        {"type": "object", "properties": {"city": {"type": "string"}}},
    )
]
FAST = Timeouts(connect=2, first_byte=2, idle=2, terminal_grace=0.3)


def chat(server: FakeProviderServer, **options: Any) -> OpenAIChat:
    options.setdefault("timeouts", FAST)
    options.setdefault("retry", RetryPolicy(max_attempts=1))
    return OpenAIChat("fake-model", base_url=openai_url(server), **options)


async def ask(model: OpenAIChat, tools: Any = (), **kwargs: Any) -> Any:
    try:
        return await model([UserMessage("hi")], tools, **kwargs)
    finally:
        await model.aclose()


async def test_streamed_text_usage_and_request(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.sse(
            [
                chunk({"role": "assistant", "content": ""}),
                chunk({"content": "Hel"}),
                chunk({"content": "lo"}),
                chunk({}, finish="stop"),
                chunk(
                    choices=False,
                    usage={"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
                ),
                DONE,
            ]
        )
    )
    deltas: list[ChatDelta] = []
    result = await ask(
        chat(server, api_key="sk-test-key"), temperature=0.1, max_tokens=50, on_delta=deltas.append
    )
    assert result.message == AssistantMessage("Hello")
    assert [d.text for d in deltas] == ["Hel", "lo"]
    assert result.usage == Usage(12, 3)
    assert result.finish_reason == "stop"
    assert result.model == "fake-model"
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test-key"
    body = request.json()
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.1
    assert body["max_tokens"] == 50
    assert body["messages"] == [{"role": "user", "content": "hi"}]


async def test_tool_calls_without_index_are_not_merged(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.sse(
            [
                chunk(tool_delta(id="call_a", name="get_weather", arguments='{"city":')),
                chunk(tool_delta(arguments='"Paris"}')),
                chunk(tool_delta(id="call_b", name="get_weather", arguments='{"city": "Oslo"}')),
                chunk({}, finish="tool_calls"),
                DONE,
            ]
        )
    )
    result = await ask(chat(server), TOOLS)
    assert [(c.id, c.arguments) for c in result.message.tool_calls] == [
        ("call_a", {"city": "Paris"}),
        ("call_b", {"city": "Oslo"}),
    ]


@pytest.mark.parametrize("call_id", [None, ""])
async def test_whole_calls_without_index_or_id_are_not_merged(
    server: FakeProviderServer, call_id: str | None
) -> None:
    """Two calls of one tool, each whole in one chunk, no index, no (or an empty) id."""
    server.enqueue(
        Reply.sse(
            [
                chunk(tool_delta(id=call_id, name="get_weather", arguments='{"city": "Paris"}')),
                chunk(tool_delta(id=call_id, name="get_weather", arguments='{"city": "Tokyo"}')),
                chunk(tool_delta(id=call_id, name="get_weather", arguments="")),
                chunk({}, finish="tool_calls"),
                DONE,
            ]
        )
    )
    calls = (await ask(chat(server), TOOLS)).message.tool_calls
    assert [c.arguments for c in calls] == [{"city": "Paris"}, {"city": "Tokyo"}]
    assert len({c.id for c in calls}) == 2
    assert all(c.id for c in calls)


async def test_name_repeated_with_fragments_stays_one_call(server: FakeProviderServer) -> None:
    frames = [
        chunk(tool_delta(name="get_weather", arguments=piece))
        for piece in ["{", '"city": ', '"Rome"', "}"]
    ]
    server.enqueue(Reply.sse([*frames, chunk({}, finish="tool_calls"), DONE]))
    (call,) = (await ask(chat(server), TOOLS)).message.tool_calls
    assert call.arguments == {"city": "Rome"}


async def test_repeated_id_and_name_are_not_concatenated(server: FakeProviderServer) -> None:
    frames = [
        chunk(tool_delta(index=0, id="call_1", name="get_weather", arguments=piece))
        for piece in ['{"ci', 'ty": "Ro', 'me"}']
    ]
    server.enqueue(Reply.sse([*frames, chunk({}, finish="tool_calls"), DONE]))
    (call,) = (await ask(chat(server), TOOLS)).message.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_1", "get_weather", {"city": "Rome"})


async def test_empty_and_duplicate_ids_get_unique_ones(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.sse(
            [
                chunk(tool_delta(index=0, id="", name="get_weather", arguments='{"city":"A"}')),
                chunk(tool_delta(index=1, id="", name="get_weather", arguments='{"city":"B"}')),
                chunk({}, finish="tool_calls"),
                DONE,
            ]
        )
    )
    calls = (await ask(chat(server), TOOLS)).message.tool_calls
    assert len({c.id for c in calls}) == 2
    assert all(c.id for c in calls)


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        ([{"city": "Lima"}], {"city": "Lima"}),  # an object, not a string (llama.cpp)
        (['{"city": "Lima"}'], {"city": "Lima"}),  # one whole string
        (["", '{"ci', 'ty"', ': "Li', 'ma"}'], {"city": "Lima"}),  # first fragment ""
        ([], {}),  # a tool without arguments: no fragment at all
        ([""], {}),
    ],
)
async def test_argument_shapes(
    server: FakeProviderServer, pieces: list[Any], expected: dict[str, Any]
) -> None:
    frames = [chunk(tool_delta(index=0, id="call_1", name="get_weather"))]
    frames += [chunk(tool_delta(index=0, arguments=p)) for p in pieces]
    server.enqueue(Reply.sse([*frames, chunk({}, finish="tool_calls"), DONE]))
    (call,) = (await ask(chat(server), TOOLS)).message.tool_calls
    assert call.arguments == expected
    assert call.raw_arguments is None


async def test_malformed_arguments_are_kept_raw(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.sse(
            [
                chunk(tool_delta(index=0, id="c", name="get_weather", arguments='{"city": ')),
                chunk({}, finish="tool_calls"),
                DONE,
            ]
        )
    )
    (call,) = (await ask(chat(server), TOOLS)).message.tool_calls
    assert call.arguments == {}
    assert call.raw_arguments == '{"city": '


async def test_trailing_empty_delta_adds_no_phantom_call(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.sse(
            [
                chunk(
                    tool_delta(index=0, id="call_1", name="get_weather", arguments='{"city":"X"}')
                ),
                chunk(tool_delta(index=0, arguments=""), finish="tool_calls"),
                DONE,
            ]
        )
    )
    calls = (await ask(chat(server), TOOLS)).message.tool_calls
    assert len(calls) == 1


async def test_stop_with_tool_calls_is_normalized(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.sse(
            [
                chunk(tool_delta(index=0, id="c1", name="get_weather", arguments="{}")),
                chunk({}, finish="stop"),
                DONE,
            ]
        )
    )
    assert (await ask(chat(server), TOOLS)).finish_reason == "tool_calls"


async def test_usage_shapes_are_never_summed(server: FakeProviderServer) -> None:
    cumulative = [
        chunk({"content": "a"}, usage={"prompt_tokens": 10, "completion_tokens": 1}),
        chunk({"content": "b"}, usage={"prompt_tokens": 10, "completion_tokens": 2}),
        chunk({}, finish="stop", usage={"prompt_tokens": 10, "completion_tokens": 3}),
        chunk(choices=False, usage=None),  # a later null must not erase it
        DONE,
    ]
    server.enqueue(Reply.sse(cumulative))
    assert (await ask(chat(server))).usage == Usage(10, 3)
    server.enqueue(
        Reply.sse(
            [
                chunk({"content": "x"}),
                chunk(
                    {},
                    finish="stop",
                    x_groq={"usage": {"prompt_tokens": 7, "completion_tokens": 2}},
                ),
                DONE,
            ]
        )
    )
    assert (await ask(chat(server))).usage == Usage(7, 2)
    server.enqueue(
        Reply.sse(
            [
                chunk({"content": "y"}),
                chunk({}, finish="stop"),
                chunk(
                    choices=False,
                    usage={
                        "prompt_tokens": 100,
                        "completion_tokens": 9,
                        "prompt_tokens_details": {"cached_tokens": 60},
                        "completion_tokens_details": {"reasoning_tokens": 4},
                    },
                ),
                DONE,
            ]
        )
    )
    assert (await ask(chat(server))).usage == Usage(
        100, 9, cache_read_tokens=60, reasoning_tokens=4
    )


async def test_sse_field_tolerance(server: FakeProviderServer) -> None:
    body = {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
    server.enqueue(
        Reply.sse(
            [
                ": keep-alive comment\r\n\r\n",
                f"data:{json.dumps(body)}\r\n\r\n",
                "event: unknown\ndata: {}\n\n",
                "data:[DONE]\n\n",
            ]
        )
    )
    assert (await ask(chat(server))).message.content == "ok"


async def test_no_done_and_connection_left_open(server: FakeProviderServer) -> None:
    server.enqueue(Reply.sse([chunk({"content": "done"}), chunk({}, finish="stop"), Pause(5)]))
    result = await ask(chat(server))
    assert result.message.content == "done"


@pytest.mark.parametrize("where", ["first", "middle"])
async def test_error_inside_a_200_stream(server: FakeProviderServer, where: str) -> None:
    error = data({"error": {"message": "Upstream overloaded", "type": "server_error", "code": 502}})
    frames = [error] if where == "first" else [chunk({"content": "par"}), error]
    server.enqueue(Reply.sse(frames))
    with pytest.raises(ProviderError) as raised:
        await ask(chat(server))
    assert raised.value.in_stream
    assert raised.value.kind == "server"


async def test_empty_200_stream_is_an_error_and_not_retried(server: FakeProviderServer) -> None:
    server.enqueue(Reply.sse([]), Reply.sse([]))
    with pytest.raises(ProviderError) as raised:
        await ask(chat(server, retry=RetryPolicy(max_attempts=3, initial_delay=0.01)))
    assert raised.value.provider_code == "empty_stream"
    assert len(server.requests) == 1


async def test_unframed_error_body_on_the_stream_path(server: FakeProviderServer) -> None:
    body = '{"error":{"code":400,"message":"the request (5000 tokens) exceeds the available context size (4096 tokens)","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}'
    server.enqueue(Reply.raw(body, status=400, headers={"content-type": "text/plain"}))
    with pytest.raises(ProviderError) as raised:
        await ask(chat(server))
    assert (raised.value.kind, raised.value.status) == ("context_overflow", 400)


async def test_dropped_connection_mid_stream(server: FakeProviderServer) -> None:
    server.enqueue(Reply.sse([chunk({"content": "partial"}), Drop()]))
    with pytest.raises(ProviderError) as raised:
        await ask(chat(server), on_delta=lambda d: None)
    assert raised.value.kind == "connection"
    assert raised.value.response_started


async def test_non_streamed_llama_cpp_shape(server: FakeProviderServer) -> None:
    message = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "get_weather:", "arguments": '{"city": "Rome"}'},
        "tool_calls": [
            {
                "id": "call_x",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
            }
        ],
    }
    server.enqueue(
        Reply.json(
            completion(
                message, finish="tool_calls", usage={"prompt_tokens": 30, "completion_tokens": 8}
            )
        )
    )
    result = await ask(chat(server, stream=False), TOOLS)
    assert result.message.content == ""
    assert [(c.id, c.name, c.arguments) for c in result.message.tool_calls] == [
        ("call_x", "get_weather", {"city": "Rome"})
    ]
    assert result.usage == Usage(30, 8)
    assert "stream" not in server.requests[0].json()


async def test_quirk_profile(server: FakeProviderServer) -> None:
    quirks = OpenAIQuirks(
        stream_options=False,
        stream_with_tools=False,
        null_assistant_content=False,
        max_tokens_field="max_completion_tokens",
    )
    server.enqueue(Reply.json(completion({"role": "assistant", "content": "ok"})))
    history: list[Message] = [
        SystemMessage("s"),
        UserMessage("u"),
        AssistantMessage("", tool_calls=(ToolCall("c1", "get_weather", {"city": "A"}),)),
        ToolMessage("c1", "sunny"),
    ]
    model = chat(server, quirks=quirks)
    await model(history, TOOLS, max_tokens=10)
    await model.aclose()
    body = server.requests[0].json()
    assert "stream" not in body  # tools offered: this server gets unstreamed requests
    assert body["max_completion_tokens"] == 10
    assert body["messages"][2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "A"}'},
            }
        ],
    }
    server.enqueue(Reply.sse([chunk({"content": "ok"}), chunk({}, finish="stop"), DONE]))
    await ask(chat(server, quirks=OpenAIQuirks(stream_options=False)))
    assert "stream_options" not in server.requests[1].json()


async def test_tool_strings_are_bounded_for_grammar_servers(server: FakeProviderServer) -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "note": {"type": ["string", "null"], "maxLength": 1000},
            "short": {"type": "string", "maxLength": 8},
            "tags": {"type": "array", "items": {"type": "string"}},
            "limit": {"type": "integer"},
        },
    }
    spec = ToolSpec("save", "Save.", schema)
    for quirks in (OpenAIQuirks(tool_string_max_length=400), OpenAIQuirks()):
        server.enqueue(Reply.json(completion({"role": "assistant", "content": "ok"})))
        await ask(chat(server, quirks=quirks, stream=False), [spec])
    capped = server.requests[0].json()["tools"][0]["function"]["parameters"]["properties"]
    assert capped["path"] == {"type": "string", "maxLength": 400}
    assert capped["note"]["maxLength"] == 400
    assert capped["short"]["maxLength"] == 8
    assert capped["tags"]["items"] == {"type": "string", "maxLength": 400}
    assert capped["limit"] == {"type": "integer"}
    assert server.requests[1].json()["tools"][0]["function"]["parameters"] == schema
    assert "maxLength" not in schema["properties"]["path"]  # the caller's schema is untouched


async def test_history_is_made_safe_for_strict_servers(server: FakeProviderServer) -> None:
    long_id = "toolu_" + "x" * 60
    server.enqueue(Reply.json(completion({"role": "assistant", "content": "ok"})))
    history: list[Message] = [
        UserMessage("[context summary of earlier turns]\n…\n[end summary]"),
        ToolMessage("orphan", "an old result whose call was summarized away"),
        AssistantMessage("", tool_calls=(ToolCall(long_id, "get_weather", {}),)),
        ToolMessage(long_id, "ok"),
    ]
    model = chat(server, stream=False)
    await model(history, TOOLS)
    await model.aclose()
    sent = server.requests[0].json()["messages"]
    assert sent[1]["role"] == "user"
    assert "an old result" in sent[1]["content"]
    short = sent[2]["tool_calls"][0]["id"]
    assert len(short) <= 40
    assert sent[3] == {"role": "tool", "tool_call_id": short, "content": "ok"}
