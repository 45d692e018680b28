"""Scripted turns as OpenAI Responses replies, for ``FakeProviderServer``."""

from __future__ import annotations

import json
import time
from typing import Any

from agentfsm.engine import AssistantMessage, ChatResult, Usage

from ._fake_server import Reply

__all__ = ["responses_body", "responses_events", "responses_reply"]

_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def _result(turn: ChatResult | AssistantMessage | str) -> ChatResult:
    if isinstance(turn, ChatResult):
        return turn
    message = AssistantMessage(turn) if isinstance(turn, str) else turn
    return ChatResult(message, None, "tool_calls" if message.tool_calls else "stop")


def _usage(usage: Usage | None) -> dict[str, Any]:
    usage = usage if usage is not None else Usage(9, 9)
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }


def _items(message: AssistantMessage) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kept = list(message.reasoning_items)
    if message.reasoning and not kept:
        kept = [{"type": "reasoning"}]
    for number, item in enumerate(kept):
        reasoning: dict[str, Any] = {"type": "reasoning", "id": f"rs_{number}", "summary": []}
        if number == 0 and message.reasoning:
            reasoning["summary"] = [{"type": "summary_text", "text": message.reasoning}]
        if isinstance(item.get("encrypted_content"), str):
            reasoning["encrypted_content"] = item["encrypted_content"]
        items.append(reasoning)
    if message.content:
        text = {"type": "output_text", "text": message.content, "annotations": []}
        items.append(
            {
                "type": "message",
                "id": "msg_0",
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        )
    for number, call in enumerate(message.tool_calls):
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{number}",
                "call_id": call.id,
                "name": call.name,
                "arguments": call.raw_arguments
                if call.raw_arguments is not None
                else json.dumps(call.arguments, ensure_ascii=False),
                "status": "completed",
            }
        )
    return items


def responses_body(turn: ChatResult | AssistantMessage | str) -> dict[str, Any]:
    """A scripted turn as a Responses API response object: reasoning (summary, and
    ``encrypted_content`` from ``reasoning_items``), the text, the function calls, usage,
    and ``status: incomplete`` for a ``length`` or ``content_filter`` finish."""
    result = _result(turn)
    body: dict[str, Any] = {
        "id": result.response_id or "resp_1",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": result.model or "fake-model",
        "output": _items(result.message),
        "usage": _usage(result.usage),
    }
    incomplete = _INCOMPLETE.get(result.finish_reason or "")
    if incomplete is not None:
        body["status"] = "incomplete"
        body["incomplete_details"] = {"reason": incomplete}
    return body


def _frame(kind: str, payload: dict[str, Any], number: int) -> str:
    data = {"type": kind, "sequence_number": number, **payload}
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n"


def responses_events(turn: ChatResult | AssistantMessage | str) -> list[str]:
    """A scripted turn as the Responses stream OpenAI sends: ``response.created``, each
    output item added, its parts added, its deltas (text and reasoning summary a few
    characters at a time, arguments in two pieces), parts and item done, then
    ``response.completed`` (or ``response.incomplete``) with the whole response."""
    body = responses_body(turn)
    events: list[tuple[str, dict[str, Any]]] = []
    opening = {**body, "status": "in_progress", "output": [], "usage": None}
    events.append(("response.created", {"response": opening}))
    for index, item in enumerate(body["output"]):
        base = {"output_index": index, "item_id": item["id"]}
        start = {**item}
        kind = item["type"]
        if kind == "message":
            start["content"] = []
        elif kind == "function_call":
            start["arguments"] = ""
        elif kind == "reasoning":
            start["summary"] = []
        events.append(("response.output_item.added", {"output_index": index, "item": start}))
        if kind == "message":
            text = item["content"][0]["text"]
            part = {**base, "content_index": 0}
            empty = {"type": "output_text", "text": "", "annotations": []}
            events.append(("response.content_part.added", {**part, "part": empty}))
            for piece in _pieces(text):
                events.append(("response.output_text.delta", {**part, "delta": piece}))
            events.append(("response.output_text.done", {**part, "text": text}))
            events.append(("response.content_part.done", {**part, "part": item["content"][0]}))
        elif kind == "reasoning":
            for summary_index, summary in enumerate(item["summary"]):
                part = {**base, "summary_index": summary_index}
                empty = {"type": "summary_text", "text": ""}
                events.append(("response.reasoning_summary_part.added", {**part, "part": empty}))
                for piece in _pieces(summary["text"]):
                    events.append(
                        ("response.reasoning_summary_text.delta", {**part, "delta": piece})
                    )
                events.append(("response.reasoning_summary_part.done", {**part, "part": summary}))
        elif kind == "function_call":
            arguments = item["arguments"]
            half = len(arguments) // 2
            for piece in (arguments[:half], arguments[half:]):
                events.append(("response.function_call_arguments.delta", {**base, "delta": piece}))
            events.append(
                ("response.function_call_arguments.done", {**base, "arguments": arguments})
            )
        events.append(("response.output_item.done", {"output_index": index, "item": item}))
    last = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    events.append((last, {"response": body}))
    return [_frame(kind, payload, number) for number, (kind, payload) in enumerate(events)]


def _pieces(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def responses_reply(turn: ChatResult | AssistantMessage | str, *, stream: bool = True) -> Reply:
    """A scripted turn (a result, a message or plain text, as ``ScriptedChat`` takes them)
    as the :class:`Reply` an OpenAI Responses server sends to ``POST /v1/responses``:
    streamed (see :func:`responses_events`) or one JSON response object
    (:func:`responses_body`)::

        server.enqueue(
            responses_reply(tool_reply(("read_file", {"path": "a.txt"}))),
            responses_reply("Done.", stream=False),
        )
    """
    if stream:
        return Reply.sse(responses_events(turn))
    return Reply.json(responses_body(turn))
