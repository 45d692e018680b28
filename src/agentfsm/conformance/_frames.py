"""Builders of wire frames (OpenAI chunks, Anthropic events) for scripted scenarios."""

from __future__ import annotations

import json
from typing import Any

from agentfsm.testing import FakeProviderServer

__all__ = ["DONE", "chunk", "completion", "data", "event", "openai_url", "tool_delta"]


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
