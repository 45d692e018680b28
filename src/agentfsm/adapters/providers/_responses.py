"""``OpenAIResponses``: the OpenAI Responses API over httpx."""

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
from ._responses_wire import (
    TERMINAL_EVENTS,
    ResponseAccumulator,
    ResponsesQuirks,
    build_request,
    failure_body,
    parse_response,
)
from ._retry import RetryPolicy
from ._shapes import opt_dict, shape_guard
from ._transport import Timeouts, bad_response, iter_events

__all__ = ["OpenAIResponses"]


class OpenAIResponses(HttpAdapter):
    """A :class:`~agentfsm.engine._protocols.ChatFn` speaking the OpenAI Responses API
    (``POST /v1/responses``), which vLLM, Ollama, LiteLLM and OpenRouter serve too.

    Stateless: every request carries the whole history with ``store: false``. Tool calls
    are ``function_call`` items, their results ``function_call_output`` items. Reasoning
    comes back as ``reasoning`` items; those with ``encrypted_content`` (asked for with
    ``include: ["reasoning.encrypted_content"]``) are kept on the reply's
    :attr:`~agentfsm.engine._messages.AssistantMessage.reasoning_items` and sent back with
    the next request, as the API requires for a reasoning model to continue its turn.

    Streams by default: output text and reasoning (summary or text) deltas reach
    ``on_delta``. A ``response.failed`` or ``error`` event after a 200 is a
    :class:`ProviderError` with ``in_stream=True``, classified like an HTTP error body; a
    stream that ends before ``response.completed`` or ``response.incomplete`` is a
    ``connection`` error. ``status: incomplete`` is an answer whose finish reason says why
    (``length`` for ``max_output_tokens``, ``content_filter``, else ``other`` with the raw
    reason in ``finish_reason_raw``); ``queued`` or ``in_progress`` is a ``bad_response``
    error (``unfinished_response``): nothing was generated yet.

    Args:
        model: The model name sent with every request.
        base_url: The API root, e.g. ``https://api.openai.com/v1``; ``/responses`` is
            appended (a bare host gets ``/v1`` first: see
            :func:`~agentfsm.adapters.providers.endpoint_url`).
        api_key: Sent as a bearer token; never written to errors, events or logs, nor shown
            by a ``repr`` (see :class:`~agentfsm.adapters.providers.Secret`).
        http_client: An ``httpx.AsyncClient`` to use; by default the adapter owns one.
        stream: Stream responses.
        quirks: What the server accepts when it differs from OpenAI (see
            ``ResponsesQuirks``).
        timeouts: Connect, first-byte, idle and total limits.
        retry: The retry policy for retryable failures.
        headers: Extra request headers.
        name: The provider name used in errors (default: the base URL's host).
        limits: Size, count and nesting bounds of a reply (see ``Limits``).
    """

    default_name = "openai-responses"
    wire = "openai-responses"
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
        quirks: ResponsesQuirks | None = None,
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
        self.quirks = quirks if quirks is not None else ResponsesQuirks()

    def _request(self, body: dict[str, Any]) -> httpx.Request:
        headers = {"content-type": "application/json", **self._headers}
        headers["accept"] = "text/event-stream" if body.get("stream") else "application/json"
        url = endpoint_url(self.base_url, "openai-responses")
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
        body = build_request(
            self.model,
            messages,
            tools,
            temperature=temperature,
            max_tokens=max_tokens,
            stream=self.stream and (self.quirks.stream_with_tools or not tools),
            quirks=self.quirks,
        )

        async def attempt(deadline: Deadline) -> ChatResult:
            return await self._exchange(
                self._request(body),
                signal,
                deadline,
                lambda response: self._read_stream(response, signal, on_delta, deadline),
                lambda response: self._read_json(response, signal, deadline),
            )

        return await self._call(attempt, signal)

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
        if data.get("status") == "failed" or (data.get("error") and not data.get("output")):
            body = failure_body(data) if data.get("status") == "failed" else data
            raise classify_error_body(
                response.status_code,
                body,
                response.headers,
                secrets=self._ctx.secrets,
                provider=self.name,
            )
        with shape_guard(self._ctx, status=response.status_code):
            return parse_response(data, self.limits)

    async def _read_stream(
        self,
        response: httpx.Response,
        signal: SupportsAbort | None,
        on_delta: DeltaHandler | None,
        deadline: Deadline,
    ) -> ChatResult:
        acc = ResponseAccumulator(self.limits)
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
                data_text = event.data.strip()
                if not data_text or data_text == "[DONE]":
                    continue
                with shape_guard(self._ctx, in_stream=True, started=started[0]):
                    data = self._frame(data_text, started[0])
                    if not isinstance(data, Mapping):
                        continue
                    kind = str(data.get("type") or event.event or "")
                    if kind == "error" or event.event == "error":
                        raise self._stream_error(data, response.headers, started[0])
                    if kind == "response.failed":
                        failed = opt_dict(data.get("response"), "response")
                        raise self._stream_error(failure_body(failed), response.headers, started[0])
                    text, reasoning = acc.add(kind, data)
                if on_delta is not None:
                    if reasoning:
                        started[0] = True
                        on_delta(ChatDelta("thinking", reasoning))
                    if text:
                        started[0] = True
                        on_delta(ChatDelta("text", text))
                if kind in TERMINAL_EVENTS:
                    done[0] = True  # the rest of the body is drained; the connection kept
        finally:
            await events.aclose()
        if acc.empty:
            raise ProviderError(
                "server",
                "the stream ended without any answer (an empty 200 response)",
                status=response.status_code,
                in_stream=True,
                provider_code="empty_stream",
                provider=self.name,
            )
        if acc.final is None:
            raise ProviderError(
                "connection",
                "the stream ended before the response was complete",
                phase="read",
                in_stream=True,
                response_started=started[0],
                provider=self.name,
            )
        with shape_guard(self._ctx, in_stream=True, started=started[0]):
            return acc.result()
