"""What the HTTP provider adapters share: settings, their own client, closing it."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from .retry import RetryPolicy
from .transport import Timeouts, TransportContext

__all__ = ["HttpAdapter"]


class HttpAdapter:
    """Base of :class:`OpenAIChat` and :class:`AnthropicChat`: the model, the endpoint, the
    key (kept out of ``repr`` and scrubbed from errors), timeouts, retries, extra headers,
    and an ``httpx.AsyncClient`` created on first use unless one is given."""

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
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.stream = stream
        self.timeouts = timeouts if timeouts is not None else Timeouts()
        self.retry = retry if retry is not None else RetryPolicy()
        self._api_key = api_key
        self._headers = dict(headers or {})
        self._client = http_client
        self._owns_client = http_client is None
        self.name = name or httpx.URL(self.base_url).host or self.default_name
        self._ctx = TransportContext(self.name, (api_key,) if api_key else ())

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
