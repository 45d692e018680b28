"""``OpenAIResponses``: the OpenAI Responses API over httpx."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from agentfsm.engine import ChatResult, DeltaHandler, SupportsAbort

from ._errors import classify_error_body
from ._http_adapter import HttpAdapter
from ._limits import Deadline
from ._responses_wire import (
    TERMINAL_EVENTS,
    ResponseAccumulator,
    ResponsesQuirks,
    build_request,
    failure_body,
    parse_response,
)
from ._shapes import opt_dict, shape_guard

__all__ = ["OpenAIResponses"]


class OpenAIResponses(HttpAdapter[ResponsesQuirks]):
    """A :class:`~agentfsm.ChatFn` speaking the OpenAI Responses API
    (``POST /v1/responses``), which vLLM, Ollama, LiteLLM and OpenRouter serve too.

    Stateless: every request carries the whole history with ``store: false``. Tool calls
    are ``function_call`` items, their results ``function_call_output`` items. Reasoning
    comes back as ``reasoning`` items; those with ``encrypted_content`` (asked for with
    ``include: ["reasoning.encrypted_content"]``) are kept on the reply's
    :attr:`~agentfsm.AssistantMessage.reasoning_items` and sent back with
    the next request, as the API requires for a reasoning model to continue its turn.

    Streams by default: output text and reasoning (summary or text) deltas reach
    ``on_delta``. A ``response.failed`` or ``error`` event after a 200 is a
    :class:`ProviderError` with ``in_stream=True``, classified like an HTTP error body; a
    stream that ends before ``response.completed`` or ``response.incomplete`` is a
    ``connection`` error. ``status: incomplete`` is an answer whose finish reason says why
    (``length`` for ``max_output_tokens``, ``content_filter``).

    Args:
        model: The model name sent with every request.
        base_url: The API root, e.g. ``https://api.openai.com/v1`` (the default);
            ``/responses`` is appended (a bare host gets ``/v1`` first: see
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
    default_base_url = "https://api.openai.com/v1"
    wire = "openai-responses"
    quirks_class = ResponsesQuirks
    build_request = staticmethod(build_request)
    provider_name = "openai"
    """``gen_ai.provider.name`` of its calls in traces: the wire protocol's vendor."""

    async def _read_json(
        self, response: httpx.Response, signal: SupportsAbort | None, deadline: Deadline
    ) -> ChatResult:
        data = await self._read_json_object(response, signal, deadline)
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
        events, started, _, done = self._events(response, signal, deadline)
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
                self._deliver(on_delta, started, text, reasoning)
                if kind in TERMINAL_EVENTS:
                    done[0] = True  # the rest of the body is drained; the connection kept
        finally:
            await events.aclose()
        if acc.empty:
            raise self._empty_stream(response)
        if acc.final is None:
            raise self._cut_stream("response", started)
        with shape_guard(self._ctx, in_stream=True, started=started[0]):
            return acc.result()
