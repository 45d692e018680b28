"""OpenAIResponses against a real HTTP server on loopback (FakeProviderServer).

The Responses frames here are written by the project (``agentfsm.testing.responses_reply``
and the ``frame`` helper below), after the event types of the OpenAI API reference; they are
not recordings.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from agentfsm import (
    AbortController,
    Agent,
    AssistantMessage,
    ChatResult,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from agentfsm.adapters.providers import (
    OpenAIResponses,
    ProviderError,
    ResponsesQuirks,
    RetryPolicy,
    Timeouts,
    endpoint_url,
)
from agentfsm.engine._protocols import ChatDelta
from agentfsm.engine._serialization import dumps, structure_message
from agentfsm.testing import (
    Drop,
    FakeProviderServer,
    Pause,
    Reply,
    ScriptedTools,
    responses_body,
    responses_reply,
    tool_reply,
)

from ...helpers import Recorder

FAST = Timeouts(connect=2, first_byte=2, idle=2, terminal_grace=0.3)
TOOLS = [ToolSpec("lookup", "Look something up.", {"type": "object", "properties": {}})]


def chat(server: FakeProviderServer, **options: Any) -> OpenAIResponses:
    options.setdefault("timeouts", FAST)
    options.setdefault("retry", RetryPolicy(max_attempts=1))
    return OpenAIResponses("gpt-test", base_url=f"{server.base_url}/v1", **options)


def frame(kind: str, **payload: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n"


USAGE = {
    "input_tokens": 120,
    "input_tokens_details": {"cached_tokens": 100},
    "output_tokens": 40,
    "output_tokens_details": {"reasoning_tokens": 30},
    "total_tokens": 160,
}


def completed(output: list[dict[str, Any]], **extra: Any) -> str:
    response = {"id": "resp_9", "model": "gpt-test-2025", "status": "completed", "output": output}
    return frame("response.completed", response={**response, "usage": USAGE, **extra})


def test_endpoint() -> None:
    assert endpoint_url("https://api.openai.com/v1", "openai-responses") == (
        "https://api.openai.com/v1/responses"
    )
    assert endpoint_url("http://127.0.0.1:11434", "openai-responses") == (
        "http://127.0.0.1:11434/v1/responses"
    )


async def test_stream_text_usage_and_request_shape(server: FakeProviderServer) -> None:
    text = "line\u2028sep \ud800 lone"
    server.enqueue(
        Reply.sse(
            [
                frame("response.created", response={"id": "resp_9", "status": "in_progress"}),
                frame(
                    "response.output_item.added",
                    output_index=0,
                    item={"type": "message", "id": "msg_1", "role": "assistant", "content": []},
                ),
                frame(
                    "response.output_text.delta", output_index=0, item_id="msg_1", delta=text[:6]
                ),
                frame(
                    "response.output_text.delta", output_index=0, item_id="msg_1", delta=text[6:]
                ),
                completed([]),
            ]
        )
    )
    model = chat(server)
    deltas: list[ChatDelta] = []
    result = await model(
        [SystemMessage("Be brief."), UserMessage("hi \ud83d")],
        TOOLS,
        max_tokens=50,
        temperature=0.2,
        on_delta=deltas.append,
    )
    await model.aclose()
    assert result.message.content == text
    assert [d.text for d in deltas] == [text[:6], text[6:]]
    assert result.finish_reason == "stop"
    assert result.model == "gpt-test-2025"
    assert result.response_id == "resp_9"
    assert result.usage == Usage(120, 40, cache_read_tokens=100, reasoning_tokens=30)
    request = server.requests[0]
    assert request.path == "/v1/responses"
    assert request.headers["accept"] == "text/event-stream"
    body = request.json()
    assert body["instructions"] == "Be brief."
    assert body["input"] == [{"role": "user", "content": "hi \ud83d"}]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "lookup",
            "description": "Look something up.",
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
        }
    ]
    assert body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["max_output_tokens"] == 50
    assert body["temperature"] == 0.2
    assert body["stream"] is True


async def test_not_streamed(server: FakeProviderServer) -> None:
    server.enqueue(
        responses_reply(ChatResult(AssistantMessage("Hello."), Usage(7, 3)), stream=False)
    )
    model = chat(server, stream=False)
    result = await model([UserMessage("hi")], [])
    await model.aclose()
    assert result.message.content == "Hello."
    assert result.usage == Usage(7, 3)
    assert result.finish_reason == "stop"
    assert "stream" not in server.requests[0].json()
    assert server.requests[0].headers["accept"] == "application/json"


async def test_parallel_function_calls_interleaved(server: FakeProviderServer) -> None:
    def call(index: int, call_id: str, name: str) -> str:
        item = {"type": "function_call", "id": f"fc_{index}", "call_id": call_id, "name": name}
        return frame(
            "response.output_item.added", output_index=index, item={**item, "arguments": ""}
        )

    def args(index: int, piece: str) -> str:
        return frame(
            "response.function_call_arguments.delta",
            output_index=index,
            item_id=f"fc_{index}",
            delta=piece,
        )

    server.enqueue(
        Reply.sse(
            [
                call(0, "call_a", "lookup"),
                call(1, "call_b", "lookup"),
                args(0, '{"q": '),
                args(1, '{"q": "tw'),
                args(0, '"one"}'),
                args(1, 'o"}'),
                completed([]),
            ]
        ),
        responses_reply("Both found."),
    )
    model = chat(server)
    first = await model([UserMessage("look up one and two")], TOOLS)
    assert first.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in first.message.tool_calls] == [
        ("call_a", "lookup", {"q": "one"}),
        ("call_b", "lookup", {"q": "two"}),
    ]
    history: list[Message] = [
        UserMessage("look up one and two"),
        first.message,
        ToolMessage("call_a", "1"),
        ToolMessage("call_b", "2", is_error=True),
    ]
    second = await model(history, TOOLS)
    await model.aclose()
    assert second.message.content == "Both found."
    assert server.requests[1].json()["input"][1:] == [
        {
            "type": "function_call",
            "call_id": "call_a",
            "name": "lookup",
            "arguments": '{"q": "one"}',
        },
        {
            "type": "function_call",
            "call_id": "call_b",
            "name": "lookup",
            "arguments": '{"q": "two"}',
        },
        {"type": "function_call_output", "call_id": "call_a", "output": "1"},
        {"type": "function_call_output", "call_id": "call_b", "output": "2"},
    ]


async def test_reasoning_items_round_trip(server: FakeProviderServer) -> None:
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Need the file."}],
        "encrypted_content": "gAAAA-opaque==",
    }
    function_call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "lookup",
        "arguments": "{}",
    }
    server.enqueue(
        Reply.sse(
            [
                frame(
                    "response.output_item.added", output_index=0, item={**reasoning, "summary": []}
                ),
                frame(
                    "response.reasoning_summary_text.delta",
                    output_index=0,
                    item_id="rs_1",
                    summary_index=0,
                    delta="Need the file.",
                ),
                frame("response.output_item.done", output_index=0, item=reasoning),
                frame("response.output_item.added", output_index=1, item=function_call),
                frame("response.output_item.done", output_index=1, item=function_call),
                completed([reasoning, function_call]),
            ]
        ),
        responses_reply("Done."),
    )
    model = chat(server)
    deltas: list[ChatDelta] = []
    first = await model([UserMessage("go")], TOOLS, on_delta=deltas.append)
    assert deltas == [ChatDelta("thinking", "Need the file.")]
    assert first.message.reasoning == "Need the file."
    assert [item["encrypted_content"] for item in first.message.reasoning_items] == [
        "gAAAA-opaque=="
    ]
    # The session keeps the items: the message survives the JSON round trip unchanged.
    kept = structure_message(json.loads(dumps(first.message)))
    assert kept == first.message
    await model([UserMessage("go"), kept, ToolMessage("call_1", "contents")], TOOLS)
    await model.aclose()
    sent = server.requests[1].json()["input"]
    assert sent[1] == {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Need the file."}],
        "encrypted_content": "gAAAA-opaque==",
    }
    assert [item.get("type") for item in sent] == [
        None,
        "reasoning",
        "function_call",
        "function_call_output",
    ]


async def test_reasoning_not_sent_when_the_quirk_is_off(server: FakeProviderServer) -> None:
    server.enqueue(responses_reply("ok"))
    model = chat(server, quirks=ResponsesQuirks(encrypted_reasoning=False))
    kept = AssistantMessage(
        "hm", reasoning_items=[{"type": "reasoning", "encrypted_content": "x", "summary": []}]
    )
    await model([UserMessage("a"), kept, UserMessage("b")], [])
    await model.aclose()
    body = server.requests[0].json()
    assert "include" not in body
    assert [item.get("type") for item in body["input"]] == [None, "message", None]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    ("reason", "finish"), [("max_output_tokens", "length"), ("content_filter", "content_filter")]
)
async def test_incomplete(
    server: FakeProviderServer, stream: bool, reason: str, finish: str
) -> None:
    body = responses_body("Half an")
    body["status"] = "incomplete"
    body["incomplete_details"] = {"reason": reason}
    if stream:
        server.enqueue(Reply.sse([frame("response.incomplete", response=body)]))
    else:
        server.enqueue(Reply.json(body))
    model = chat(server, stream=stream)
    result = await model([UserMessage("x")], [])
    await model.aclose()
    assert result.message.content == "Half an"
    assert result.finish_reason == finish


def error_body(status: int, code: str, message: str) -> dict[str, Any]:
    kind = "rate_limit_error" if status == 429 else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


async def test_429_with_retry_after_is_retried(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.json(
            error_body(429, "rate_limit_exceeded", "slow down"), 429, {"retry-after-ms": "300"}
        ),
        responses_reply("ok"),
    )
    model = chat(server, retry=RetryPolicy(max_attempts=3, initial_delay=0.01))
    started = time.monotonic()
    result = await model([UserMessage("x")], [])
    await model.aclose()
    assert result.message.content == "ok"
    assert len(server.requests) == 2
    assert time.monotonic() - started >= 0.28


async def test_400_is_not_retried(server: FakeProviderServer) -> None:
    server.enqueue(Reply.json(error_body(400, "invalid_value", "bad input"), 400))
    model = chat(server, retry=RetryPolicy(max_attempts=3, initial_delay=0.01))
    with pytest.raises(ProviderError) as raised:
        await model([UserMessage("x")], [])
    await model.aclose()
    assert raised.value.kind == "bad_request"
    assert raised.value.provider_code == "invalid_value"
    assert len(server.requests) == 1


async def test_context_length_400_is_an_overflow(server: FakeProviderServer) -> None:
    message = "Your input exceeds the context window of this model."
    server.enqueue(Reply.json(error_body(400, "context_length_exceeded", message), 400))
    model = chat(server)
    with pytest.raises(ProviderError) as raised:
        await model([UserMessage("x")], [])
    await model.aclose()
    assert raised.value.kind == "context_overflow"


async def test_response_failed_in_stream(server: FakeProviderServer) -> None:
    failed = {
        "id": "resp_1",
        "status": "failed",
        "error": {"code": "rate_limit_exceeded", "message": "Rate limit reached"},
        "output": [],
    }
    server.enqueue(
        Reply.sse(
            [
                frame("response.created", response={"id": "resp_1"}),
                frame("response.failed", response=failed),
            ]
        ),
        responses_reply("recovered"),
    )
    model = chat(server, retry=RetryPolicy(max_attempts=2, initial_delay=0.01))
    result = await model([UserMessage("x")], [])
    await model.aclose()
    assert result.message.content == "recovered"
    assert len(server.requests) == 2


async def test_error_event_in_stream(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.sse(
            [
                frame(
                    "error",
                    code="context_length_exceeded",
                    message="Your input exceeds the context window of this model.",
                    param="input",
                )
            ]
        )
    )
    model = chat(server)
    with pytest.raises(ProviderError) as raised:
        await model([UserMessage("x")], [])
    await model.aclose()
    assert raised.value.kind == "context_overflow"
    assert raised.value.in_stream


async def test_failed_json_body(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.json(
            {"id": "r", "status": "failed", "error": {"code": "server_error", "message": "boom"}}
        )
    )
    model = chat(server, stream=False)
    with pytest.raises(ProviderError) as raised:
        await model([UserMessage("x")], [])
    await model.aclose()
    assert raised.value.kind == "server"
    assert raised.value.provider_code == "server_error"


async def test_stream_cut_before_completion(server: FakeProviderServer) -> None:
    head = frame(
        "response.output_item.added",
        output_index=0,
        item={"type": "message", "id": "m", "role": "assistant", "content": []},
    )
    partial = frame("response.output_text.delta", output_index=0, item_id="m", delta="half")
    server.enqueue(Reply.sse([head, partial, Drop()]))
    model = chat(server)
    with pytest.raises(ProviderError) as raised:
        await model([UserMessage("x")], [], on_delta=lambda d: None)
    await model.aclose()
    assert raised.value.kind == "connection"
    assert raised.value.response_started


async def test_abort_mid_stream(server: FakeProviderServer) -> None:
    head = frame(
        "response.output_item.added",
        output_index=0,
        item={"type": "message", "id": "m", "role": "assistant", "content": []},
    )
    partial = frame("response.output_text.delta", output_index=0, item_id="m", delta="Wor")
    server.enqueue(Reply.sse([head, partial, Pause(10), completed([])]))
    controller = AbortController()
    model = chat(server, timeouts=Timeouts(connect=2, first_byte=2, idle=20))

    def on_delta(delta: ChatDelta) -> None:
        controller.abort()

    started = time.monotonic()
    with pytest.raises(ProviderError) as raised:
        await model([UserMessage("x")], [], signal=controller.signal, on_delta=on_delta)
    await model.aclose()
    assert raised.value.kind == "aborted"
    assert time.monotonic() - started < 5


async def test_orphaned_tool_result_goes_as_text() -> None:
    async with FakeProviderServer(strict=True) as server:
        server.enqueue(responses_reply("ok"))
        model = chat(server)
        await model([UserMessage("a"), ToolMessage("call_gone", "old result")], [])
        await model.aclose()
    assert server.requests[0].json()["input"][1] == {
        "role": "user",
        "content": "[result of tool call call_gone]\nold result",
    }


async def test_strict_server_rejects_an_unanswered_call() -> None:
    async with FakeProviderServer(strict=True) as server:
        model = chat(server)
        call = AssistantMessage("", tool_calls=[ToolCall("call_1", "lookup", {})])
        with pytest.raises(ProviderError) as raised:
            await model([UserMessage("a"), call, UserMessage("b")], TOOLS)
        await model.aclose()
    assert raised.value.kind == "bad_request"
    assert "No tool output found for function call call_1" in raised.value.message


async def test_agent_run_over_the_wire() -> None:
    async with FakeProviderServer(strict=True) as server:
        server.enqueue(
            responses_reply(tool_reply(("add", {"a": 2, "b": 3}))),
            responses_reply(ChatResult(AssistantMessage("2 + 3 = 5"), Usage(20, 4))),
        )
        tools = ScriptedTools(
            {"add": lambda a, b: str(a + b)}, specs=[ToolSpec("add", "Add two numbers.")]
        )
        model = chat(server)
        agent = Agent(model, tools, system_prompt="You add.")
        recorder = Recorder(agent.events)
        outcome = await agent.run("What is 2 + 3?")
        await model.aclose()
    assert outcome.final is not None
    assert outcome.final.content == "2 + 3 = 5"
    assert [e for e in recorder.types if not e.endswith("_delta")] == [
        "turn_start",
        "llm_start",
        "llm_end",
        "tool_call_start",
        "tool_call_end",
        "turn_start",
        "llm_start",
        "llm_end",
        "final",
        "turn_end",
    ]
    second = server.requests[1].json()
    assert second["instructions"].startswith("You add.")
    assert second["input"][-2:] == [
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "add",
            "arguments": '{"a": 2, "b": 3}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "5"},
    ]


async def test_concurrent_calls_share_nothing(server: FakeProviderServer) -> None:
    server.handler = lambda request: responses_reply(request.json()["input"][0]["content"])
    model = chat(server)
    results = await asyncio.gather(*(model([UserMessage(f"n{i}")], []) for i in range(8)))
    await model.aclose()
    assert [r.message.content for r in results] == [f"n{i}" for i in range(8)]
