"""The HTTP side shared by the adapters: sending, timeouts by phase, SSE, abort.

Timeouts are enforced at the transport: ``connect``, ``first_byte`` (until the response
headers arrive) and ``idle`` (silence between two chunks of a stream) are separate errors,
so a long stream that keeps sending is never cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Awaitable, Mapping
from typing import Any, TypeVar, cast

import httpx
from attrs import frozen
from httpx_sse import EventSource, ServerSentEvent

from agentfsm.engine.protocols import SupportsAbort

from .errors import ProviderError, classify_error_body, redact

__all__ = ["Timeouts", "TransportContext", "iter_events", "read_error", "send"]

T = TypeVar("T")

MAX_ERROR_BODY = 64 * 1024


@frozen
class Timeouts:
    """Seconds allowed for each phase of a call."""

    connect: float = 10.0
    """Opening the TCP/TLS connection."""
    first_byte: float = 300.0
    """From sending the request to receiving the response headers."""
    idle: float = 120.0
    """Silence between two chunks of a streamed response."""
    write: float = 60.0
    """Sending the request body."""
    terminal_grace: float = 2.0
    """Once the final record arrived, silence this long ends the stream quietly (some
    servers send neither ``[DONE]`` nor close the connection)."""


@frozen
class TransportContext:
    """Who is calling, for errors: the provider's name and the secrets to scrub."""

    provider: str
    secrets: tuple[str, ...] = ()


async def _race(
    awaitable: Awaitable[T],
    signal: SupportsAbort | None,
    timeout: float | None,  # noqa: ASYNC109 - one bound per awaited step, by phase
) -> T:
    """Await with a timeout (``TimeoutError``) and an abort signal (``_Aborted``)."""
    task = asyncio.ensure_future(awaitable)
    waiters: set[asyncio.Future[Any]] = {task}
    wait = getattr(signal, "wait", None) if signal is not None else None
    aborter = asyncio.ensure_future(wait()) if callable(wait) else None
    if aborter is not None:
        waiters.add(aborter)
    try:
        done, _ = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        # Cancelled from outside: let the inner step unwind before anyone closes the
        # generator it is advancing.
        task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait((task,))
        raise
    finally:
        if aborter is not None:
            aborter.cancel()
    if task in done:
        return task.result()
    task.cancel()
    await asyncio.wait((task,))
    if aborter is not None and aborter in done:
        raise _Aborted
    raise TimeoutError


class _Aborted(Exception):
    pass


def _aborted(ctx: TransportContext, started: bool) -> ProviderError:
    return ProviderError(
        "aborted", "the call was aborted", provider=ctx.provider, response_started=started
    )


async def send(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    timeouts: Timeouts,
    signal: SupportsAbort | None,
    ctx: TransportContext,
) -> httpx.Response:
    """Send ``request`` and return the streaming response once its headers arrived."""
    if signal is not None and signal.aborted:
        raise _aborted(ctx, False)
    try:
        return await _race(client.send(request, stream=True), signal, timeouts.first_byte)
    except _Aborted:
        raise _aborted(ctx, False) from None
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


async def read_body(
    response: httpx.Response,
    *,
    timeouts: Timeouts,
    signal: SupportsAbort | None,
    ctx: TransportContext,
    limit: int | None = None,
) -> bytes:
    """The whole body (bounded by ``limit`` when given), with idle timeouts and abort."""
    chunks: list[bytes] = []
    size = 0
    iterator = cast(AsyncGenerator[bytes, None], response.aiter_raw())
    try:
        while True:
            try:
                chunk = await _race(iterator.__anext__(), signal, timeouts.idle)
            except StopAsyncIteration:
                break
            except _Aborted:
                raise _aborted(ctx, False) from None
            except TimeoutError:
                raise ProviderError(
                    "timeout",
                    f"the response stalled for {timeouts.idle:g} s",
                    phase="idle",
                    provider=ctx.provider,
                ) from None
            except httpx.TransportError as exc:
                raise _broken(ctx, exc) from None
            chunks.append(chunk)
            size += len(chunk)
            if limit is not None and size >= limit:
                break
    finally:
        await iterator.aclose()
    return b"".join(chunks)


async def read_error(
    response: httpx.Response,
    *,
    timeouts: Timeouts,
    signal: SupportsAbort | None,
    ctx: TransportContext,
) -> ProviderError:
    """Read a failed response's body and classify it."""
    try:
        raw = await read_body(
            response, timeouts=timeouts, signal=signal, ctx=ctx, limit=MAX_ERROR_BODY
        )
    finally:
        await response.aclose()
    text = raw.decode("utf-8", errors="replace")
    body: Any
    try:
        body = json.loads(text)
    except ValueError:
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
) -> AsyncGenerator[ServerSentEvent, None]:
    """Server-sent events of a response (httpx-sse decoding: only CR, LF and CRLF end lines).

    ``started[0]`` tells errors whether output already reached the caller. Once
    ``terminal[0]`` is set (the caller saw the final record), silence of
    ``timeouts.terminal_grace`` seconds ends the stream quietly.
    """
    iterator = EventSource(response).aiter_sse()
    try:
        while True:
            limit = timeouts.terminal_grace if terminal[0] else timeouts.idle
            try:
                event = await _race(iterator.__anext__(), signal, limit)
            except StopAsyncIteration:
                return
            except _Aborted:
                raise _aborted(ctx, started[0]) from None
            except TimeoutError:
                if terminal[0]:
                    return
                raise ProviderError(
                    "timeout",
                    f"the stream was silent for {timeouts.idle:g} s",
                    phase="idle",
                    in_stream=True,
                    response_started=started[0],
                    provider=ctx.provider,
                ) from None
            except httpx.TransportError as exc:
                raise _broken(
                    ctx, exc, "the stream broke: ", in_stream=True, response_started=started[0]
                ) from None
            yield event
    finally:
        await iterator.aclose()


def header_items(headers: Mapping[str, str]) -> dict[str, str]:
    """Plain lower-cased header dict."""
    return {k.lower(): v for k, v in headers.items()}
