"""The default client under concurrency: one adapter (so one Agent) serves many calls at
once through one pool, without pool timeouts, and reuses its connections."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from agentfsm import Agent, UserMessage
from agentfsm.adapters.providers import OpenAIChat, default_http_client
from agentfsm.adapters.providers._http_adapter import (
    KEEPALIVE_EXPIRY,
    MAX_KEEPALIVE,
    default_pool_size,
)

CONCURRENT = 250
HANG_GUARD = 120.0


def _frame(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _response() -> bytes:
    body = b"".join(
        [
            _frame({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}}]}),
            _frame({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            _frame({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}),
            b"data: [DONE]\n\n",
        ]
    )
    head = (
        f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class KeepAliveServer(asyncio.Protocol):
    """Answers every request on a connection with the same short stream; counts connections."""

    connections = 0
    response = _response()

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        type(self).connections += 1
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            length = 0
            for line in bytes(self.buffer[:end]).split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            del self.buffer[: end + 4 + length]
            assert self.transport is not None
            self.transport.write(self.response)


@pytest.fixture
async def base_url() -> AsyncIterator[str]:
    KeepAliveServer.connections = 0
    loop = asyncio.get_running_loop()
    server = await loop.create_server(KeepAliveServer, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()
        await server.wait_closed()


def test_default_client_is_sized_for_concurrency() -> None:
    client = default_http_client()
    pool = client._transport._pool  # type: ignore[attr-defined]
    assert pool._max_connections == default_pool_size() >= 16
    assert pool._max_keepalive_connections == min(default_pool_size(), MAX_KEEPALIVE)
    assert pool._keepalive_expiry == KEEPALIVE_EXPIRY
    assert client.timeout.pool is None  # the wait counts toward first_byte and total


def test_default_clients_share_one_ssl_context() -> None:
    first = OpenAIChat("m").client
    second = OpenAIChat("m").client
    assert first is not second
    context = first._transport._pool._ssl_context  # type: ignore[attr-defined]
    assert context is second._transport._pool._ssl_context  # type: ignore[attr-defined]


async def test_many_concurrent_calls_share_one_pool(base_url: str) -> None:
    chat = OpenAIChat("m", base_url=base_url)
    try:
        results = await asyncio.wait_for(
            asyncio.gather(
                *(chat([UserMessage(f"q{i}")], ()) for i in range(CONCURRENT)),
                return_exceptions=True,
            ),
            HANG_GUARD,
        )
    finally:
        await chat.aclose()
    errors = [r for r in results if isinstance(r, BaseException)]
    assert errors == []
    assert all(not isinstance(r, BaseException) and r.message.content == "ok" for r in results)
    assert KeepAliveServer.connections <= min(CONCURRENT, default_pool_size())


async def test_engine_runs_share_the_adapters_client(base_url: str) -> None:
    chat = OpenAIChat("m", base_url=base_url)
    engine = Agent(chat)
    try:
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(engine.run(f"q{i}") for i in range(CONCURRENT))), HANG_GUARD
        )
        client = chat.client
        for _ in range(5):  # one at a time: the pooled connections are reused
            await engine.run("again")
        assert chat.client is client
    finally:
        await chat.aclose()
    assert all(o.final is not None and o.final.content == "ok" for o in outcomes)
    assert KeepAliveServer.connections <= min(CONCURRENT, default_pool_size())


async def test_a_finished_stream_leaves_its_connection_for_the_next_call(base_url: str) -> None:
    chat = OpenAIChat("m", base_url=base_url)
    try:
        for _ in range(5):
            result = await asyncio.wait_for(chat([UserMessage("q")], ()), HANG_GUARD)
            assert result.message.content == "ok"
    finally:
        await chat.aclose()
    assert KeepAliveServer.connections == 1


async def test_a_queued_call_waits_instead_of_failing(base_url: str) -> None:
    # Two connections for twenty calls: the others wait for a free one (no PoolTimeout).
    client = httpx.AsyncClient(
        limits=httpx.Limits(max_connections=2, max_keepalive_connections=2),
        timeout=httpx.Timeout(10.0, read=None, pool=None),
    )
    chat = OpenAIChat("m", base_url=base_url, http_client=client)
    try:
        results = await asyncio.wait_for(
            asyncio.gather(*(chat([UserMessage("q")], ()) for _ in range(20))), HANG_GUARD
        )
    finally:
        await client.aclose()
    assert [r.message.content for r in results] == ["ok"] * 20
    assert KeepAliveServer.connections <= 2
