"""``OpenAIChat``: Chat Completions over httpx, for OpenAI and every compatible server."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from agentfsm.engine._messages import ChatResult, Message, ToolSpec
from agentfsm.engine._protocols import ChatDelta, DeltaHandler, SupportsAbort

from ._endpoints import endpoint_url
from ._errors import ProviderError, classify_error_body
from ._http_adapter import NOT_JSON, HttpAdapter
from ._keys import Secret
from ._limits import Deadline, Limits
from ._openai_wire import OpenAIQuirks, StreamAccumulator, build_request, parse_completion
from ._retry import RetryPolicy
from ._shapes import shape_guard
from ._transport import Timeouts, bad_response, iter_events

__all__ = ["OpenAIChat"]


class OpenAIChat(HttpAdapter):
    """A :class:`~agentfsm.engine._protocols.ChatFn` speaking Chat Completions.

    Works with OpenAI and compatible servers (vLLM, Ollama, llama.cpp, LM Studio, Groq,
    Mistral, DeepSeek, OpenRouter …). No provider SDK is used.

    Args:
        model: The model name sent with every request.
        base_url: The API root, e.g. ``https://api.openai.com/v1`` or
            ``http://127.0.0.1:8080/v1``; ``/chat/completions`` is appended (a bare host
            gets ``/v1`` first: see :func:`~agentfsm.adapters.providers.endpoint_url`).
        api_key: Sent as a bearer token; never written to errors, events or logs, nor shown
            by a ``repr`` (see :class:`~agentfsm.adapters.providers.Secret`).
        http_client: An ``httpx.AsyncClient`` to use (e.g. with a test transport); by default
            the adapter owns one.
        stream: Stream responses (text deltas reach ``on_delta`` as they arrive).
        quirks: What the server accepts when it differs from OpenAI (see ``OpenAIQuirks``).
        timeouts: Connect, first-byte, idle and total limits.
        retry: The retry policy for retryable failures.
        headers: Extra request headers.
        name: The provider name used in errors (default: the base URL's host).
        limits: Size, count and nesting bounds of a reply (see ``Limits``).
    """

    default_name = "openai-compatible"
    provider_name = "openai"
    """``gen_ai.provider.name`` of its calls in traces: the wire protocol's vendor."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | Secret | None = None,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        quirks: OpenAIQuirks | None = None,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        limits: Limits | None = None,
    ) -> None:
        super().__init__(
            model,
            base_url=base_url,
            api_key=api_key,
            http_client=http_client,
            stream=stream,
            timeouts=timeouts,
            retry=retry,
            headers=headers,
            name=name,
            limits=limits,
        )
        self.quirks = quirks if quirks is not None else OpenAIQuirks()

    def _request(self, body: dict[str, Any], stream: bool) -> httpx.Request:
        headers = {"content-type": "application/json", **self._headers}
        headers["accept"] = "text/event-stream" if stream else "application/json"
        url = endpoint_url(self.base_url, "openai-chat")
        return self.client.build_request("POST", url, headers=headers, content=json.dumps(body))

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
        stream = self.stream and (self.quirks.stream_with_tools or not tools)
        body = build_request(
            self.model,
            messages,
            tools,
            temperature=temperature,
            max_tokens=max_tokens,
            stream=stream,
            quirks=self.quirks,
        )

        async def attempt(deadline: Deadline) -> ChatResult:
            return await self._attempt(body, stream, signal, on_delta, deadline)

        return await self._call(attempt, signal)

    async def _attempt(
        self,
        body: dict[str, Any],
        stream: bool,
        signal: SupportsAbort | None,
        on_delta: DeltaHandler | None,
        deadline: Deadline,
    ) -> ChatResult:
        return await self._exchange(
            self._request(body, stream),
            signal,
            deadline,
            lambda response: self._read_stream(response, signal, on_delta, deadline),
            lambda response: self._read_json(response, signal, deadline),
        )

    async def _read_json(
        self, response: httpx.Response, signal: SupportsAbort | None, deadline: Deadline
    ) -> ChatResult:
        data, text = await self._read_json_body(response, signal, deadline)
        if not isinstance(data, dict):
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
        if "error" in data and not data.get("choices"):
            raise classify_error_body(
                response.status_code,
                data,
                response.headers,
                secrets=self._ctx.secrets,
                provider=self.name,
            )
        with shape_guard(self._ctx, status=response.status_code):
            return parse_completion(data, self.limits, think_tags=self.quirks.think_tags)

    async def _read_stream(
        self,
        response: httpx.Response,
        signal: SupportsAbort | None,
        on_delta: DeltaHandler | None,
        deadline: Deadline,
    ) -> ChatResult:
        acc = StreamAccumulator(self.limits, think_tags=self.quirks.think_tags)
        started = [False]
        terminal = [False]
        done = [False]
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
        try:
            async for event in events:
                data = event.data.strip()
                if not data:
                    continue
                if data == "[DONE]":
                    done[0] = True  # the rest of the body is drained; the connection kept
                    continue
                with shape_guard(self._ctx, in_stream=True, started=started[0]):
                    chunk = self._frame(data, started[0])
                    if event.event == "error" or (
                        isinstance(chunk, Mapping) and chunk.get("error")
                    ):
                        raise self._stream_error(chunk, response.headers, started[0])
                    if not isinstance(chunk, Mapping):
                        continue
                    text, reasoning = acc.add(chunk)
                if on_delta is not None:
                    if reasoning:
                        started[0] = True
                        on_delta(ChatDelta("thinking", reasoning))
                    if text:
                        started[0] = True
                        on_delta(ChatDelta("text", text))
                if acc.finish_reason is not None:
                    terminal[0] = True
        finally:
            await events.aclose()
        with shape_guard(self._ctx, in_stream=True, started=started[0]):
            text, reasoning = acc.finish()  # what a possible <think> tag held back
        if on_delta is not None:
            if reasoning:
                on_delta(ChatDelta("thinking", reasoning))
            if text:
                on_delta(ChatDelta("text", text))
        if acc.empty:
            raise ProviderError(
                "server",
                "the stream ended without any answer (an empty 200 response)",
                status=response.status_code,
                in_stream=True,
                provider_code="empty_stream",
                provider=self.name,
            )
        with shape_guard(self._ctx, in_stream=True, started=started[0]):
            return acc.result()
