"""A hostile OpenAI Responses server: deep JSON, wrong types, too many calls, endless
arguments, an echoed key. Every case ends with a typed ``ProviderError`` within its bounds
(never a RecursionError, TypeError, a hang or unbounded memory), and no key is repeated."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from agentfsm.adapters.providers import Limits, OpenAIResponses
from agentfsm.testing import FakeProviderServer, Filler, Reply
from agentfsm.testing._hostile import deep_json

from ._provider import FAST, ONCE, ask, assert_bounded, assert_kind, measured

KEY = "sk-responses-hostile-0123456789abcdef"
DEEP = deep_json(10_000)


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as running:
        yield running


def frame(kind: str, **payload: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n"


async def case(
    server: FakeProviderServer, name: str, *, stream: bool = True, limits: Limits | None = None
) -> tuple[Any, Any]:
    chat = OpenAIResponses(
        "m",
        base_url=f"{server.base_url}/v1",
        api_key=KEY,
        stream=stream,
        timeouts=FAST,
        retry=ONCE,
        limits=limits,
    )
    return await measured(f"responses: {name}", lambda: ask(chat))


async def test_a_deep_body(server: FakeProviderServer) -> None:
    server.enqueue(Reply.raw(DEEP, headers={"content-type": "application/json"}))
    row, outcome = await case(server, "10,000-deep JSON body", stream=False)
    assert_kind(row, outcome, "bad_response")


async def test_a_deep_stream_frame(server: FakeProviderServer) -> None:
    server.enqueue(Reply.sse([f"event: response.created\ndata: {DEEP}\n\n"]))
    row, outcome = await case(server, "10,000-deep stream frame")
    assert assert_kind(row, outcome, "bad_response").in_stream


WRONG_BODIES: list[Any] = [
    {"status": "completed", "output": "abc"},
    {"status": "completed", "output": [1]},
    {"status": "completed", "output": [{"type": "message", "content": 5}]},
    {
        "status": "completed",
        "output": [{"type": "message", "content": [{"type": "output_text", "text": 5}]}],
    },
    {"status": "completed", "output": [{"type": "function_call", "call_id": 5, "name": "f"}]},
    {"status": "completed", "output": [{"type": "reasoning", "summary": "x"}]},
    {"status": "completed", "output": [{"type": "reasoning", "encrypted_content": 7}]},
    {"status": 5, "output": []},
    {"status": "incomplete", "incomplete_details": "x", "output": []},
]


@pytest.mark.parametrize("body", WRONG_BODIES, ids=lambda b: json.dumps(b)[:50])
async def test_wrong_types_in_a_body(server: FakeProviderServer, body: Any) -> None:
    server.enqueue(Reply.json(body))
    row, outcome = await case(server, f"body {json.dumps(body)[:60]}", stream=False)
    assert_kind(row, outcome, "bad_response")


WRONG_FRAMES = [
    frame("response.created", response="x"),
    frame("response.output_item.added", output_index="x", item={"type": "message"}),
    frame("response.output_item.added", output_index=0, item="x"),
    frame("response.output_text.delta", output_index=0, delta=5),
    frame("response.function_call_arguments.delta", output_index=0, delta=[1]),
    frame("response.output_item.done", output_index=0, item={"type": "function_call", "name": 5}),
    frame("response.completed", response={"status": "completed", "output": 5}),
]


@pytest.mark.parametrize("bad", WRONG_FRAMES, ids=lambda f: f.splitlines()[0][7:])
async def test_wrong_types_in_a_stream(server: FakeProviderServer, bad: str) -> None:
    done = frame("response.completed", response={"status": "completed", "output": []})
    server.enqueue(Reply.sse([bad, done]))
    row, outcome = await case(server, f"stream {bad.splitlines()[1][6:66]}")
    assert assert_kind(row, outcome, "bad_response").in_stream


def calls(count: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "function_call",
            "id": f"fc_{i}",
            "call_id": f"c{i}",
            "name": "f",
            "arguments": "{}",
        }
        for i in range(count)
    ]


async def test_too_many_calls_in_a_body(server: FakeProviderServer) -> None:
    server.enqueue(Reply.json({"status": "completed", "output": calls(10_000)}))
    row, outcome = await case(server, "10,000 function calls in a body", stream=False)
    assert_kind(row, outcome, "too_large", limit="max_tool_calls")


async def test_too_many_calls_in_a_stream(server: FakeProviderServer) -> None:
    items = [
        frame("response.output_item.added", output_index=i, item=item)
        for i, item in enumerate(calls(2_000))
    ]
    server.enqueue(Reply.sse(items))
    row, outcome = await case(server, "2,000 streamed function calls")
    assert_kind(row, outcome, "too_large", limit="max_tool_calls")


async def test_endless_arguments(server: FakeProviderServer) -> None:
    item = {"type": "function_call", "id": "fc_0", "call_id": "c0", "name": "f", "arguments": ""}
    piece = frame("response.function_call_arguments.delta", output_index=0, delta="a" * 60_000)
    server.enqueue(
        Reply.sse([frame("response.output_item.added", output_index=0, item=item), *[piece] * 40])
    )
    limits = Limits(max_argument_bytes=1_000_000)
    row, outcome = await case(server, "2.4 MB of streamed arguments (bound 1 MB)", limits=limits)
    assert_kind(row, outcome, "too_large", limit="max_argument_bytes")


async def test_a_huge_line(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.sse(['data: {"type": "response.output_text.delta", "delta": "', Filler(64 * 2**20)])
    )
    row, outcome = await case(server, "a 64 MiB line without a newline")
    assert_kind(row, outcome, "too_large", limit="max_line_bytes")


@pytest.mark.parametrize("how", ["error event", "response.failed", "HTTP 401"])
async def test_an_echoed_key_is_scrubbed(server: FakeProviderServer, how: str) -> None:
    message = f"Incorrect API key provided: {KEY}. Also {KEY[3:20]}…"
    error = {"code": "invalid_api_key", "message": message}
    if how == "error event":
        server.enqueue(Reply.sse([frame("error", **error)]))
    elif how == "response.failed":
        server.enqueue(
            Reply.sse([frame("response.failed", response={"status": "failed", "error": error})])
        )
    else:
        server.enqueue(Reply.json({"error": error}, 401))
    row, outcome = await case(server, f"key echoed in {how}")
    failure = assert_kind(row, outcome, "auth")
    shown = f"{failure} {failure!r} {failure.message} {failure.args}"
    assert KEY not in shown
    assert KEY[3:20] not in shown
    assert_bounded(row)
