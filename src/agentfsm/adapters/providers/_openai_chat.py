"""``OpenAIChat``: Chat Completions over httpx, for OpenAI and every compatible server."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from agentfsm.engine import ChatDelta, ChatResult, DeltaHandler, SupportsAbort

from ._errors import classify_error_body
from ._http_adapter import HttpAdapter
from ._limits import Deadline
from ._openai_wire import OpenAIQuirks, StreamAccumulator, build_request, parse_completion
from ._shapes import shape_guard

__all__ = ["OpenAIChat"]


class OpenAIChat(HttpAdapter[OpenAIQuirks]):
    """A :class:`~agentfsm.ChatFn` speaking Chat Completions.

    Works with OpenAI and compatible servers (vLLM, Ollama, llama.cpp, LM Studio, Groq,
    Mistral, DeepSeek, OpenRouter …). No provider SDK is used.

    Args:
        model: The model name sent with every request.
        base_url: The API root, e.g. ``https://api.openai.com/v1`` or
            ``http://127.0.0.1:8080/v1`` (the default is OpenAI's); ``/chat/completions`` is
            appended (a bare host gets ``/v1`` first: see
            :func:`~agentfsm.adapters.providers.endpoint_url`).
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
    default_base_url = "https://api.openai.com/v1"
    wire = "openai-chat"
    quirks_class = OpenAIQuirks
    build_request = staticmethod(build_request)
    provider_name = "openai"
    """``gen_ai.provider.name`` of its calls in traces: the wire protocol's vendor."""

    async def _read_json(
        self, response: httpx.Response, signal: SupportsAbort | None, deadline: Deadline
    ) -> ChatResult:
        data = await self._read_json_object(response, signal, deadline)
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
        events, started, terminal, done = self._events(response, signal, deadline)
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
                self._deliver(on_delta, started, text, reasoning)
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
            raise self._empty_stream(response)
        with shape_guard(self._ctx, in_stream=True, started=started[0]):
            return acc.result()
