"""Hostile servers that try to exhaust memory: each is cut at a bound of ``Limits`` (the
defaults unless the case says otherwise) with a ``too_large`` error."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from agentfsm.adapters.providers import Limits, ProviderError, Timeouts
from agentfsm.conformance._frames import DONE, chunk, event, tool_delta
from agentfsm.testing import FakeProviderServer, Filler, Repeat, Reply
from agentfsm.testing._hostile import gzip_bomb, huge_line, many_tool_calls

from ._provider import Wire, assert_kind, chat_case

MiB = 1024 * 1024
GiB = 1024 * MiB


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as running:
        yield running


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic"])
async def test_a_400_mb_line(server: FakeProviderServer, wire: Wire) -> None:
    server.enqueue(huge_line(400 * MiB))
    row, outcome = await chat_case(server, f"{wire}: one 400 MB SSE line", wire)
    assert_kind(row, outcome, "too_large", limit="max_line_bytes")


async def test_an_event_of_many_lines(server: FakeProviderServer) -> None:
    line = "data: " + "a" * MiB + "\n"
    server.enqueue(Reply.sse([Repeat(line, times=400)]))
    row, outcome = await chat_case(server, "one event of 400 1 MB data lines")
    assert_kind(row, outcome, "too_large", limit="max_event_bytes")


async def test_a_gzip_bomb_body(server: FakeProviderServer) -> None:
    server.enqueue(gzip_bomb(GiB))
    row, outcome = await chat_case(server, "1 MB gzip bomb (1 GiB) as a JSON body", stream=False)
    assert_kind(row, outcome, "too_large", limit="max_body_bytes")


async def test_a_gzip_bomb_stream(server: FakeProviderServer) -> None:
    server.enqueue(gzip_bomb(GiB, stream=True))
    row, outcome = await chat_case(server, "1 MB gzip bomb (1 GiB) on the SSE path")
    assert_kind(row, outcome, "too_large", limit="max_line_bytes")


async def test_a_gzip_bomb_error_body(server: FakeProviderServer) -> None:
    server.enqueue(gzip_bomb(GiB, status=503))
    row, outcome = await chat_case(server, "1 MB gzip bomb (1 GiB) as a 503 body", stream=False)
    error = assert_kind(row, outcome, "overloaded")
    assert error.status == 503


CALLS: list[tuple[Wire, bool]] = [
    ("openai-chat", False),
    ("openai-chat", True),
    ("anthropic", False),
    ("anthropic", True),
]


@pytest.mark.parametrize(("wire", "stream"), CALLS)
async def test_ten_thousand_tool_calls(
    server: FakeProviderServer, wire: Wire, stream: bool
) -> None:
    server.enqueue(many_tool_calls(10_000, stream=stream, wire=wire))
    how = "streamed" if stream else "in one body"
    row, outcome = await chat_case(server, f"{wire}: 10,000 tool calls {how}", wire, stream=stream)
    assert_kind(row, outcome, "too_large", limit="max_tool_calls")


async def test_one_call_with_endless_arguments(server: FakeProviderServer) -> None:
    piece = chunk(tool_delta(0, "call_1", "write_file", '{"content": "'))
    more = chunk(tool_delta(0, arguments="a" * MiB))
    server.enqueue(Reply.sse([piece, Repeat(more, times=100)]))
    row, outcome = await chat_case(server, "one tool call, 100 MB of arguments in 1 MB deltas")
    assert_kind(row, outcome, "too_large", limit="max_argument_bytes")


async def test_anthropic_endless_arguments(server: FakeProviderServer) -> None:
    start = event("message_start", {"message": {"usage": {}}})
    block = event(
        "content_block_start",
        {"index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}}},
    )
    delta = event(
        "content_block_delta",
        {"index": 0, "delta": {"type": "input_json_delta", "partial_json": "a" * MiB}},
    )
    server.enqueue(Reply.sse([start, block, Repeat(delta, times=100)]))
    row, outcome = await chat_case(
        server, "anthropic: 100 MB of tool input in 1 MB deltas", "anthropic"
    )
    assert_kind(row, outcome, "too_large", limit="max_argument_bytes")


async def test_text_that_never_stops_growing(server: FakeProviderServer) -> None:
    server.enqueue(Reply.sse([Repeat(chunk({"content": "x" * 65536}), times=2000)]))
    limits = Limits(max_body_bytes=16 * MiB)
    row, outcome = await chat_case(server, "128 MB of text deltas (bound 16 MiB)", limits=limits)
    error = assert_kind(row, outcome, "too_large", limit="max_body_bytes")
    assert error.in_stream


async def test_many_tiny_deltas_cost_no_more_than_their_text(server: FakeProviderServer) -> None:
    server.enqueue(Reply.sse([Repeat(chunk({"content": "x"}), times=20_000), DONE]))
    slow = Timeouts(connect=2, first_byte=10, idle=10, terminal_grace=0.3, total=60)
    row, outcome = await chat_case(server, "20,000 one-character text deltas", timeouts=slow)
    assert not isinstance(outcome, ProviderError), row.outcome
    assert outcome.message.content == "x" * 20_000
    assert row.growth_mb < 100


async def test_big_arguments_within_the_bounds_pass(server: FakeProviderServer) -> None:
    content = "b" * (4 * MiB)
    arguments = json.dumps({"path": "big.txt", "content": content})
    server.enqueue(Reply.sse([chunk(tool_delta(0, "call_1", "write_file", arguments)), DONE]))
    row, outcome = await chat_case(server, "a 4 MiB write_file call in one SSE line")
    assert not isinstance(outcome, ProviderError), row.outcome
    assert outcome.message.tool_calls[0].arguments["content"] == content


async def test_a_body_that_never_ends(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.sse([Filler(10 * 1024 * MiB)], headers={"content-type": "application/json"})
    )
    row, outcome = await chat_case(server, "a 10 GB JSON body", stream=False)
    assert_kind(row, outcome, "too_large", limit="max_body_bytes")
