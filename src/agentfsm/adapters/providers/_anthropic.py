"""``AnthropicChat``: the Anthropic Messages API over httpx."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar

import httpx

from agentfsm.engine import (
    AssistantMessage,
    ChatResult,
    DeltaHandler,
    Message,
    SupportsAbort,
    ToolSpec,
)

from ._anthropic_wire import AnthropicQuirks, EventAccumulator, build_request, parse_message
from ._errors import ProviderError, classify_error_body
from ._http_adapter import HttpAdapter
from ._keys import Secret
from ._limits import Deadline, Limits
from ._retry import RetryPolicy
from ._shapes import shape_guard
from ._transport import Timeouts

__all__ = ["ANTHROPIC_VERSION", "PAUSE_CONTINUATIONS", "AnthropicChat"]

ANTHROPIC_VERSION = "2023-06-01"

PAUSE_CONTINUATIONS = 5
"""How many times :class:`AnthropicChat` continues a turn paused with ``pause_turn``."""


class AnthropicChat(HttpAdapter[AnthropicQuirks]):
    """A :class:`~agentfsm.ChatFn` speaking the Messages API.

    Streams by default: text and thinking deltas reach ``on_delta``; ``ping`` events are
    ignored; an ``error`` event after a 200 (e.g. ``overloaded_error``) is a
    :class:`ProviderError` with ``in_stream=True``, never an empty success.

    Args:
        model: The model name.
        base_url: The server root (``/v1/messages`` is appended) or the API root ending
            in ``/v1`` (``/messages`` is appended): see
            :func:`~agentfsm.adapters.providers.endpoint_url`.
        api_key: Sent as ``x-api-key``; never written to errors, events or logs, nor shown
            by a ``repr`` (see :class:`~agentfsm.adapters.providers.Secret`).
        http_client: An ``httpx.AsyncClient`` to use; by default the adapter owns one.
        stream: Stream responses.
        quirks: What the server needs when it differs from Anthropic (see
            ``AnthropicQuirks``).
        timeouts: Connect, first-byte, idle and total limits.
        retry: The retry policy.
        headers: Extra request headers.
        name: The provider name used in errors.
        limits: Size, count and nesting bounds of a reply (see ``Limits``).
        pause_continuations: How many times a reply that ends in ``pause_turn`` (a server
            tool paused a long turn) is sent back so the model can finish it; the replies
            come back as one merged result. After the last one the result's
            ``finish_reason`` is ``other`` with ``finish_reason_raw`` ``pause_turn``.
    """

    default_name = "anthropic"
    default_base_url = "https://api.anthropic.com"
    wire = "anthropic"
    wire_headers: ClassVar[Mapping[str, str]] = {"anthropic-version": ANTHROPIC_VERSION}
    quirks_class = AnthropicQuirks
    build_request = staticmethod(build_request)
    key_header = ("x-api-key", "")
    provider_name = "anthropic"
    """``gen_ai.provider.name`` of its calls in traces."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | Secret | None = None,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        quirks: AnthropicQuirks | None = None,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        limits: Limits | None = None,
        pause_continuations: int = PAUSE_CONTINUATIONS,
    ) -> None:
        super().__init__(
            model,
            base_url=base_url,
            api_key=api_key,
            http_client=http_client,
            stream=stream,
            quirks=quirks,
            timeouts=timeouts,
            retry=retry,
            headers=headers,
            name=name,
            limits=limits,
        )
        self.pause_continuations = max(0, pause_continuations)

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
        body = self._body(messages, tools, temperature, max_tokens)
        results: list[ChatResult] = []
        paused: list[dict[str, Any]] = []
        while True:
            content: list[list[dict[str, Any]]] = [[]]
            sent = _continued(body, paused) if paused else body
            results.append(
                await self._call(self._paused_attempt(sent, signal, on_delta, content), signal)
            )
            last = results[-1]
            if last.finish_reason_raw != "pause_turn" or last.message.tool_calls:
                break  # finished, or calls to answer first (never sent back unanswered)
            if len(results) > self.pause_continuations:
                break
            if signal is not None and signal.aborted:
                raise ProviderError(
                    "aborted", "aborted before continuing a paused turn", provider=self.name
                )
            paused.extend(content[0])
        return results[0] if len(results) == 1 else _merged(results)

    def _paused_attempt(
        self,
        body: dict[str, Any],
        signal: SupportsAbort | None,
        on_delta: DeltaHandler | None,
        content: list[list[dict[str, Any]]],
    ) -> Callable[[Deadline], Awaitable[ChatResult]]:
        """One request as a retryable attempt; the content blocks of a reply paused with
        ``pause_turn`` go to ``content``."""

        async def attempt(deadline: Deadline) -> ChatResult:
            return await self._exchange(
                self._request(body),
                signal,
                deadline,
                lambda response: self._read_stream(response, signal, on_delta, deadline, content),
                lambda response: self._read_json(response, signal, deadline, content),
            )

        return attempt

    async def _read_json(
        self,
        response: httpx.Response,
        signal: SupportsAbort | None,
        deadline: Deadline,
        content: list[list[dict[str, Any]]] | None = None,
    ) -> ChatResult:
        data = await self._read_json_object(response, signal, deadline)
        if data.get("type") == "error":
            raise classify_error_body(
                response.status_code,
                data,
                response.headers,
                secrets=self._ctx.secrets,
                provider=self.name,
            )
        with shape_guard(self._ctx, status=response.status_code):
            result = parse_message(data, self.limits)
        if content is not None and result.finish_reason_raw == "pause_turn":
            content[0] = [b for b in data.get("content") or [] if isinstance(b, dict)]
        return result

    async def _read_stream(
        self,
        response: httpx.Response,
        signal: SupportsAbort | None,
        on_delta: DeltaHandler | None,
        deadline: Deadline,
        content: list[list[dict[str, Any]]] | None = None,
    ) -> ChatResult:
        acc = EventAccumulator(self.limits)
        events, started, terminal, done = self._events(response, signal, deadline)
        try:
            async for event in events:
                if not event.data.strip():
                    continue
                with shape_guard(self._ctx, in_stream=True, started=started[0]):
                    data = self._frame(event.data, started[0])
                    if not isinstance(data, Mapping):
                        continue
                    kind = (
                        event.event
                        if event.event and event.event != "message"
                        else str(data.get("type", ""))
                    )
                    if kind == "ping":
                        continue
                    if kind == "error" or data.get("type") == "error":
                        raise self._stream_error(data, response.headers, started[0])
                    text, thinking = acc.add(kind, data)
                self._deliver(on_delta, started, text, thinking)
                if acc.stopped:
                    done[0] = True  # the rest of the body is drained; the connection kept
                    continue
                if acc.stop_reason is not None:
                    terminal[0] = True
        finally:
            await events.aclose()
        if acc.empty:
            raise self._empty_stream(response)
        if not acc.stopped and acc.stop_reason is None:
            raise self._cut_stream("message", started)
        with shape_guard(self._ctx, in_stream=True, started=started[0]):
            result = acc.result()
            if content is not None and result.finish_reason_raw == "pause_turn":
                content[0] = acc.content()
        return result


def _continued(body: dict[str, Any], paused: list[dict[str, Any]]) -> dict[str, Any]:
    """``body`` with the paused reply's content as the last assistant turn, as the Messages
    API asks, so the model carries on where it paused."""
    turns = list(body["messages"])
    if turns and turns[-1]["role"] == "assistant":  # a prefilled assistant turn: extend it
        given = turns[-1]["content"]
        blocks = [{"type": "text", "text": given}] if isinstance(given, str) else list(given)
        turns[-1] = {"role": "assistant", "content": blocks + paused}
    else:
        turns.append({"role": "assistant", "content": list(paused)})
    return {**body, "messages": turns}


def _merged(results: list[ChatResult]) -> ChatResult:
    """One result for a turn answered in several replies (``pause_turn`` continuations):
    their text, reasoning (and reasoning items) and calls in order, their usage summed, the
    last one's finish."""
    reasoning = "".join(r.message.reasoning or "" for r in results)
    message = AssistantMessage(
        "".join(r.message.content for r in results),
        tool_calls=[call for r in results for call in r.message.tool_calls],
        reasoning=reasoning or None,
        reasoning_items=[item for r in results for item in r.message.reasoning_items],
    )
    usages = [r.usage for r in results if r.usage is not None]
    last = results[-1]
    return ChatResult(
        message,
        sum(usages[1:], usages[0]) if usages else None,
        last.finish_reason,
        last.model,
        last.response_id,
        last.finish_reason_raw,
    )
