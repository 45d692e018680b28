"""Decoding and origins: gzip and deflate replies, httpx's MockTransport, and redirects that
try to take the API key to another server."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentfsm.adapters.providers import ProviderError
from agentfsm.conformance._frames import DONE, chunk, completion, event
from agentfsm.testing import FakeProviderServer, Reply

from ._provider import Wire, adapter, ask, assert_bounded, assert_kind, chat_case, measured

KEY = "sk-origin-test-0123456789abcdef"
OK = completion({"role": "assistant", "content": "ok"})


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as running:
        yield running


def _ok(row: Any, outcome: Any) -> None:
    assert not isinstance(outcome, Exception), row.outcome
    assert outcome.message.content == "ok"
    assert_bounded(row)


async def test_a_gzip_json_reply(server: FakeProviderServer) -> None:
    server.enqueue(Reply.gzipped(Reply.json(OK)))
    row, outcome = await chat_case(server, "gzip JSON reply", stream=False)
    _ok(row, outcome)


async def test_a_deflate_json_reply(server: FakeProviderServer) -> None:
    import json

    body = zlib.compress(json.dumps(OK).encode())
    headers = {"content-type": "application/json", "content-encoding": "deflate"}
    server.enqueue(Reply.raw(body, headers=headers))
    row, outcome = await chat_case(server, "deflate JSON reply", stream=False)
    _ok(row, outcome)


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic"])
async def test_a_gzip_stream(server: FakeProviderServer, wire: Wire) -> None:
    if wire == "anthropic":
        frames = [
            event("message_start", {"message": {"usage": {}}}),
            event("content_block_start", {"index": 0, "content_block": {"type": "text"}}),
            event(
                "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "ok"}}
            ),
            event("message_delta", {"delta": {"stop_reason": "end_turn"}}),
            event("message_stop", {}),
        ]
    else:
        frames = [chunk({"content": "ok"}), chunk({}, finish="stop"), DONE]
    server.enqueue(Reply.gzipped(Reply.sse(frames)))
    row, outcome = await chat_case(server, f"{wire}: gzip SSE stream", wire)
    _ok(row, outcome)


async def test_a_gzip_error_body(server: FakeProviderServer) -> None:
    error = {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}
    server.enqueue(Reply.gzipped(Reply.json(error, 429)))
    row, outcome = await chat_case(server, "gzip 429 error body", stream=False)
    assert_kind(row, outcome, "rate_limit")


async def test_a_broken_gzip_body(server: FakeProviderServer) -> None:
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    server.enqueue(Reply.raw(b"\x1f\x8bnot gzip at all", headers=headers))
    row, outcome = await chat_case(server, "a body that is not the gzip it claims", stream=False)
    assert_kind(row, outcome, "bad_response")


def _mock(handler: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


MOCK_CASES: list[tuple[str, Wire, bool, httpx.Response, str | None]] = [
    ("openai JSON", "openai-chat", False, httpx.Response(200, json=OK), None),
    (
        "openai stream",
        "openai-chat",
        True,
        httpx.Response(
            200,
            content=(chunk({"content": "ok"}) + chunk({}, finish="stop") + DONE).encode(),
            headers={"content-type": "text/event-stream"},
        ),
        None,
    ),
    (
        "anthropic JSON",
        "anthropic",
        False,
        httpx.Response(200, json={"type": "message", "content": [{"type": "text", "text": "ok"}]}),
        None,
    ),
    (
        "openai 401",
        "openai-chat",
        False,
        httpx.Response(401, json={"error": {"message": "no"}}),
        "auth",
    ),
    (
        "anthropic 529",
        "anthropic",
        False,
        httpx.Response(529, json={"type": "error", "error": {"type": "overloaded_error"}}),
        "overloaded",
    ),
]


@pytest.mark.parametrize(("name", "wire", "stream", "response", "kind"), MOCK_CASES)
async def test_httpx_mock_transport(
    name: str, wire: Wire, stream: bool, response: httpx.Response, kind: str | None
) -> None:
    client = _mock(lambda request: response)
    chat = adapter("http://mock.test", wire, stream=stream, http_client=client)

    async def call() -> Any:
        async with client:
            return await ask(chat)

    row, outcome = await measured(f"MockTransport: {name}", call)
    if kind is None:
        _ok(row, outcome)
    else:
        assert_kind(row, outcome, kind)


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic"])
@pytest.mark.parametrize("status", [307, 308, 302, 301])
async def test_no_key_across_origins(server: FakeProviderServer, wire: Wire, status: int) -> None:
    with FakeProviderServer() as elsewhere:
        elsewhere.handler = lambda request: Reply.json(OK)
        server.enqueue(Reply.redirect(f"{elsewhere.base_url}/v1/chat/completions", status))
        client = httpx.AsyncClient(follow_redirects=True)
        chat = adapter(server.base_url, wire, stream=False, api_key=KEY, http_client=client)

        async def call() -> Any:
            async with client:
                return await ask(chat)

        row, outcome = await measured(f"{wire}: {status} to another origin", call)
        got = elsewhere.requests
    error = assert_kind(row, outcome, "bad_response")
    assert error.provider_code == "cross_origin_redirect"
    assert got == [], [r.headers for r in got]
    assert KEY not in str(error)


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic"])
async def test_same_origin_307_is_followed(server: FakeProviderServer, wire: Wire) -> None:
    answer = (
        Reply.json({"type": "message", "content": [{"type": "text", "text": "ok"}]})
        if wire == "anthropic"
        else Reply.json(OK)
    )
    server.enqueue(Reply.redirect(f"{server.base_url}/moved", 307), answer)
    row, outcome = await chat_case(
        server, f"{wire}: 307 to the same origin", wire, stream=False, api_key=KEY
    )
    _ok(row, outcome)
    first, second = server.requests
    assert second.path == "/moved"
    assert second.body == first.body
    header = "x-api-key" if wire == "anthropic" else "authorization"
    assert KEY in second.headers[header]


async def test_a_same_origin_302_is_refused(server: FakeProviderServer) -> None:
    server.enqueue(Reply.redirect(f"{server.base_url}/moved", 302))
    row, outcome = await chat_case(
        server, "302 to the same origin (would drop the body)", stream=False
    )
    error = assert_kind(row, outcome, "bad_response")
    assert error.provider_code == "redirect"
    assert isinstance(outcome, ProviderError)
