"""``FakeProviderServer``: a real local HTTP/1.1 server for testing HTTP provider adapters."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import threading
import zlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from http import HTTPStatus
from typing import Any, TypeAlias

from attrs import evolve, frozen

from ._pairing import pairing_problem

__all__ = [
    "Drop",
    "FakeProviderServer",
    "Filler",
    "Frame",
    "Pause",
    "RecordedRequest",
    "Repeat",
    "Reply",
    "ReplyHandler",
]


@frozen
class Pause:
    """A stream frame that waits before the next frame is sent."""

    seconds: float


@frozen
class Drop:
    """A stream frame that closes the TCP connection mid-body, without the final chunk.

    Bytes already sent are delivered first (the close is a FIN, not a reset), so the client
    sees the earlier frames and then an incomplete chunked body.
    """


@frozen
class Repeat:
    """A frame sent again and again: ``times`` times, or until the client goes away
    (``None``), waiting ``interval`` seconds after each. Endless keep-alives are
    ``Repeat(": keep-alive\\n\\n", interval=0.05)``."""

    frame: str | bytes
    times: int | None = None
    interval: float = 0.0


@frozen
class Filler:
    """``size`` bytes of ``pattern`` (repeated), generated as they are sent, in pieces of
    ``piece`` bytes: a huge line or body costs the server no memory."""

    size: int
    pattern: bytes = b"x"
    piece: int = 64 * 1024


_HeadersArg: TypeAlias = Mapping[str, str] | None

Frame: TypeAlias = str | bytes | Pause | Drop | Repeat | Filler
"""One item of a streamed reply: raw bytes to send (``str`` is UTF-8 encoded), or a control."""


@frozen
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    """The request target as sent, query string included."""
    headers: dict[str, str]
    """Header names lower-cased; repeated headers joined with ``", "``."""
    body: bytes
    """The body, de-chunked if it was sent with ``Transfer-Encoding: chunked``."""

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


@frozen
class Reply:
    """What the server sends back for one request; build it with the classmethods.

    The server adds ``Content-Length`` (``Transfer-Encoding: chunked`` for streams) and
    ``Connection: close`` unless ``headers`` already names them; other headers are sent
    exactly as given, in order.

    Hostile behaviours, for testing how a client copes with a broken or malicious server:

    - ``trickle``: send the body (or every frame) one byte at a time, this many seconds
      apart (``Reply.trickled``): a JSON body at 1 byte/s never trips an idle timeout.
    - :class:`Repeat` frames: endless keep-alives, ``id:``-only events, empty chunks.
    - :class:`Filler` frames: a 400 MB line without a newline, generated as it is sent.
    - ``Reply.gzipped``: any reply compressed, with ``content-encoding: gzip``.
    - ``Reply.redirect``: a 3xx to another URL (run a second server there: it records the
      headers it received, so a test sees whether the API key followed).
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    """The whole body, for replies that are not streamed."""
    frames: tuple[Frame, ...] | None = None
    """When set, the body is streamed from these frames, one chunk each, instead of ``body``."""
    delay: float = 0.0
    """Seconds to wait after reading the request, before sending any byte."""
    respond: bool = True
    """``False``: after ``delay``, close the connection without sending a response."""
    trickle: float | None = None
    """Send the body or each frame one byte at a time, this many seconds apart."""

    @classmethod
    def json(cls, body: Any, status: int = 200, headers: _HeadersArg = None) -> Reply:
        """A JSON body (``content-type: application/json``)."""
        return cls(status, _headers(headers, "application/json"), json.dumps(body).encode())

    @classmethod
    def sse(cls, frames: Sequence[Frame], status: int = 200, headers: _HeadersArg = None) -> Reply:
        """A ``text/event-stream`` body sent frame by frame, each flushed as its own chunk.

        Frames are written exactly as given, so include the ``data: ...\\n\\n`` framing.
        Empty frames are skipped (an empty chunk would end the body). :class:`Pause` sleeps
        between frames; :class:`Drop` cuts the connection there, mid-body.
        """
        return cls(status, _headers(headers, "text/event-stream"), frames=tuple(frames))

    @classmethod
    def raw(cls, body: bytes | str = b"", status: int = 200, headers: _HeadersArg = None) -> Reply:
        """Exactly ``body`` (a ``str`` is UTF-8 encoded), with no content type unless given."""
        data = body.encode("utf-8") if isinstance(body, str) else body
        return cls(status, _headers(headers, None), data)

    @classmethod
    def stall(cls, seconds: float, then: Reply | None = None) -> Reply:
        """Wait ``seconds`` before the first response byte, then send ``then`` or just close."""
        if then is None:
            return cls(delay=seconds, respond=False)
        return evolve(then, delay=then.delay + seconds)

    @classmethod
    def trickled(cls, reply: Reply, seconds_per_byte: float = 1.0) -> Reply:
        """``reply`` sent one byte at a time, ``seconds_per_byte`` apart."""
        return evolve(reply, trickle=seconds_per_byte)

    @classmethod
    def redirect(cls, location: str, status: int = 307, headers: _HeadersArg = None) -> Reply:
        """A redirect to ``location`` (an absolute URL, e.g. another server's)."""
        return cls(status, (("location", location), *_headers(headers, None)))

    @classmethod
    def gzipped(cls, reply: Reply) -> Reply:
        """``reply`` with its body (or its text frames, flushed one by one) gzip-compressed
        and ``content-encoding: gzip`` (controls in ``frames`` pass through; fillers and
        repeats are not compressed)."""
        headers = (*reply.headers, ("content-encoding", "gzip"))
        if reply.frames is None:
            return evolve(reply, headers=headers, body=gzip.compress(reply.body))
        packer = zlib.compressobj(wbits=31)
        frames: list[Frame] = []
        for frame in reply.frames:
            if isinstance(frame, str | bytes):
                data = frame.encode("utf-8") if isinstance(frame, str) else frame
                frames.append(packer.compress(data) + packer.flush(zlib.Z_SYNC_FLUSH))
            else:
                frames.append(frame)
        frames.append(packer.flush())
        return evolve(reply, headers=headers, frames=tuple(frames))


ReplyHandler: TypeAlias = Callable[[RecordedRequest], Reply]
"""Computes a reply from a request; runs on the server's thread, so it must not block long."""


def _headers(given: _HeadersArg, content_type: str | None) -> tuple[tuple[str, str], ...]:
    pairs = tuple((str(name), str(value)) for name, value in (given or {}).items())
    if content_type is None or any(name.lower() == "content-type" for name, _ in pairs):
        return pairs
    return (("content-type", content_type), *pairs)


def _error_reply(message: str, status: int = 500) -> Reply:
    return Reply.json({"error": {"message": message, "type": "fake_server"}}, status)


_REASONS = {status.value: status.phrase for status in HTTPStatus}


class _BadRequest(Exception):
    """The bytes received are not an HTTP/1.1 request this server understands."""


class FakeProviderServer:
    """A real HTTP/1.1 server on ``127.0.0.1`` (an ephemeral port unless given) answering
    from a script.

    Each request gets the next reply given to :meth:`enqueue`; when none is left, the
    :attr:`handler` function is asked, and without one the answer is a 500 JSON error. Every
    request is recorded in :attr:`requests`. Each response is sent with ``Connection: close``
    and the connection is then closed; connections are served concurrently.

    The server runs its own event loop on a daemon thread, so it serves synchronous and async
    tests alike without ever blocking the test's loop. Use it as a context manager (sync or
    async), or call :meth:`start` and :meth:`stop`. A pytest fixture is::

        @pytest.fixture
        def server() -> Iterator[FakeProviderServer]:
            with FakeProviderServer() as server:
                yield server

    With ``strict=True`` the server checks each request's messages like the real providers
    do: a ``…/chat/completions``, ``…/messages`` or
    ``…/responses`` request with an unanswered tool call, a stray tool result or (Anthropic)
    roles that do not alternate gets HTTP 400 with an ``invalid_request_error`` naming the
    problem, and takes no scripted reply. The request is still recorded.

    It speaks each wire through what is enqueued: Chat Completions chunks, Messages events,
    or OpenAI Responses replies built from scripted turns by
    :func:`~agentfsm.testing.responses_reply` (``POST /v1/responses``, streamed from
    ``response.created`` to ``response.completed``, or one JSON response object).

    Args:
        host: The address to listen on.
        port: The port to listen on (``0``, the default: a free one the system picks).
        stop_timeout: Seconds :meth:`stop` waits for the server thread to finish.
        strict: Enforce the OpenAI and Anthropic tool-call pairing rules.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        stop_timeout: float = 5.0,
        strict: bool = False,
    ) -> None:
        self.strict = strict
        """Whether requests breaking the pairing rules are answered with HTTP 400."""
        self.handler: ReplyHandler | None = None
        """Answers requests once the scripted replies are used up."""
        self._host = host
        self._bind_port = port
        self._stop_timeout = stop_timeout
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._requests: list[RecordedRequest] = []
        self._started = False
        self._port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        # Owned by the server thread:
        self._stopping: asyncio.Event | None = None
        self._closing = False
        self._handlers: set[asyncio.Task[Any]] = set()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``; still available after :meth:`stop`."""
        if self._port is None:
            raise RuntimeError("FakeProviderServer is not started")
        return f"http://{self._host}:{self._port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the requests received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def pending(self) -> int:
        """How many enqueued replies are still unused."""
        with self._lock:
            return len(self._queue)

    def enqueue(self, *replies: Reply) -> None:
        """Add replies to the script; each request takes the next one."""
        with self._lock:
            self._queue.extend(replies)

    def start(self) -> FakeProviderServer:
        """Bind the port and start serving; returns once connections are accepted."""
        with self._lock:
            if self._started:
                raise RuntimeError("FakeProviderServer can only be started once")
            self._started = True
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if self._bind_port:  # a port given again right after a restart binds at once
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._host, self._bind_port))
            sock.listen(128)
        except BaseException:
            sock.close()
            raise
        self._port = int(sock.getsockname()[1])
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        thread = threading.Thread(target=self._run, args=(loop, sock, ready), daemon=True)
        thread.name = f"FakeProviderServer:{self._port}"
        with self._lock:
            self._loop, self._thread = loop, thread
        thread.start()
        ready.wait()
        if self._error is not None:
            self.stop()
            raise RuntimeError("FakeProviderServer failed to start") from self._error
        return self

    def stop(self) -> None:
        """Stop serving, cancel requests in flight and join the thread; idempotent."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        with suppress(RuntimeError):  # the loop is already closed if the thread ended
            loop.call_soon_threadsafe(self._signal_stop)
        thread.join(self._stop_timeout)
        if thread.is_alive():
            raise RuntimeError(f"FakeProviderServer did not stop within {self._stop_timeout}s")

    def __enter__(self) -> FakeProviderServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> FakeProviderServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc_info: object) -> None:
        await asyncio.to_thread(self.stop)

    # -- server thread ---------------------------------------------------------------------

    def _run(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, ready: threading.Event
    ) -> None:
        try:
            loop.run_until_complete(self._serve(sock, ready))
        except BaseException as exc:  # reported by start(); the thread must not die loudly
            self._error = exc
        finally:
            sock.close()
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
                ready.set()

    def _signal_stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()

    async def _serve(self, sock: socket.socket, ready: threading.Event) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._on_connect, sock=sock)
        ready.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            self._closing = True
            current = asyncio.current_task()
            for _ in range(200):  # handlers accepted just now see _closing and end at once
                others = asyncio.all_tasks() - {current}
                if not others:
                    break
                for task in self._handlers:
                    task.cancel()
                self._handlers.clear()
                await asyncio.wait(others, timeout=0.05)
            await server.wait_closed()

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        try:
            if self._closing or task is None:
                return
            self._handlers.add(task)
            writer.transport.set_write_buffer_limits(high=0)  # drain() waits for a full flush
            try:
                request = await _read_request(reader)
            except _BadRequest as exc:
                await _send(writer, _error_reply(f"FakeProviderServer: {exc}", 400))
                return
            if request is not None:
                await _send(writer, self._reply_for(request))
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client went away
        except asyncio.CancelledError:
            if not self._closing:
                raise
            # Cancelled by stop(): end normally, as Python 3.11's start_server logs a
            # cancelled connection task as an error.
        finally:
            if task is not None:
                self._handlers.discard(task)
            writer.close()
            with suppress(Exception):
                await writer.wait_closed()

    def _reply_for(self, request: RecordedRequest) -> Reply:
        problem = _strict_problem(request) if self.strict else None
        with self._lock:
            self._requests.append(request)
            if problem is not None:
                return _invalid_request(problem)
            reply = self._queue.popleft() if self._queue else None
        if reply is not None:
            return reply
        handler = self.handler
        if handler is None:
            return _error_reply("FakeProviderServer: no scripted reply left")
        try:
            return handler(request)
        except Exception as exc:
            return _error_reply(f"FakeProviderServer handler raised {type(exc).__name__}: {exc}")


def _strict_problem(request: RecordedRequest) -> str | None:
    if request.method != "POST":
        return None
    try:
        body = request.json()
    except ValueError:
        return None
    return pairing_problem(request.path, body)


def _invalid_request(problem: str) -> Reply:
    return Reply.json(
        {
            "type": "error",
            "error": {
                "message": f"FakeProviderServer (strict): {problem}",
                "type": "invalid_request_error",
            },
        },
        400,
    )


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    """Read one request; ``None`` if the client closed before sending anything."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise _BadRequest("incomplete request head") from exc
        return None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(f"bad request line {lines[0]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon:
            raise _BadRequest(f"bad header line {line!r}")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    else:
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError as exc:
            raise _BadRequest("bad content-length") from exc
        body = await reader.readexactly(length)
    return RecordedRequest(parts[0], parts[1], headers, body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise _BadRequest("bad chunk size") from exc
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return bytes(body)
        chunk = await reader.readexactly(size + 2)
        body += chunk[:-2]


async def _write(writer: asyncio.StreamWriter, data: bytes, trickle: float | None) -> None:
    """Write ``data`` (one byte at a time, ``trickle`` seconds apart, when set) and flush."""
    if trickle is None:
        writer.write(data)
        await writer.drain()
        return
    for offset in range(len(data)):
        writer.write(data[offset : offset + 1])
        await writer.drain()
        await asyncio.sleep(trickle)


async def _chunk(writer: asyncio.StreamWriter, data: bytes, trickle: float | None) -> None:
    if not data:
        return
    if trickle is None:
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await writer.drain()
        return
    for offset in range(len(data)):
        await _write(writer, b"1\r\n%s\r\n" % data[offset : offset + 1], None)
        await asyncio.sleep(trickle)


def _bytes(frame: str | bytes) -> bytes:
    return frame.encode("utf-8") if isinstance(frame, str) else frame


async def _send(writer: asyncio.StreamWriter, reply: Reply) -> None:
    if reply.delay > 0:
        await asyncio.sleep(reply.delay)
    if not reply.respond:
        return
    names = {name.lower() for name, _ in reply.headers}
    reason = _REASONS.get(reply.status, "Unknown")
    head = [f"HTTP/1.1 {reply.status} {reason}", *(f"{k}: {v}" for k, v in reply.headers)]
    if not names & {"content-length", "transfer-encoding"}:
        framing = "Transfer-Encoding: chunked" if reply.frames is not None else None
        head.append(framing or f"Content-Length: {len(reply.body)}")
    if "connection" not in names:
        head.append("Connection: close")
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("utf-8"))
    if reply.frames is None:
        await writer.drain()
        await _write(writer, reply.body, reply.trickle)
        return
    await writer.drain()
    for frame in reply.frames:
        if isinstance(frame, Pause):
            await asyncio.sleep(frame.seconds)
        elif isinstance(frame, Drop):
            writer.transport.abort()
            return
        elif isinstance(frame, Repeat):
            count = 0
            while frame.times is None or count < frame.times:
                await _chunk(writer, _bytes(frame.frame), reply.trickle)
                count += 1
                await asyncio.sleep(frame.interval)
        elif isinstance(frame, Filler):
            block = (frame.pattern * (frame.piece // max(1, len(frame.pattern)) + 1))[: frame.piece]
            left = frame.size
            while left > 0:
                await _chunk(writer, block[: min(left, len(block))], reply.trickle)
                left -= len(block)
        else:
            await _chunk(writer, _bytes(frame), reply.trickle)
    writer.write(b"0\r\n\r\n")
    await writer.drain()
