"""Builders of wire frames (OpenAI chunks, Anthropic events, OpenAI Responses events) for
scripted scenarios."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentfsm.testing import FakeProviderServer

__all__ = [
    "DONE",
    "chunk",
    "completion",
    "data",
    "event",
    "openai_url",
    "response_event",
    "responses_stream",
    "tool_delta",
]


def data(payload: Any) -> str:
    """One SSE ``data:`` frame."""
    return f"data: {json.dumps(payload)}\n\n"


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish: str | None = None,
    usage: Any = None,
    choices: bool = True,
    **extra: Any,
) -> str:
    """An OpenAI ``chat.completion.chunk`` frame."""
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "fake-model",
    }
    body["choices"] = (
        [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else []
    )
    if usage is not None:
        body["usage"] = usage
    body.update(extra)
    return data(body)


def tool_delta(
    index: int | None = None, id: str | None = None, name: str | None = None, arguments: Any = None
) -> dict[str, Any]:
    call: dict[str, Any] = {}
    if index is not None:
        call["index"] = index
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    if function:
        call["function"] = function
    return {"tool_calls": [call]}


DONE = "data: [DONE]\n\n"


def completion(
    message: dict[str, Any], *, finish: str = "stop", usage: Any = None
) -> dict[str, Any]:
    """A non-streamed Chat Completions body."""
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def event(kind: str, payload: dict[str, Any]) -> str:
    """One Anthropic SSE event."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n"


def openai_url(server: FakeProviderServer) -> str:
    return f"{server.base_url}/v1"


def response_event(kind: str, payload: dict[str, Any]) -> str:
    """One OpenAI Responses SSE event (``event:`` line and a ``data:`` with its ``type``)."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n"


RESPONSES_USAGE = {
    "input_tokens": 9,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 5,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 14,
}


def responses_stream(
    text: Sequence[Any], thinking: Sequence[Any] = (), *, incomplete: str | None = None
) -> list[Any]:
    """A Responses stream: a reasoning item whose summary comes in the ``thinking`` pieces,
    then a message whose text comes in the ``text`` pieces (other frames, such as pauses and
    drops, are sent in place), then ``response.completed``, or ``response.incomplete`` with
    the reason ``incomplete``."""
    head = {"id": "resp_1", "model": "fake-model", "status": "in_progress"}
    out: list[Any] = [response_event("response.created", {"response": head})]
    items: list[tuple[dict[str, Any], str, Sequence[Any]]] = []
    if thinking:
        reasoning = {"type": "reasoning", "id": "rs_0", "summary": []}
        items.append((reasoning, "response.reasoning_summary_text.delta", thinking))
    message = {"type": "message", "id": "msg_0", "role": "assistant", "content": []}
    items.append((message, "response.output_text.delta", text))
    for index, (item, delta, parts) in enumerate(items):
        out.append(
            response_event("response.output_item.added", {"output_index": index, "item": item})
        )
        position = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            position["content_index"] = 0
            empty = {"type": "output_text", "text": "", "annotations": []}
            out.append(response_event("response.content_part.added", {**position, "part": empty}))
        else:
            position["summary_index"] = 0
            empty = {"type": "summary_text", "text": ""}
            added = {**position, "part": empty}
            out.append(response_event("response.reasoning_summary_part.added", added))
        for part in parts:
            if not isinstance(part, str):
                out.append(part)
                continue
            out.append(response_event(delta, {**position, "delta": part}))
    final: dict[str, Any] = {**head, "status": "completed", "output": [], "usage": RESPONSES_USAGE}
    if incomplete is not None:
        final.update(status="incomplete", incomplete_details={"reason": incomplete})
    terminal = "response.incomplete" if incomplete is not None else "response.completed"
    return [*out, response_event(terminal, {"response": final})]
