"""Error classification, retries, abort during backoff, failover, timeouts, secret hygiene."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from agentfsm import AbortController, Agent, AgentEmitter, UserMessage
from agentfsm.adapters.providers import (
    AnthropicChat,
    OpenAIChat,
    ProviderError,
    RetryPolicy,
    Router,
    Timeouts,
)
from agentfsm.adapters.providers._errors import (
    classify_error_body,
    is_overflow_message,
    parse_retry_after,
)
from agentfsm.conformance._frames import DONE, chunk, completion, openai_url
from agentfsm.engine._serialization import dumps
from agentfsm.testing import FakeProviderServer, Pause, Reply

FAST = Timeouts(connect=2, first_byte=2, idle=2, terminal_grace=0.3)
RETRY = RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.02, jitter=0)


def chat(server: FakeProviderServer, **options: Any) -> OpenAIChat:
    options.setdefault("timeouts", FAST)
    options.setdefault("retry", RETRY)
    options.setdefault("stream", False)
    return OpenAIChat("m", base_url=openai_url(server), **options)


OK = Reply.json(completion({"role": "assistant", "content": "ok"}))


def err(
    status: int, message: str = "x", code: Any = None, type_: str | None = None, headers: Any = None
) -> Reply:
    body: dict[str, Any] = {"error": {"message": message}}
    if code is not None:
        body["error"]["code"] = code
    if type_ is not None:
        body["error"]["type"] = type_
    return Reply.json(body, status=status, headers=headers)


@pytest.mark.parametrize(
    ("reply", "kind", "requests"),
    [
        (
            err(429, "Rate limit reached", "rate_limit_exceeded", headers={"retry-after": "0"}),
            "rate_limit",
            3,
        ),
        (err(429, "You exceeded your current quota", "insufficient_quota"), "quota", 1),
        (err(401, "Incorrect API key", "invalid_api_key"), "auth", 1),
        (err(403, "forbidden"), "auth", 1),
        (err(400, "bad parameter", "invalid_value"), "bad_request", 1),
        (
            err(
                400, "This model's maximum context length is 8192 tokens", "context_length_exceeded"
            ),
            "context_overflow",
            1,
        ),
        (err(500, "boom", type_="server_error"), "server", 3),
        (err(502, "bad gateway"), "server", 3),
        (err(503, "slow down", "slow_down"), "overloaded", 3),
        (err(529, "Overloaded", type_="overloaded_error"), "overloaded", 3),
        (err(408, "timeout"), "timeout", 3),
        (err(500, "no", headers={"x-should-retry": "false"}), "server", 1),
        (err(400, "yes", headers={"x-should-retry": "true"}), "bad_request", 3),
        (err(400, "flagged", "content_filter"), "content_filter", 1),
    ],
)
async def test_retry_counts_per_kind(
    server: FakeProviderServer, reply: Reply, kind: str, requests: int
) -> None:
    server.enqueue(reply, reply, reply, reply)
    model = chat(server)
    with pytest.raises(ProviderError) as raised:
        await model([UserMessage("x")], [])
    await model.aclose()
    assert raised.value.kind == kind
    assert len(server.requests) == requests


async def test_retry_then_success(server: FakeProviderServer) -> None:
    server.enqueue(err(503, "busy"), Reply.raw(b"", status=500), OK)
    model = chat(server)
    result = await model([UserMessage("x")], [])
    await model.aclose()
    assert result.message.content == "ok"
    assert len(server.requests) == 3


def test_retry_after_sources() -> None:
    assert parse_retry_after({"Retry-After": "7"}) == 7
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after(
        {}, "Rate limit reached. Please try again in 1.898s."
    ) == pytest.approx(1.898)
    assert parse_retry_after({}, "please try again in 250ms") == pytest.approx(0.25)
    future = format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    assert 15 < (parse_retry_after({"retry-after": future}) or 0) <= 20
    assert parse_retry_after({"retry-after": "3600"}) == 60  # capped
    assert parse_retry_after({}) is None


async def test_retry_after_is_honoured(server: FakeProviderServer) -> None:
    server.enqueue(err(429, "slow", "rate_limit_exceeded", headers={"retry-after-ms": "300"}), OK)
    model = chat(server)
    started = time.monotonic()
    await model([UserMessage("x")], [])
    await model.aclose()
    assert time.monotonic() - started >= 0.28


async def test_abort_during_backoff_returns_quickly(server: FakeProviderServer) -> None:
    server.enqueue(err(429, "slow", "rate_limit_exceeded", headers={"retry-after": "30"}), OK)
    controller = AbortController()
    model = chat(server, retry=RetryPolicy(max_attempts=3))

    async def abort_soon() -> float:
        await asyncio.sleep(0.2)
        controller.abort()
        return time.monotonic()

    aborter = asyncio.create_task(abort_soon())
    with pytest.raises(ProviderError) as raised:
        await model([UserMessage("x")], [], signal=controller.signal)
    returned = time.monotonic()
    await model.aclose()
    assert raised.value.kind == "aborted"
    assert returned - await aborter < 0.2
    assert len(server.requests) == 1


async def test_no_retry_after_output_was_streamed(server: FakeProviderServer) -> None:
    from agentfsm.testing import Drop

    partial = Reply.sse([chunk({"content": "half an ans"}), Drop()])
    server.enqueue(partial, partial, OK)
    model = chat(server, stream=True)
    with pytest.raises(ProviderError) as raised:
        await model([UserMessage("x")], [], on_delta=lambda d: None)
    assert raised.value.response_started
    assert len(server.requests) == 1
    # Nothing reached a caller yet (no on_delta): the same failure is safe to retry.
    result = await model([UserMessage("x")], [])
    await model.aclose()
    assert result.message.content == "ok"
    assert len(server.requests) == 3


async def test_failover_order_and_stops() -> None:
    with (
        FakeProviderServer() as first,
        FakeProviderServer() as second,
        FakeProviderServer() as third,
    ):
        first.enqueue(*[err(503, "down")] * 3)
        second.enqueue(*[err(500, "down")] * 3)
        third.enqueue(OK)
        router = Router(
            [chat(first, name="first"), chat(second, name="second"), chat(third, name="third")]
        )
        result = await router([UserMessage("x")], [])
        assert result.message.content == "ok"
        assert router.attempts == ["first", "second", "third"]
        assert (len(first.requests), len(second.requests), len(third.requests)) == (3, 3, 1)

        # A non-failover failure (auth) is raised at once.
        first.enqueue(err(401, "bad key"))
        with pytest.raises(ProviderError) as raised:
            await router([UserMessage("x")], [])
        assert raised.value.kind == "auth"
        assert router.attempts == ["first"]

        # An aborted signal stops the walk.
        controller = AbortController()
        first.enqueue(*[err(503, "down")] * 3)
        first.handler = None

        async def slow_then_abort() -> None:
            await asyncio.sleep(0.05)
            controller.abort()

        task = asyncio.create_task(slow_then_abort())
        with pytest.raises(ProviderError) as stopped:
            await router([UserMessage("x")], [], signal=controller.signal)
        await task
        assert stopped.value.kind == "aborted"
        assert "third" not in router.attempts
        for model in router.providers:
            await model.aclose()  # type: ignore[attr-defined]


async def test_timeouts_by_phase(server: FakeProviderServer) -> None:
    tight = Timeouts(connect=1, first_byte=0.3, idle=0.3, terminal_grace=0.3)
    server.enqueue(Reply.stall(2, OK))
    model = chat(server, timeouts=tight, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(ProviderError) as first_byte:
        await model([UserMessage("x")], [])
    assert (first_byte.value.kind, first_byte.value.phase) == ("timeout", "first_byte")

    server.enqueue(Reply.sse([chunk({"content": "a"}), Pause(1.5), chunk({}, finish="stop")]))
    streaming = chat(server, timeouts=tight, retry=RetryPolicy(max_attempts=1), stream=True)
    with pytest.raises(ProviderError) as idle:
        await streaming([UserMessage("x")], [])
    assert (idle.value.kind, idle.value.phase, idle.value.in_stream) == ("timeout", "idle", True)

    # A long stream that keeps sending is never cut, however long it lasts in all.
    steady = [chunk({"content": "."}) if i % 2 == 0 else Pause(0.1) for i in range(16)]
    server.enqueue(Reply.sse([*steady, chunk({}, finish="stop"), DONE]))
    result = await streaming([UserMessage("x")], [])
    assert result.message.content == "." * 8
    await model.aclose()
    await streaming.aclose()


async def test_connection_refused_is_a_connection_error() -> None:
    with FakeProviderServer() as server:
        url = openai_url(server)
    model = OpenAIChat(
        "m", base_url=url, retry=RetryPolicy(max_attempts=2, initial_delay=0.01), timeouts=FAST
    )
    with pytest.raises(ProviderError) as raised:
        await model([UserMessage("x")], [])
    await model.aclose()
    assert (raised.value.kind, raised.value.phase) == ("connection", "connect")


OVERFLOW = [
    "prompt is too long: 212345 tokens > 200000 maximum",
    "Your input exceeds the context window of this model",
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
    "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
    "This model's maximum prompt length is 131072 but the request contains 140000 tokens.",
    "Please reduce the length of the messages or completion.",
    "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 5000. Input is longer than the model's context length",
    "the request exceeds the available context size, try increasing it",
    "Trying to keep the first 5000 tokens when context the overflows. However, the model is loaded with context length of 4096, which is greater than the context length",
    "Prompt contains 40000 tokens, too large for model with 32768 maximum context length",
    "prompt too long; exceeded max context length by 1000 tokens",
]
NOT_OVERFLOW = [
    "ThrottlingException: Too many tokens, please wait before trying again.",
    "Rate limit reached for gpt-4 on tokens per min (TPM): Limit 30000",
    "Too many requests",
    "Internal server error",
]


@pytest.mark.parametrize("message", OVERFLOW)
def test_overflow_corpus(message: str) -> None:
    assert is_overflow_message(message)
    assert classify_error_body(400, {"error": {"message": message}}).kind == "context_overflow"


@pytest.mark.parametrize("message", NOT_OVERFLOW)
def test_overflow_negative_guard(message: str) -> None:
    assert not is_overflow_message(message)
    assert classify_error_body(429, {"error": {"message": message}}).kind != "context_overflow"


SECRET = "sk-live-7f3a9c2e41b84d6aa0c5e9f1d2b3c4d5"


async def test_api_key_never_leaks(
    server: FakeProviderServer, caplog: pytest.LogCaptureFixture
) -> None:
    echo = f"Incorrect API key provided: {SECRET[:8]}***{SECRET[-12:]}. You passed {SECRET}."
    server.enqueue(*[err(500, echo)] * 3, err(401, echo, "invalid_api_key"))
    emitter = AgentEmitter()
    seen: list[str] = []
    emitter.on("*", lambda e: seen.append(dumps(e)))
    model = chat(server, api_key=SECRET)
    engine = Agent(model)
    engine.events.on("*", lambda e: seen.append(dumps(e)))
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(ProviderError) as first:
            await engine.run("hi")
        with pytest.raises(ProviderError) as second:
            await model([UserMessage("x")], [])
    await model.aclose()
    anthropic_server = FakeProviderServer().start()
    try:
        anthropic_server.enqueue(
            Reply.json(
                {
                    "type": "error",
                    "error": {
                        "type": "authentication_error",
                        "message": f"invalid x-api-key {SECRET}",
                    },
                },
                status=401,
            )
        )
        claude = AnthropicChat(
            "c",
            base_url=anthropic_server.base_url,
            api_key=SECRET,
            retry=RetryPolicy(max_attempts=1),
        )
        with pytest.raises(ProviderError) as third:
            await claude([UserMessage("x")], [])
        await claude.aclose()
    finally:
        anthropic_server.stop()
    texts = [
        str(first.value),
        repr(first.value),
        str(second.value),
        str(third.value),
        caplog.text,
        *seen,
    ]
    for text in texts:
        assert SECRET not in text
        assert SECRET[-12:] not in text
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"  # it was sent, though
