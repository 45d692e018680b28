"""Prompts, replies and tool calls as the GenAI conventions' JSON content attributes.

Used only when content capture is on (see :class:`~.instrumentation.Instrumentation`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from agentfsm.engine import (
    AssistantMessage,
    ChatResult,
    Message,
    SystemMessage,
    ToolMessage,
    ToolSpec,
    UserMessage,
)

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "capture_from_env",
    "input_messages",
    "output_messages",
    "system_instructions",
    "tool_definitions",
    "to_json",
]

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The conventions' switch for recording message content (off unless set)."""

_ON = frozenset({"true", "1", "yes", "on", "span_only", "span_and_event"})


def capture_from_env() -> bool:
    """Whether :data:`CAPTURE_CONTENT_ENV` asks for content (``true``, ``SPAN_ONLY`` …)."""
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in _ON


def to_json(value: object) -> str:
    """Compact JSON, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _assistant_parts(message: AssistantMessage) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if message.reasoning:
        parts.append({"type": "reasoning", "content": message.reasoning})
    if message.content:
        parts.append({"type": "text", "content": message.content})
    parts.extend(
        {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
        for call in message.tool_calls
    )
    return parts


def _message(message: Message) -> dict[str, Any] | None:
    if isinstance(message, SystemMessage):
        return None
    if isinstance(message, UserMessage):
        parts: list[dict[str, Any]] = [{"type": "text", "content": message.content}]
        parts.extend({"type": "blob", "mime_type": i.media_type} for i in message.images)
        return {"role": "user", "parts": parts}
    if isinstance(message, AssistantMessage):
        return {"role": "assistant", "parts": _assistant_parts(message)}
    assert isinstance(message, ToolMessage)
    part = {"type": "tool_call_response", "id": message.tool_call_id}
    return {"role": "tool", "parts": [{**part, "response": message.content}]}


def input_messages(messages: Sequence[Message]) -> str:
    """``gen_ai.input_messages``: the request's messages (system ones excluded)."""
    return to_json([m for m in map(_message, messages) if m is not None])


def system_instructions(messages: Sequence[Message]) -> str | None:
    """``gen_ai.system_instructions``: the request's system messages, if any."""
    parts = [
        {"type": "text", "content": m.content} for m in messages if isinstance(m, SystemMessage)
    ]
    return to_json(parts) if parts else None


def output_messages(result: ChatResult) -> str:
    """``gen_ai.output_messages``: the reply, with its finish reason."""
    out = {"role": "assistant", "parts": _assistant_parts(result.message)}
    out["finish_reason"] = result.finish_reason or (
        "tool_call" if result.message.tool_calls else "stop"
    )
    return to_json([out])


def tool_definitions(specs: Sequence[ToolSpec]) -> str:
    """``gen_ai.tool.definitions``: the tools offered, by name and description."""
    return to_json(
        [{"type": "function", "name": s.name, "description": s.description} for s in specs]
    )
