"""Hostile servers that try to make a provider call last forever: each ends at the call's
total deadline, whatever trickles in."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agentfsm.adapters.providers import (
    AnthropicChat,
    OpenAIChat,
    OpenAIResponses,
    RetryPolicy,
    Timeouts,
)
from agentfsm.conformance._frames import chunk, event
from agentfsm.testing import FakeProviderServer, Repeat, Reply, responses_events
from agentfsm.testing._hostile import keep_alive

from ._provider import TOTAL, Wire, ask, assert_kind, chat_case, measured


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as running:
        yield running


STREAMS: list[tuple[str, Wire, Reply]] = [
    ("keep-alive comments forever", "openai-chat", keep_alive(": keep-alive\n\n")),
    ("empty data frames forever", "openai-chat", keep_alive("data: \n\n")),
    ("id-only events forever", "openai-chat", keep_alive("id: 7\n\n")),
    ("choices: [] chunks forever", "openai-chat", keep_alive('data: {"choices": []}\n\n')),
    (
        "text, then keep-alives forever",
        "openai-chat",
        keep_alive(": ping\n\n", first=chunk({"content": "partial"})),
    ),
    (
        "anthropic pings forever",
        "anthropic",
        keep_alive(
            'event: ping\ndata: {"type": "ping"}\n\n',
            first=event("message_start", {"message": {"usage": {}}}),
        ),
    ),
]


@pytest.mark.parametrize(("name", "wire", "reply"), STREAMS, ids=[s[0] for s in STREAMS])
async def test_streams_that_never_end_stop_at_the_deadline(
    server: FakeProviderServer, name: str, wire: Wire, reply: Reply
) -> None:
    server.enqueue(reply)
    row, outcome = await chat_case(server, name, wire)
    error = assert_kind(row, outcome, "timeout", phase="total")
    assert not error.retryable
    assert row.seconds >= TOTAL * 0.9


BODY = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}'


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic"])
async def test_a_json_body_at_one_byte_per_second(server: FakeProviderServer, wire: Wire) -> None:
    server.enqueue(Reply.trickled(Reply.raw(BODY, headers={"content-type": "application/json"})))
    row, outcome = await chat_case(server, f"{wire}: JSON body at 1 byte/s", wire, stream=False)
    assert_kind(row, outcome, "timeout", phase="total")


async def test_an_error_body_at_one_byte_per_second(server: FakeProviderServer) -> None:
    error = b'{"error": {"message": "overloaded", "type": "server_error"}}'
    server.enqueue(Reply.trickled(Reply.raw(error, 500, {"content-type": "application/json"})))
    row, outcome = await chat_case(server, "error body at 1 byte/s", stream=False)
    assert_kind(row, outcome, "timeout", phase="total")


async def test_a_stream_at_one_byte_per_second(server: FakeProviderServer) -> None:
    server.enqueue(Reply.trickled(Reply.sse([chunk({"content": "x" * 100})]), 0.2))
    row, outcome = await chat_case(server, "stream frame at 5 bytes/s")
    assert_kind(row, outcome, "timeout", phase="total")


async def test_headers_that_never_come(server: FakeProviderServer) -> None:
    server.enqueue(Reply.stall(60))
    row, outcome = await chat_case(server, "no response headers for 60 s")
    assert_kind(row, outcome, "timeout", phase="total")


async def test_retries_stay_within_the_deadline(server: FakeProviderServer) -> None:
    from agentfsm.adapters.providers import RetryPolicy

    slow_500 = Reply.stall(0.8, Reply.json({"error": {"message": "x"}}, 500))
    server.enqueue(*[slow_500] * 10)
    retry = RetryPolicy(max_attempts=10, initial_delay=0.5, max_delay=0.5, jitter=0)
    row, outcome = await chat_case(server, "slow 500s, 10 attempts allowed", retry=retry)
    assert_kind(row, outcome, "timeout", phase="total")
    assert len(server.requests) <= 3


FINISHED: list[tuple[str, list[str], str]] = [
    ("openai-chat", [chunk({"content": "ok"}), chunk({}, finish="stop"), "data: [DONE]\n\n"], ""),
    (
        "anthropic",
        [
            event("message_start", {"message": {"usage": {}}}),
            event("content_block_start", {"index": 0, "content_block": {"type": "text"}}),
            event(
                "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "ok"}}
            ),
            event("message_delta", {"delta": {"stop_reason": "end_turn"}}),
            event("message_stop", {}),
        ],
        "",
    ),
    ("openai-responses", responses_events("ok"), "/v1"),
]


@pytest.mark.parametrize(("wire", "frames", "root"), FINISHED, ids=[f[0] for f in FINISHED])
async def test_keep_alives_after_the_answer_do_not_hold_the_call(
    server: FakeProviderServer, wire: str, frames: list[str], root: str
) -> None:
    """The answer is whole; the server keeps the body open with a keep-alive every 50 ms.
    The call returns within the drain's bound, not at a deadline (there is none here)."""
    server.enqueue(Reply.sse([*frames, Repeat(": keep-alive\n\n", interval=0.05)]))
    unbounded = Timeouts(connect=2, first_byte=5, idle=5, terminal_grace=0.3, total=None)
    options: dict[str, Any] = {"timeouts": unbounded, "retry": RetryPolicy(max_attempts=1)}
    base = server.base_url + root
    chat: OpenAIChat | AnthropicChat | OpenAIResponses = (
        AnthropicChat("m", base_url=base, **options)
        if wire == "anthropic"
        else OpenAIResponses("m", base_url=base, **options)
        if wire == "openai-responses"
        else OpenAIChat("m", base_url=f"{base}/v1", **options)
    )
    row, outcome = await measured(
        f"{wire}: keep-alives every 50 ms after the answer", lambda: ask(chat)
    )
    assert not isinstance(outcome, Exception), row.outcome
    assert outcome.message.content == "ok"
    assert row.seconds < 2, f"{row.name}: {row.seconds:.1f} s"
