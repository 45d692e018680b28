"""Hostile servers that send valid JSON of the wrong shape or 10,000 levels deep: every one
is a ``bad_response`` ProviderError (never RecursionError, TypeError, AttributeError), and a
Router fails over on it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agentfsm.adapters.providers import ProviderError, RetryPolicy, Router
from agentfsm.conformance._frames import DONE, chunk, completion, data, event, tool_delta
from agentfsm.testing import FakeProviderServer, Reply
from agentfsm.testing._hostile import WRONG_TYPES_ANTHROPIC, WRONG_TYPES_OPENAI, deep_json

from ._provider import Wire, adapter, assert_bounded, assert_kind, chat_case, measured


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as running:
        yield running


def _json(text: str, status: int = 200) -> Reply:
    return Reply.raw(text, status, {"content-type": "application/json"})


DEEP = deep_json(10_000)


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic"])
async def test_a_deep_body(server: FakeProviderServer, wire: Wire) -> None:
    server.enqueue(_json(DEEP))
    row, outcome = await chat_case(server, f"{wire}: 10,000-deep JSON body", wire, stream=False)
    assert_kind(row, outcome, "bad_response")


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic"])
async def test_a_deep_stream_frame(server: FakeProviderServer, wire: Wire) -> None:
    server.enqueue(Reply.sse([f"data: {DEEP}\n\n"]))
    row, outcome = await chat_case(server, f"{wire}: 10,000-deep JSON stream frame", wire)
    error = assert_kind(row, outcome, "bad_response")
    assert error.in_stream


async def test_a_deep_error_body(server: FakeProviderServer) -> None:
    server.enqueue(_json(DEEP, 429))
    row, outcome = await chat_case(server, "10,000-deep JSON 429 body", stream=False)
    assert_kind(row, outcome, "rate_limit")


async def test_deep_but_legal_nesting_past_the_bound(server: FakeProviderServer) -> None:
    body = completion({"role": "assistant", "content": "x"})
    body["extra"] = json.loads(deep_json(500))
    server.enqueue(Reply.json(body))
    row, outcome = await chat_case(server, "500-deep JSON (Python parses it)", stream=False)
    error = assert_kind(row, outcome, "bad_response")
    assert error.limit == "max_json_depth"


@pytest.mark.parametrize("stream", [False, True])
async def test_deep_tool_arguments(server: FakeProviderServer, stream: bool) -> None:
    arguments = '{"a": ' + DEEP + "}"
    if stream:
        server.enqueue(Reply.sse([chunk(tool_delta(0, "c1", "f", arguments)), DONE]))
    else:
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
        server.enqueue(Reply.json(completion({"role": "assistant", "tool_calls": [call]})))
    how = "streamed" if stream else "in a body"
    row, outcome = await chat_case(server, f"10,000-deep tool arguments {how}", stream=stream)
    assert_kind(row, outcome, "bad_response")


WRONG: list[tuple[Wire, Any]] = [("openai-chat", b) for b in WRONG_TYPES_OPENAI] + [
    ("anthropic", b) for b in WRONG_TYPES_ANTHROPIC
]


@pytest.mark.parametrize(("wire", "body"), WRONG)
async def test_wrong_types_in_a_body(server: FakeProviderServer, wire: Wire, body: Any) -> None:
    server.enqueue(Reply.json(body))
    name = f"{wire}: {json.dumps(body)[:60]}"
    row, outcome = await chat_case(server, name, wire, stream=False)
    assert_kind(row, outcome, "bad_response")


WRONG_FRAMES: list[tuple[Wire, str]] = [
    ("openai-chat", data({"choices": "abc"})),
    ("openai-chat", data({"choices": [{"index": 0, "delta": "x"}]})),
    ("openai-chat", data({"choices": [{"index": 0, "delta": {"content": 5}}]})),
    ("openai-chat", data({"choices": [{"index": 0, "delta": {"tool_calls": "x"}}]})),
    ("openai-chat", data({"choices": [{"index": 0, "delta": {"tool_calls": [7]}}]})),
    ("openai-chat", chunk(tool_delta(0, "c", "f", 5))),
    ("openai-chat", data({"choices": [{"index": 0, "delta": {}, "finish_reason": 1}]})),
    ("openai-chat", data({"choices": [], "usage": "x"})),
    ("anthropic", event("message_start", {"message": "x"})),
    ("anthropic", event("content_block_start", {"index": "x", "content_block": {}})),
    ("anthropic", event("content_block_start", {"index": 0, "content_block": "x"})),
    ("anthropic", event("content_block_delta", {"index": 0, "delta": "x"})),
    (
        "anthropic",
        event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": 5}}),
    ),
    ("anthropic", event("message_delta", {"delta": {"stop_reason": 5}})),
]


@pytest.mark.parametrize(("wire", "frame"), WRONG_FRAMES)
async def test_wrong_types_in_a_stream(server: FakeProviderServer, wire: Wire, frame: str) -> None:
    server.enqueue(Reply.sse([frame, DONE]))
    name = f"{wire} stream: {frame.strip().splitlines()[-1][6:66]}"
    row, outcome = await chat_case(server, name, wire)
    error = assert_kind(row, outcome, "bad_response")
    assert error.in_stream


async def test_the_router_fails_over_on_a_bad_response() -> None:
    with FakeProviderServer() as bad, FakeProviderServer() as good:
        bad.enqueue(Reply.json({"choices": "abc"}))
        good.enqueue(Reply.json(completion({"role": "assistant", "content": "ok"})))
        first = adapter(bad.base_url, stream=False, name="bad")
        second = adapter(good.base_url, stream=False, name="good")
        router = Router([first, second])

        async def call() -> Any:
            try:
                return await router([], [])
            finally:
                await first.aclose()
                await second.aclose()

        row, outcome = await measured("Router: bad_response, then a good provider", call)
        row.outcome = f"{row.outcome} via {' -> '.join(router.attempts)}"
    assert not isinstance(outcome, Exception), row.outcome
    assert outcome.message.content == "ok"
    assert router.attempts == ["bad", "good"]
    assert_bounded(row)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "NaN"])
async def test_retry_after_that_is_not_a_number(server: FakeProviderServer, value: str) -> None:
    server.enqueue(
        Reply.json({"error": {"message": "slow down"}}, 429, {"retry-after": value}),
        Reply.json(completion({"role": "assistant", "content": "ok"})),
    )
    retry = RetryPolicy(max_attempts=2, initial_delay=0.05, max_delay=0.1, jitter=0)
    started = time.monotonic()
    row, outcome = await chat_case(
        server, f"429 with Retry-After: {value}", stream=False, retry=retry
    )
    assert not isinstance(outcome, ProviderError), row.outcome
    assert time.monotonic() - started < 2
    assert_bounded(row)
