"""What the HTTP provider adapters share: settings, their own client, the call's deadline,
and the boundary every error crosses (secrets scrubbed, the HTTP request let go)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx

from agentfsm.engine.messages import ChatResult
from agentfsm.engine.protocols import SupportsAbort

from .errors import ProviderError
from .limits import BadShape, Deadline, Limits, loads_bounded
from .retry import RetryPolicy, call_with_retries
from .shapes import shape_guard
from .transport import Timeouts, TransportContext, read_body

__all__ = ["NOT_JSON", "HttpAdapter"]

NOT_JSON: Any = object()
"""What :meth:`HttpAdapter._read_json_body` returns for a body that is not JSON."""


def _forget(error: BaseException) -> None:
    """Drop what an error chain may hold (the ``httpx`` request and its auth header)."""
    error.__context__ = None
    error.__cause__ = None
    error.__suppress_context__ = True


class HttpAdapter:
    """Base of :class:`OpenAIChat` and :class:`AnthropicChat`: the model, the endpoint, the
    key (kept out of ``repr`` and scrubbed from errors), timeouts, limits, retries, extra
    headers, and an ``httpx.AsyncClient`` created on first use unless one is given.

    Whatever client is given, it never follows a redirect for the adapter (see
    :func:`~agentfsm.adapters.providers.transport.send`), so the key reaches only the base
    URL's origin.
    """

    default_name = "provider"

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.stream = stream
        self.timeouts = timeouts if timeouts is not None else Timeouts()
        self.retry = retry if retry is not None else RetryPolicy()
        self.limits = limits if limits is not None else Limits()
        self._api_key = api_key
        self._headers = dict(headers or {})
        self._client = http_client
        self._owns_client = http_client is None
        self.name = name or httpx.URL(self.base_url).host or self.default_name
        self._ctx = TransportContext(self.name, (api_key,) if api_key else (), self.limits)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(
                    connect=self.timeouts.connect,
                    read=None,
                    write=self.timeouts.write,
                    pool=self.timeouts.connect,
                )
            )
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client if this adapter created it."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

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
