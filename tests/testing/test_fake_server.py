"""``FakeProviderServer`` speaks real HTTP/1.1 over real sockets."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from agentfsm.testing import Drop, FakeProviderServer, Pause, RecordedRequest, Reply


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as server:
        yield server


def test_json_reply_with_status_and_headers(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.json(
            {"error": {"message": "slow down"}},
            status=429,
            headers={"retry-after": "2", "retry-after-ms": "1500", "x-should-retry": "true"},
        ),
        Reply.json({"ok": True}),
    )
    assert server.base_url.startswith("http://127.0.0.1:")
    with httpx.Client(base_url=server.base_url) as client:
        first = client.post("/v1/chat/completions", json={"model": "m"})
        second = client.get("/v1/models")
    assert first.status_code == 429
    assert first.json() == {"error": {"message": "slow down"}}
    assert first.headers["retry-after"] == "2"
    assert first.headers["retry-after-ms"] == "1500"
    assert first.headers["x-should-retry"] == "true"
    assert first.headers["content-type"] == "application/json"
    assert first.headers["connection"] == "close"
    assert int(first.headers["content-length"]) == len(first.content)
    assert second.status_code == 200
    assert second.json() == {"ok": True}
    assert server.pending == 0


def test_requests_are_recorded(server: FakeProviderServer) -> None:
    server.enqueue(Reply.json({}), Reply.raw("plain"))
    with httpx.Client(base_url=server.base_url) as client:
        client.post(
            "/v1/messages?beta=true",
            json={"model": "claude", "max_tokens": 5},
            headers={"X-Api-Key": "secret", "Anthropic-Version": "2023-06-01"},
        )
        raw = client.put("/upload", content=iter([b"ab", b"", b"cd"]))  # chunked request body
    assert raw.text == "plain"
    assert "content-type" not in raw.headers
    first, second = server.requests
    assert isinstance(first, RecordedRequest)
    assert first.method == "POST"
    assert first.path == "/v1/messages?beta=true"
    assert first.headers["x-api-key"] == "secret"
    assert first.headers["anthropic-version"] == "2023-06-01"
    assert first.headers["content-type"] == "application/json"
    assert first.json() == {"model": "claude", "max_tokens": 5}
    assert second.method == "PUT"
    assert second.headers["transfer-encoding"] == "chunked"
    assert second.body == b"abcd"


def test_handler_is_used_when_the_queue_is_empty(server: FakeProviderServer) -> None:
    def handler(request: RecordedRequest) -> Reply:
        return Reply.json({"echo": request.json()["n"]}, status=201)

    server.enqueue(Reply.json("scripted"))
    server.handler = handler
    with httpx.Client(base_url=server.base_url) as client:
        replies = [client.post("/", json={"n": n}) for n in range(3)]
    assert [r.json() for r in replies] == ["scripted", {"echo": 1}, {"echo": 2}]
    assert [r.status_code for r in replies] == [200, 201, 201]


def test_a_failing_handler_gives_a_500(server: FakeProviderServer) -> None:
    def handler(request: RecordedRequest) -> Reply:
        raise KeyError("boom")

    server.handler = handler
    with httpx.Client(base_url=server.base_url) as client:
        response = client.get("/")
    assert response.status_code == 500
    assert "KeyError" in response.json()["error"]["message"]


def test_empty_queue_without_handler_is_a_500(server: FakeProviderServer) -> None:
    with httpx.Client(base_url=server.base_url) as client:
        response = client.post("/v1/chat/completions", json={})
    assert response.status_code == 500
    assert response.json() == {
        "error": {"message": "FakeProviderServer: no scripted reply left", "type": "fake_server"}
    }
    assert len(server.requests) == 1


def test_sse_frames_arrive_one_by_one(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.sse(
            ['data: {"n": 1}\n\n', Pause(0.2), b'data: {"n": 2}\n\n', "", "data: [DONE]\n\n"],
            headers={"x-request-id": "req_1"},
        )
    )
    arrivals: list[tuple[float, bytes]] = []
    with (
        httpx.Client(base_url=server.base_url) as client,
        client.stream("POST", "/v1/chat/completions", json={"stream": True}) as response,
    ):
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["transfer-encoding"] == "chunked"
        assert response.headers["x-request-id"] == "req_1"
        for chunk in response.iter_raw():
            arrivals.append((time.monotonic(), chunk))
    assert b"".join(chunk for _, chunk in arrivals) == (
        b'data: {"n": 1}\n\ndata: {"n": 2}\n\ndata: [DONE]\n\n'
    )
    assert arrivals[0][1] == b'data: {"n": 1}\n\n'
    second = next(t for t, chunk in arrivals if b'"n": 2' in chunk)
    assert second - arrivals[0][0] >= 0.15


async def test_sse_frames_arrive_one_by_one_async() -> None:
    async with FakeProviderServer() as server:
        server.enqueue(Reply.sse(["event: a\ndata: 1\n\n", Pause(0.2), "event: b\ndata: 2\n\n"]))
        arrivals: list[tuple[float, bytes]] = []
        async with (
            httpx.AsyncClient(base_url=server.base_url) as client,
            client.stream("POST", "/v1/messages", json={}) as response,
        ):
            async for chunk in response.aiter_raw():
                arrivals.append((time.monotonic(), chunk))
    assert [chunk for _, chunk in arrivals] == [b"event: a\ndata: 1\n\n", b"event: b\ndata: 2\n\n"]
    assert arrivals[1][0] - arrivals[0][0] >= 0.15


def test_drop_cuts_the_stream(server: FakeProviderServer) -> None:
    server.enqueue(Reply.sse(["data: 1\n\n", Drop(), "data: never\n\n"]))
    received: list[bytes] = []
    with (
        httpx.Client(base_url=server.base_url) as client,
        client.stream("GET", "/") as response,
        pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)),
    ):
        received.extend(response.iter_raw())  # keeps the chunks read before the error
    assert received == [b"data: 1\n\n"]


async def test_drop_cuts_the_stream_async() -> None:
    async with FakeProviderServer() as server:
        server.enqueue(Reply.sse([Drop()]))
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
                await client.get("/")


def test_stall_trips_a_read_timeout(server: FakeProviderServer) -> None:
    server.enqueue(Reply.stall(1.0, then=Reply.json({})))
    timeout = httpx.Timeout(5.0, read=0.2)
    with httpx.Client(base_url=server.base_url, timeout=timeout) as client:
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            client.get("/")
    assert time.monotonic() - started < 0.9


def test_stall_then_reply_or_close(server: FakeProviderServer) -> None:
    server.enqueue(Reply.stall(0.2, then=Reply.json({"late": True})), Reply.stall(0.0))
    with httpx.Client(base_url=server.base_url) as client:
        started = time.monotonic()
        assert client.get("/").json() == {"late": True}
        assert time.monotonic() - started >= 0.15
        with pytest.raises(httpx.RemoteProtocolError):
            client.get("/")


async def test_connections_are_served_concurrently() -> None:
    async with FakeProviderServer() as server:
        server.enqueue(*(Reply.stall(0.3, then=Reply.json(n)) for n in range(3)))
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            started = time.monotonic()
            responses = await asyncio.gather(*(client.get(f"/{n}") for n in range(3)))
            elapsed = time.monotonic() - started
    assert sorted(r.json() for r in responses) == [0, 1, 2]
    assert elapsed < 0.8
    assert sorted(r.path for r in server.requests) == ["/0", "/1", "/2"]


async def test_stop_cancels_requests_in_flight() -> None:
    loop = asyncio.get_running_loop()
    arrived = asyncio.Event()

    def handler(request: RecordedRequest) -> Reply:  # runs on the server's thread
        loop.call_soon_threadsafe(arrived.set)
        return Reply.stall(30.0, then=Reply.json({}))

    async with FakeProviderServer() as server:
        server.handler = handler
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            request = asyncio.create_task(client.get("/"))
            await asyncio.wait_for(arrived.wait(), 5.0)
            started = time.monotonic()
            await asyncio.to_thread(server.stop)
            assert time.monotonic() - started < 2.0
            with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
                await request


def test_stop_is_idempotent_and_closes_the_port() -> None:
    server = FakeProviderServer()
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.base_url
    with server:
        server.enqueue(Reply.json({}))
        with httpx.Client() as client:
            assert client.get(server.base_url).status_code == 200
        server.stop()
        server.stop()
    server.stop()
    with httpx.Client() as client, pytest.raises(httpx.ConnectError):
        client.get(server.base_url)
    with pytest.raises(RuntimeError, match="only be started once"):
        server.start()


def test_explicit_start_and_stop() -> None:
    server = FakeProviderServer().start()
    try:
        server.enqueue(Reply.raw(b"\x00\x01", status=203, headers={"X-Custom": "Value"}))
        response = httpx.get(server.base_url + "/raw")
        assert response.status_code == 203
        assert response.content == b"\x00\x01"
        assert response.headers["x-custom"] == "Value"
    finally:
        server.stop()


def test_a_malformed_request_gets_a_400(server: FakeProviderServer) -> None:
    with socket.create_connection(("127.0.0.1", int(server.base_url.rsplit(":", 1)[1]))) as sock:
        sock.sendall(b"nonsense\r\n\r\n")
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b"bad request line" in reply
    assert server.requests == []


def test_hostile_frames_and_replies(server: FakeProviderServer) -> None:
    from agentfsm.testing import Filler, Repeat
    from agentfsm.testing._hostile import gzip_bomb

    server.enqueue(
        Reply.sse([Repeat("id: 1\n\n", times=3), Filler(10, b"ab")]),
        Reply.trickled(Reply.raw(b"abc"), 0.05),
        Reply.gzipped(Reply.json({"ok": True})),
        Reply.redirect("http://elsewhere.test/x", 307),
        gzip_bomb(1024 * 1024),
    )
    with httpx.Client(base_url=server.base_url) as client:
        assert client.get("/").content == b"id: 1\n\n" * 3 + b"ababababab"
        started = time.monotonic()
        assert client.get("/").content == b"abc"
        assert time.monotonic() - started >= 0.1
        zipped = client.get("/")
        assert zipped.headers["content-encoding"] == "gzip"
        assert zipped.json() == {"ok": True}
        moved = client.get("/")
        assert (moved.status_code, moved.headers["location"]) == (307, "http://elsewhere.test/x")
        bomb = client.get("/")
        assert int(bomb.headers["content-length"]) < 10_000
        assert bomb.content == b"a" * 1024 * 1024
