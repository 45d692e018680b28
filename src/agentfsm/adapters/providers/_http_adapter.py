"""What the HTTP provider adapters share: settings, their own client, the call from request
to reply within its deadline, and the boundary every error crosses (secrets scrubbed, the
HTTP request let go)."""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import httpx
from httpx_sse import ServerSentEvent

from agentfsm.engine import ChatDelta, ChatResult, DeltaHandler, Message, SupportsAbort, ToolSpec

from ._decoding import ACCEPT_ENCODING, is_event_stream, looks_like_events
from ._endpoints import WireName, endpoint_url, missing_endpoint
from ._errors import ProviderError, classify_error_body
from ._keys import SENSITIVE_HEADERS, KeyAuth, Secret, register
from ._limits import BadShape, Deadline, Limits, loads_bounded
from ._log_filter import install_secrets_filter
from ._retry import RetryPolicy, call_with_retries
from ._shapes import shape_guard
from ._transport import (
    Timeouts,
    TransportContext,
    bad_response,
    frame_text,
    iter_events,
    read_body,
    read_error,
    send,
)

__all__ = [
    "KEEPALIVE_EXPIRY",
    "MAX_CONNECTIONS",
    "MAX_KEEPALIVE",
    "NOT_JSON",
    "HttpAdapter",
    "default_http_client",
    "default_pool_size",
]

NOT_JSON: Any = object()
"""What :meth:`HttpAdapter._read_json_body` returns for a body that is not JSON."""


class _EventsInBody(Exception):
    """A body read as JSON that is a server-sent event stream: the body, to be read as one."""

    def __init__(self, response: httpx.Response, text: str) -> None:
        super().__init__("an event stream under another content type")
        headers = [(k, v) for k, v in response.headers.multi_items() if k != "content-encoding"]
        self.response = httpx.Response(
            response.status_code,
            headers=headers,
            content=text.encode("utf-8", "surrogatepass"),
            request=response.request,
        )


async def _json_or_events(
    response: httpx.Response,
    read_json: Callable[[httpx.Response], Awaitable[ChatResult]],
    read_stream: Callable[[httpx.Response], Awaitable[ChatResult]],
) -> ChatResult:
    try:
        return await read_json(response)
    except _EventsInBody as body:
        return await read_stream(body.response)


class _Quirks(Protocol):
    @property
    def stream_with_tools(self) -> bool: ...


Q = TypeVar("Q", bound=_Quirks)
"""The quirks class of an adapter's wire (``OpenAIQuirks`` ...)."""

MAX_CONNECTIONS = 1000
"""Connections an adapter's own client keeps open at most, in use or idle (fewer when the
process may open few files: see :func:`default_pool_size`)."""
MAX_KEEPALIVE = 20
"""Idle connections kept for the next calls (httpx's default). More is slower, not faster:
httpcore scans every connection for each idle one on each request, so a burst over a
thousand idle connections costs quadratic time; connections past these are closed after
their call."""
KEEPALIVE_EXPIRY = 15.0
"""Seconds an idle connection stays in the pool for the next call."""


def default_pool_size() -> int:
    """:data:`MAX_CONNECTIONS`, or a quarter of the process's open-file limit when that is
    lower (at least 16), so that a burst of calls queues for a connection instead of
    failing to open sockets."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return MAX_CONNECTIONS
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return MAX_CONNECTIONS
    return max(16, min(MAX_CONNECTIONS, soft // 4))


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Loading the CA bundle costs ~20 ms and ~1 MB per context: every default client shares
    # one (built as httpx builds it, honouring SSL_CERT_FILE and SSL_CERT_DIR).
    return httpx.create_ssl_context()


def default_http_client(timeouts: Timeouts | None = None) -> httpx.AsyncClient:
    """The client an adapter creates when given none, sized for many concurrent calls.

    Up to :func:`default_pool_size` connections (1,000 by default), all kept alive for
    :data:`KEEPALIVE_EXPIRY` seconds; a call finding them all busy waits for one without a
    pool timeout of its own: the wait counts toward the call's ``first_byte`` and ``total``
    timeouts. Pass the result as ``http_client=`` to several adapters to share one pool
    (each then leaves closing it to you).
    """
    timeouts = timeouts if timeouts is not None else Timeouts()
    size = default_pool_size()
    return httpx.AsyncClient(
        verify=_ssl_context(),
        limits=httpx.Limits(
            max_connections=size,
            max_keepalive_connections=min(size, MAX_KEEPALIVE),
            keepalive_expiry=KEEPALIVE_EXPIRY,
        ),
        timeout=httpx.Timeout(connect=timeouts.connect, read=None, write=timeouts.write, pool=None),
    )


def _forget(error: BaseException) -> None:
    """Drop what an error chain may hold (the ``httpx`` request and its auth header)."""
    error.__context__ = None
    error.__cause__ = None
    error.__suppress_context__ = True


def _key_headers(
    api_key: str | Secret | None, header: tuple[str, str], extra: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, tuple[str, Secret]]]:
    """The extra headers split into plain ones and keys (:data:`SENSITIVE_HEADERS`), with
    ``api_key`` under ``header`` (name, prefix) last, so that it wins."""
    plain: dict[str, str] = {}
    keys: dict[str, tuple[str, Secret]] = {}
    for name, value in extra.items():
        if name.lower() in SENSITIVE_HEADERS:
            keys[name.lower()] = ("", Secret(value))
        else:
            plain[name] = value
    if isinstance(api_key, str):
        api_key = Secret(api_key) if api_key else None
    if api_key:
        keys[header[0]] = (header[1], api_key)
    return plain, keys


class HttpAdapter(Generic[Q]):
    """Base of :class:`OpenAIChat`, :class:`AnthropicChat` and :class:`OpenAIResponses`: the
    model, the endpoint, the key, the wire's quirks, timeouts, limits, retries, extra
    headers, and an ``httpx.AsyncClient`` created on first use unless one is given; and the
    call, from the request body the wire builds to the reply its subclass reads.

    The key (and any extra header named in :data:`~agentfsm.adapters.providers._keys.
    SENSITIVE_HEADERS`) is kept as a :class:`~agentfsm.adapters.providers.Secret`, put on
    each request only while it is sent, scrubbed from errors, and redacted from the HTTP
    libraries' log records (:class:`~agentfsm.adapters.providers.SecretsFilter`): no
    ``repr`` of the adapter, its requests or the frames of a failed call shows it.

    Whatever client is given, it never follows a redirect for the adapter (see
    :func:`~agentfsm.adapters.providers._transport.send`), so the key reaches only the base
    URL's origin.
    """

    default_name = "provider"
    key_header: tuple[str, str] = ("authorization", "Bearer ")
    """The header carrying the key, and the text before the key in it."""
    default_base_url: ClassVar[str]
    """The ``base_url`` when none is given."""
    wire: ClassVar[WireName]
    """The wire protocol: which path :func:`~agentfsm.adapters.providers.endpoint_url` adds."""
    wire_headers: ClassVar[Mapping[str, str]] = {}
    """Headers every request of the wire carries (before the extra ``headers``)."""
    quirks_class: Callable[[], Q]
    """The wire's quirks class, whose defaults describe the vendor's own API."""
    build_request: Callable[..., dict[str, Any]]
    """The wire's request body builder (``model, messages, tools, *, temperature,
    max_tokens, stream, quirks``)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | Secret | None = None,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        quirks: Q | None = None,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.model = model
        self.base_url = (base_url if base_url is not None else self.default_base_url).rstrip("/")
        self.stream = stream
        self.quirks: Q = quirks if quirks is not None else self.quirks_class()
        self.timeouts = timeouts if timeouts is not None else Timeouts()
        self.retry = retry if retry is not None else RetryPolicy()
        self.limits = limits if limits is not None else Limits()
        self._headers, keys = _key_headers(api_key, self.key_header, headers or {})
        self._api_key = keys[self.key_header[0]][1] if self.key_header[0] in keys else None
        self._client = http_client
        self._owns_client = http_client is None
        self.name = name or httpx.URL(self.base_url).host or self.default_name
        secrets = tuple(secret for _, secret in keys.values())
        auth = KeyAuth((n, prefix, secret) for n, (prefix, secret) in keys.items())
        self._ctx = TransportContext(self.name, secrets, self.limits, auth if keys else None)
        for secret in secrets:
            register(secret)
        if secrets:
            install_secrets_filter()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def client(self) -> httpx.AsyncClient:
        """The HTTP client: the one given, or :func:`default_http_client` made on first use
        and shared by every call (and so every run) of this adapter."""
        if self._client is None:
            self._client = default_http_client(self.timeouts)
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client if this adapter created it."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __call__(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        signal: SupportsAbort | None = None,
        on_delta: DeltaHandler | None = None,
    ) -> ChatResult:
        """One chat call (a :class:`~agentfsm.engine.ChatFn`), retried as the policy says."""
        body = self._body(messages, tools, temperature, max_tokens)
        return await self._call(self._attempt(body, signal, on_delta), signal)

    def _body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        temperature: float | None,
        max_tokens: int | None,
    ) -> dict[str, Any]:
        """The request body; streamed when the adapter streams and the server streams calls
        with these tools."""
        return type(self).build_request(
            self.model,
            messages,
            tools,
            temperature=temperature,
            max_tokens=max_tokens,
            stream=self.stream and (self.quirks.stream_with_tools or not tools),
            quirks=self.quirks,
        )

    def _request(self, body: dict[str, Any]) -> httpx.Request:
        """The HTTP request carrying ``body`` (the extra ``headers`` win over the wire's)."""
        headers = {
            "content-type": "application/json",
            "accept-encoding": ACCEPT_ENCODING,
            **self.wire_headers,
            "accept": "text/event-stream" if body.get("stream") else "application/json",
            **self._headers,
        }
        url = endpoint_url(self.base_url, self.wire)
        return self.client.build_request("POST", url, headers=headers, content=json.dumps(body))

    def _attempt(
        self, body: dict[str, Any], signal: SupportsAbort | None, on_delta: DeltaHandler | None
    ) -> Callable[[Deadline], Awaitable[ChatResult]]:
        """One request of ``body`` as a retryable attempt, read by the subclass's
        ``_read_stream`` or ``_read_json``."""

        async def attempt(deadline: Deadline) -> ChatResult:
            return await self._exchange(
                self._request(body),
                signal,
                deadline,
                lambda response: self._read_stream(response, signal, on_delta, deadline),
                lambda response: self._read_json(response, signal, deadline),
            )

        return attempt

    async def _read_stream(
        self,
        response: httpx.Response,
        signal: SupportsAbort | None,
        on_delta: DeltaHandler | None,
        deadline: Deadline,
    ) -> ChatResult:
        raise NotImplementedError

    async def _read_json(
        self, response: httpx.Response, signal: SupportsAbort | None, deadline: Deadline
    ) -> ChatResult:
        raise NotImplementedError

    async def _call(
        self,
        attempt: Callable[[Deadline], Awaitable[ChatResult]],
        signal: SupportsAbort | None,
    ) -> ChatResult:
        """Run ``attempt`` with retries within the total deadline; every error leaves as a
        scrubbed :class:`ProviderError` without the chain that led to it."""
        deadline = Deadline(self.timeouts.total)
        secrets = self._ctx.secrets

        async def guarded() -> ChatResult:
            try:
                return await attempt(deadline)
            except ProviderError as error:
                error.scrub(secrets)
                _forget(error)
                raise

        try:
            return await call_with_retries(
                guarded, policy=self.retry, signal=signal, provider=self.name, deadline=deadline
            )
        except ProviderError as error:
            error.scrub(secrets)
            _forget(error)
            raise

    async def _exchange(
        self,
        request: httpx.Request,
        signal: SupportsAbort | None,
        deadline: Deadline,
        read_stream: Callable[[httpx.Response], Awaitable[ChatResult]],
        read_json: Callable[[httpx.Response], Awaitable[ChatResult]],
    ) -> ChatResult:
        """Send one request and read its reply: an HTTP error status becomes the
        :class:`ProviderError` of its kind, a ``text/event-stream`` body (the media type in
        any case) goes to ``read_stream`` and any other to ``read_json``, which hands a body
        that is an event stream whatever its label back to ``read_stream`` (as the SDKs read
        the stream they asked for); the response is closed either way."""
        response = await send(
            self.client,
            request,
            timeouts=self.timeouts,
            signal=signal,
            ctx=self._ctx,
            deadline=deadline,
        )
        if response.status_code >= 400:
            error = await read_error(
                response, timeouts=self.timeouts, signal=signal, ctx=self._ctx, deadline=deadline
            )
            if response.status_code == 404:
                error.message = f"{missing_endpoint(self.base_url, self.wire)} ({error.message})"
            raise error
        try:
            if is_event_stream(response.headers.get("content-type", "")):
                return await read_stream(response)
            return await _json_or_events(response, read_json, read_stream)
        except ProviderError as error:
            # The reader's frames hold the raw events and body (a server may echo the key
            # in any of them): the error leaves without them.
            raise error.with_traceback(None) from None
        finally:
            await response.aclose()

    async def _read_json_body(
        self, response: httpx.Response, signal: SupportsAbort | None, deadline: Deadline
    ) -> tuple[Any, str]:
        """A non-streamed body, decoded and bounded: the JSON value (:data:`NOT_JSON` when it
        is not JSON) and the text."""
        raw = await read_body(
            response,
            timeouts=self.timeouts,
            signal=signal,
            ctx=self._ctx,
            limit=self.limits.max_body_bytes,
            deadline=deadline,
            strict=True,
        )
        text = raw.decode("utf-8", errors="replace")
        if not text.strip():
            return NOT_JSON, text
        with shape_guard(self._ctx, status=response.status_code):
            try:
                return loads_bounded(text, self.limits.max_json_depth), text
            except BadShape:
                raise
            except ValueError:
                return NOT_JSON, text

    async def _read_json_object(
        self, response: httpx.Response, signal: SupportsAbort | None, deadline: Deadline
    ) -> dict[str, Any]:
        """A non-streamed body that must be a JSON object; anything else is a
        :class:`ProviderError` (``server`` when it is not JSON, ``bad_response`` when it is
        JSON of another type)."""
        data, text = await self._read_json_body(response, signal, deadline)
        if isinstance(data, dict):
            return data
        if data is NOT_JSON and looks_like_events(text):
            raise _EventsInBody(response, text)
        if data is not NOT_JSON:
            raise bad_response(
                self._ctx,
                f"the response body is a JSON {type(data).__name__}, not an object",
                status=response.status_code,
            )
        raise ProviderError(
            "server",
            "the response body is not a JSON object" if text.strip() else "empty response body",
            status=response.status_code,
            provider_code="empty_stream" if not text.strip() else "malformed_response",
            provider=self.name,
        )

    def _events(
        self, response: httpx.Response, signal: SupportsAbort | None, deadline: Deadline
    ) -> tuple[AsyncGenerator[ServerSentEvent, None], list[bool], list[bool], list[bool]]:
        """The reply's server-sent events and the flags a reader sets while it reads them:
        ``started`` (output reached the caller), ``terminal`` (the final record was seen:
        silence may end the stream) and ``done`` (no more events wanted)."""
        started, terminal, done = [False], [False], [False]
        events = iter_events(
            response,
            timeouts=self.timeouts,
            signal=signal,
            ctx=self._ctx,
            started=started,
            terminal=terminal,
            deadline=deadline,
            done=done,
        )
        return events, started, terminal, done

    @staticmethod
    def _deliver(
        on_delta: DeltaHandler | None, started: list[bool], text: str, reasoning: str
    ) -> None:
        """Hand a frame's reasoning, then its text, to ``on_delta``; output has started."""
        if on_delta is None:
            return
        if reasoning:
            started[0] = True
            on_delta(ChatDelta("thinking", reasoning))
        if text:
            started[0] = True
            on_delta(ChatDelta("text", text))

    def _empty_stream(self, response: httpx.Response) -> ProviderError:
        """A 200 stream that ended without any answer."""
        return ProviderError(
            "server",
            "the stream ended without any answer (an empty 200 response)",
            status=response.status_code,
            in_stream=True,
            provider_code="empty_stream",
            provider=self.name,
        )

    def _cut_stream(self, what: str, started: list[bool]) -> ProviderError:
        """A stream that ended before ``what`` (the response, the message) was complete."""
        return ProviderError(
            "connection",
            f"the stream ended before the {what} was complete",
            phase="read",
            in_stream=True,
            response_started=started[0],
            provider=self.name,
        )

    def _stream_error(
        self, data: Any, headers: httpx.Headers, response_started: bool
    ) -> ProviderError:
        """The error an in-stream error event carries (classified, scrubbed)."""
        error = classify_error_body(
            200, data, headers, in_stream=True, secrets=self._ctx.secrets, provider=self.name
        )
        error.response_started = response_started
        return error

    def _frame(self, data: str, response_started: bool) -> Any:
        """A stream frame's JSON; a frame that is not JSON is a ``server`` error (too deep
        is ``bad_response``, through :class:`BadShape`)."""
        try:
            return loads_bounded(data, self.limits.max_json_depth)
        except BadShape:
            raise
        except ValueError:
            raise ProviderError(
                "server",
                f"malformed stream frame: {frame_text(data, self._ctx)}",
                in_stream=True,
                response_started=response_started,
                provider_code="malformed_frame",
                provider=self.name,
            ) from None
