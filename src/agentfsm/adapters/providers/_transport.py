"""The HTTP side shared by the adapters: sending, timeouts by phase, SSE, abort, bounds.

Timeouts are enforced at the transport: ``connect``, ``first_byte`` (until the response
headers arrive) and ``idle`` (silence between two chunks of a body) are separate errors, and
``total`` bounds the whole call, whatever trickles in: keep-alive frames and bodies sent a
byte at a time cannot stretch it. Bodies are read with their content decoding (gzip,
deflate …) and within the sizes of :class:`~agentfsm.adapters.providers.Limits`.

Redirects are never followed by the HTTP client: a 307/308 to the same origin is followed
here (a few hops at most), anything else is a ``bad_response`` error, so the API key is never
sent to another origin whatever client the caller passes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Mapping
from typing import Any, TypeVar, cast

import httpx
from attrs import field, frozen
from httpx_sse import ServerSentEvent

from agentfsm.engine import AbortError, SupportsAbort, interrupt

from ._decoding import decode_content
from ._errors import ProviderError, classify_error_body, redact
from ._keys import KeyRefused, Secret
from ._limits import BadShape, Deadline, Limits, TooLarge, loads_bounded
from ._sse import SSEDecoder

__all__ = [
    "Expired",
    "Timeouts",
    "TransportContext",
    "iter_events",
    "race",
    "read_error",
    "send",
    "step",
]

MAX_ERROR_BODY = 64 * 1024
MAX_REDIRECTS = 3
"""Same-origin 307/308 redirects followed for one request."""
DRAIN_SECONDS = 0.1
"""Once a stream's last record arrived, how long the rest of the body (a chunked
terminator, a blank line) may take to arrive so that the connection goes back to the pool;
past it, or past :data:`DRAIN_BYTES`, the connection is closed instead."""
DRAIN_BYTES = 64 * 1024

# Awaiting one step of a call (a send, a read) within its timeout and its abort signal.

T = TypeVar("T")


class Expired(Exception):
    """The call's total deadline ran out during the step."""


async def race(
    awaitable: Awaitable[T],
    signal: SupportsAbort | None,
    timeout: float | None,  # noqa: ASYNC109 - one bound per awaited step, by phase
) -> T:
    """Await with a timeout (``TimeoutError``) and an abort signal (``AbortError``).

    The engine's one abort mechanism (:func:`~agentfsm.engine._interrupt.interrupt`): with a
    signal that takes callbacks (``AbortSignal``) the step runs in the calling task and an
    abort cancels that task, no extra task per step; other signals are raced with a watcher
    task.
    """
    if signal is None:
        async with asyncio.timeout(timeout):
            return await awaitable
    return await interrupt(awaitable, signal, None, "the call was aborted", timeout=timeout)


async def step(
    awaitable: Awaitable[T],
    signal: SupportsAbort | None,
    timeout: float | None,  # noqa: ASYNC109 - the phase's bound, cut to the deadline
    deadline: Deadline | None,
) -> T:
    """:func:`race` within the call's deadline: ``Expired`` when that is what ran out."""
    bound, total = deadline.bound(timeout) if deadline is not None else (timeout, False)
    try:
        return await race(awaitable, signal, bound)
    except TimeoutError:
        if total:
            raise Expired from None
        raise


@frozen
class Timeouts:
    """Seconds allowed for each phase of a call."""

    connect: float = 10.0
    """Opening the TCP/TLS connection."""
    first_byte: float = 300.0
    """From sending the request to receiving the response headers."""
    idle: float = 120.0
    """Silence between two chunks of a response body."""
    write: float = 60.0
    """Sending the request body."""
    terminal_grace: float = 2.0
    """Once the final record arrived, silence this long ends the stream quietly (some
    servers send neither ``[DONE]`` nor close the connection)."""
    total: float | None = 600.0
    """The whole call, retries and their backoff included (``None``: no bound). Nothing a
    server sends extends it; when it passes the call fails with ``timeout``, phase
    ``total``, and is not retried."""


@frozen
class TransportContext:
    """Who is calling, for errors: the provider's name, the secrets to scrub, the bounds;
    and the :class:`~agentfsm.adapters.providers._keys.KeyAuth` that puts the key on each
    request as it is sent (``None``: the client's own auth, if any)."""

    provider: str
    secrets: tuple[str | Secret, ...] = ()
    limits: Limits = field(factory=Limits)
    auth: httpx.Auth | None = None


def _aborted(ctx: TransportContext, started: bool) -> ProviderError:
    return ProviderError(
        "aborted", "the call was aborted", provider=ctx.provider, response_started=started
    )


def expired(
    ctx: TransportContext,
    deadline: Deadline | None,
    *,
    in_stream: bool = False,
    response_started: bool = False,
) -> ProviderError:
    """The ``timeout`` error of a call whose total deadline passed (never retried)."""
    seconds = deadline.seconds if deadline is not None and deadline.seconds is not None else 0
    return ProviderError(
        "timeout",
        f"the call exceeded its total deadline of {seconds:g} s",
        phase="total",
        in_stream=in_stream,
        response_started=response_started,
        should_retry=False,
        provider=ctx.provider,
    )


def too_large(
    ctx: TransportContext,
    exc: TooLarge,
    *,
    status: int | None = None,
    in_stream: bool = False,
    started: bool = False,
) -> ProviderError:
    """The ``too_large`` error for an exceeded bound (``status``: the response's, for a body
    read whole)."""
    return ProviderError(
        "too_large",
        str(exc),
        status=status,
        limit=exc.limit,
        in_stream=in_stream,
        response_started=started,
        provider=ctx.provider,
    )


def bad_response(
    ctx: TransportContext,
    message: str,
    *,
    status: int | None = None,
    code: str | None = None,
    limit: str | None = None,
    in_stream: bool = False,
    started: bool = False,
) -> ProviderError:
    """The ``bad_response`` error: the reply breaks the wire protocol."""
    return ProviderError(
        "bad_response",
        redact(message, ctx.secrets),
        status=status,
        provider_code=code,
        in_stream=in_stream,
        response_started=started,
        limit=limit,
        provider=ctx.provider,
    )


def _scrub_headers(response: httpx.Response, ctx: TransportContext) -> None:
    """Redact a key that the server echoed in a response header (the response lives on in
    the frames of a failed call, where error reporters print it)."""
    if not ctx.secrets:
        return
    for name, value in response.headers.multi_items():
        clean = redact(value, ctx.secrets)
        if clean != value:
            response.headers[name] = clean


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    port = url.port or {"http": 80, "https": 443}.get(url.scheme)
    return (url.scheme, url.host, port)


async def send(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    timeouts: Timeouts,
    signal: SupportsAbort | None,
    ctx: TransportContext,
    deadline: Deadline | None = None,
) -> httpx.Response:
    """Send ``request`` and return the streaming response once its headers arrived (its
    body to be read decoded: :func:`~agentfsm.adapters.providers._decoding.decode_content`).

    Same-origin 307/308 redirects are followed (the method and body kept); any other
    redirect is a ``bad_response`` error, and the request never leaves its origin.
    """
    for _ in range(MAX_REDIRECTS + 1):
        response = await _send_once(client, request, timeouts, signal, ctx, deadline)
        _scrub_headers(response, ctx)
        if not response.is_redirect:
            return decode_content(response)
        await response.aclose()
        location = response.headers.get("location", "")
        try:
            target = request.url.join(location)
        except (httpx.InvalidURL, ValueError, TypeError):
            target = None
        if target is None or _origin(target) != _origin(request.url):
            where = "?"
            if target is not None:
                where = f"{target.scheme}://{target.netloc.decode('ascii', 'replace')}"
            raise bad_response(
                ctx,
                f"the server redirected to another origin ({where}); the API key is never sent "
                "across origins (set the base URL to that origin if you trust it)",
                status=response.status_code,
                code="cross_origin_redirect",
            )
        if response.status_code not in (307, 308):
            raise bad_response(
                ctx,
                f"the server answered {response.status_code} (a redirect that would drop "
                "the request body)",
                status=response.status_code,
                code="redirect",
            )
        request = client.build_request(
            request.method, target, headers=request.headers, content=request.content
        )
    raise bad_response(ctx, f"more than {MAX_REDIRECTS} redirects", code="redirect")


async def _send_once(
    client: httpx.AsyncClient,
    request: httpx.Request,
    timeouts: Timeouts,
    signal: SupportsAbort | None,
    ctx: TransportContext,
    deadline: Deadline | None,
) -> httpx.Response:
    if signal is not None and signal.aborted:
        raise _aborted(ctx, False)
    if deadline is not None and deadline.expired:
        raise expired(ctx, deadline)
    try:
        return await step(
            client.send(
                request,
                stream=True,
                follow_redirects=False,
                auth=ctx.auth if ctx.auth is not None else httpx.USE_CLIENT_DEFAULT,
            ),
            signal,
            timeouts.first_byte,
            deadline,
        )
    except AbortError:
        raise _aborted(ctx, False) from None
    except Expired:
        raise expired(ctx, deadline) from None
    except KeyRefused as exc:
        raise ProviderError("auth", str(exc), provider=ctx.provider) from None
    except TimeoutError:
        raise ProviderError(
            "timeout",
            f"no response within {timeouts.first_byte:g} s",
            phase="first_byte",
            provider=ctx.provider,
        ) from None
    except httpx.ConnectTimeout:
        raise ProviderError(
            "timeout",
            f"could not connect within {timeouts.connect:g} s",
            phase="connect",
            provider=ctx.provider,
        ) from None
    except httpx.WriteTimeout:
        raise ProviderError(
            "timeout", "sending the request timed out", phase="write", provider=ctx.provider
        ) from None
    except httpx.ReadTimeout:
        raise ProviderError(
            "timeout", "no response in time", phase="first_byte", provider=ctx.provider
        ) from None
    except httpx.ConnectError as exc:
        raise ProviderError(
            "connection",
            redact(f"could not connect: {exc}", ctx.secrets),
            phase="connect",
            provider=ctx.provider,
        ) from None
    except httpx.TransportError as exc:
        raise _broken(ctx, exc) from None


def _broken(
    ctx: TransportContext,
    exc: Exception,
    prefix: str = "",
    *,
    in_stream: bool = False,
    response_started: bool = False,
) -> ProviderError:
    """A connection that failed while reading, as a ``connection`` error (keys redacted)."""
    return ProviderError(
        "connection",
        redact(f"{prefix}{type(exc).__name__}: {exc}", ctx.secrets),
        phase="read",
        in_stream=in_stream,
        response_started=response_started,
        provider=ctx.provider,
    )


async def _chunks(
    response: httpx.Response,
    *,
    timeouts: Timeouts,
    signal: SupportsAbort | None,
    ctx: TransportContext,
    deadline: Deadline | None,
    terminal: list[bool] | None = None,
    started: list[bool] | None = None,
    done: list[bool] | None = None,
) -> AsyncGenerator[bytes, None]:
    """The decoded body, chunk by chunk, each read bounded by the idle timeout (or the
    terminal grace once ``terminal[0]`` is set) and the deadline; ends quietly when the
    grace or the deadline runs out after the final record. Once ``done[0]`` is set (the
    caller needs nothing more), the rest is drained within :data:`DRAIN_SECONDS` and
    :data:`DRAIN_BYTES`, and whatever goes wrong then ends the body quietly."""
    in_stream = started is not None
    iterator = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
    drained = 0
    drain_until: float | None = None
    try:
        while True:
            if done is not None and done[0]:
                now = time.monotonic()
                drain_until = now + DRAIN_SECONDS if drain_until is None else drain_until
                if drained > DRAIN_BYTES or now >= drain_until:
                    return  # all the drain may take, however the server paces its bytes
                try:
                    chunk = await step(iterator.__anext__(), signal, drain_until - now, deadline)
                except Exception:  # the end of the body, or any failure: stop quietly
                    return
                drained += len(chunk)
                if chunk:
                    yield chunk
                continue
            quiet = terminal is not None and terminal[0]
            limit = timeouts.terminal_grace if quiet else timeouts.idle
            begun = started[0] if started is not None else False
            try:
                chunk = await step(iterator.__anext__(), signal, limit, deadline)
            except StopAsyncIteration:
                return
            except AbortError:
                raise _aborted(ctx, begun) from None
            except (Expired, TimeoutError) as exc:
                if quiet:
                    return
                if isinstance(exc, Expired):
                    raise expired(
                        ctx, deadline, in_stream=in_stream, response_started=begun
                    ) from None
                what = "stream was silent" if in_stream else "response stalled"
                raise ProviderError(
                    "timeout",
                    f"the {what} for {timeouts.idle:g} s",
                    phase="idle",
                    in_stream=in_stream,
                    response_started=begun,
                    provider=ctx.provider,
                ) from None
            except httpx.DecodingError:
                raise bad_response(
                    ctx,
                    "the body does not decode with its content-encoding",
                    status=response.status_code,
                    code="bad_encoding",
                    in_stream=in_stream,
                    started=begun,
                ) from None
            except httpx.TransportError as exc:
                prefix = "the stream broke: " if in_stream else ""
                raise _broken(
                    ctx, exc, prefix, in_stream=in_stream, response_started=begun
                ) from None
            if chunk:
                yield chunk
    finally:
        await iterator.aclose()


async def read_body(
    response: httpx.Response,
    *,
    timeouts: Timeouts,
    signal: SupportsAbort | None,
    ctx: TransportContext,
    limit: int | None = None,
    deadline: Deadline | None = None,
    strict: bool = False,
) -> bytes:
    """The whole decoded body, at most ``limit`` bytes: past it, the rest is left unread,
    or with ``strict`` the call fails with ``too_large`` (limit ``max_body_bytes``)."""
    body = bytearray()
    chunks = _chunks(response, timeouts=timeouts, signal=signal, ctx=ctx, deadline=deadline)
    try:
        async for chunk in chunks:
            if limit is not None and len(body) + len(chunk) > limit:
                if strict:
                    raise too_large(
                        ctx,
                        TooLarge("max_body_bytes", f"the response body exceeds {limit} bytes"),
                        status=response.status_code,
                    )
                body += chunk[: limit - len(body)]
                break
            body += chunk
    finally:
        await chunks.aclose()
    return bytes(body)


async def read_error(
    response: httpx.Response,
    *,
    timeouts: Timeouts,
    signal: SupportsAbort | None,
    ctx: TransportContext,
    deadline: Deadline | None = None,
) -> ProviderError:
    """Read a failed response's body (bounded) and classify it."""
    try:
        raw = await read_body(
            response,
            timeouts=timeouts,
            signal=signal,
            ctx=ctx,
            limit=ctx.limits.max_error_body_bytes,
            deadline=deadline,
        )
    finally:
        await response.aclose()
    text = raw.decode("utf-8", errors="replace")
    body: Any
    try:
        body = loads_bounded(text, ctx.limits.max_json_depth)
    except (ValueError, BadShape):
        body = text.strip()[:2000]
    return classify_error_body(
        response.status_code, body, response.headers, secrets=ctx.secrets, provider=ctx.provider
    )


async def iter_events(
    response: httpx.Response,
    *,
    timeouts: Timeouts,
    signal: SupportsAbort | None,
    ctx: TransportContext,
    started: list[bool],
    terminal: list[bool],
    deadline: Deadline | None = None,
    done: list[bool] | None = None,
) -> AsyncGenerator[ServerSentEvent, None]:
    """Server-sent events of a response, decoded within ``ctx.limits`` (only CR, LF and
    CRLF end lines).

    ``started[0]`` tells errors whether output already reached the caller. Once
    ``terminal[0]`` is set (the caller saw the final record), silence of
    ``timeouts.terminal_grace`` seconds ends the stream quietly. Once ``done[0]`` is set
    (the caller wants no more events), nothing more is yielded: the rest of the body is
    drained briefly (see :func:`_chunks`) so that the connection can be reused.
    """
    limits = ctx.limits
    decoder = SSEDecoder(
        max_line_bytes=limits.max_line_bytes, max_event_bytes=limits.max_event_bytes
    )
    chunks = _chunks(
        response,
        timeouts=timeouts,
        signal=signal,
        ctx=ctx,
        deadline=deadline,
        terminal=terminal,
        started=started,
        done=done,
    )
    try:
        async for chunk in chunks:
            if done is not None and done[0]:
                continue
            try:
                events = decoder.feed(chunk)
            except TooLarge as exc:
                raise too_large(ctx, exc, in_stream=True, started=started[0]) from None
            for event in events:
                if done is not None and done[0]:
                    break
                yield event
    finally:
        await chunks.aclose()


def header_items(headers: Mapping[str, str]) -> dict[str, str]:
    """Plain lower-cased header dict."""
    return {k.lower(): v for k, v in headers.items()}


def frame_text(data: str, ctx: TransportContext) -> str:
    """A malformed frame's text for an error message: short, keys scrubbed."""
    return redact(data[:1000], ctx.secrets)[:200]
