"""Anthropic Messages wire format: requests out, responses and stream events in."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from attrs import define, field

from agentfsm.engine.messages import (
    AssistantMessage,
    ChatResult,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)

from .openai_wire import decode_arguments
from .usage import anthropic_usage, merge_usage_fields

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "EventAccumulator",
    "build_request",
    "normalize_stop_reason",
    "parse_message",
]

DEFAULT_MAX_TOKENS = 8192
"""The Messages API requires ``max_tokens``; this is sent when the caller gives none."""

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}


def normalize_stop_reason(reason: str | None, has_tool_calls: bool) -> str | None:
    """Anthropic stop reasons in the common vocabulary (``stop``, ``tool_calls``, …)."""
    if has_tool_calls:
        return "tool_calls"
    if reason is None:
        return None
    return _STOP_REASONS.get(reason, reason)


def _merge(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Append a turn, merging consecutive turns of the same role (the API wants them
    alternating, and every result of a parallel call in one user turn)."""
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


def build_request(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    *,
    temperature: float | None,
    max_tokens: int | None,
    stream: bool,
) -> dict[str, Any]:
    """The JSON body of a ``/v1/messages`` request."""
    system = "\n\n".join(m.content for m in messages if isinstance(m, SystemMessage))
    turns: list[dict[str, Any]] = []
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, UserMessage):
            user_blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
            user_blocks.extend(
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": image.media_type,
                        "data": image.data,
                    },
                }
                for image in message.images
            )
            _merge(turns, "user", user_blocks)
        elif isinstance(message, AssistantMessage):
            blocks: list[dict[str, Any]] = []
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            for call in message.tool_calls:
                blocks.append(
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
                )
            open_calls = {c.id for c in message.tool_calls}
            if blocks:
                _merge(turns, "assistant", blocks)
        elif isinstance(message, ToolMessage):
            if message.tool_call_id in open_calls:
                block: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": message.content,
                }
                if message.is_error:
                    block["is_error"] = True
            else:  # its call was summarized away: keep the text, drop the pairing
                block = {
                    "type": "text",
                    "text": f"[result of tool call {message.tool_call_id}]\n{message.content}",
                }
            _merge(turns, "user", [block])
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens if max_tokens is not None else DEFAULT_MAX_TOKENS,
        "messages": turns,
    }
    if system:
        body["system"] = system
    if tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools
        ]
    if temperature is not None:
        body["temperature"] = temperature
    if stream:
        body["stream"] = True
    return body


def parse_message(data: Mapping[str, Any]) -> ChatResult:
    """A non-streamed Messages response."""
    text: list[str] = []
    thinking: list[str] = []
    calls: list[ToolCall] = []
    for block in data.get("content") or []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            text.append(str(block.get("text", "")))
        elif kind == "thinking":
            thinking.append(str(block.get("thinking", "")))
        elif kind == "tool_use":
            arguments, bad = decode_arguments(block.get("input"))
            calls.append(
                ToolCall(
                    str(block.get("id", "")),
                    str(block.get("name", "")),
                    arguments,
                    raw_arguments=bad,
                )
            )
    reply = AssistantMessage("".join(text), tool_calls=calls, reasoning="".join(thinking) or None)
    return ChatResult(
        reply,
        anthropic_usage(data.get("usage")),
        normalize_stop_reason(data.get("stop_reason"), bool(calls)),
        data.get("model") if isinstance(data.get("model"), str) else None,
    )


@define
class _Block:
    kind: str
    text: list[str] = field(factory=list)
    id: str = ""
    name: str = ""
    json_parts: list[str] = field(factory=list)
    initial_input: Any = None


@define
class EventAccumulator:
    """Folds Messages stream events into one :class:`ChatResult`."""

    blocks: dict[int, _Block] = field(factory=dict)
    order: list[int] = field(factory=list)
    usage: dict[str, Any] = field(factory=dict)
    stop_reason: str | None = None
    model: str | None = None
    stopped: bool = False
    started: bool = False

    def add(self, kind: str, data: Mapping[str, Any]) -> tuple[str, str]:
        """Fold one event in; returns the new (text, thinking) pieces it carried."""
        if kind == "message_start":
            self.started = True
            message = data.get("message") or {}
            if isinstance(message.get("model"), str):
                self.model = message["model"]
            merge_usage_fields(self.usage, message.get("usage"))
        elif kind == "content_block_start":
            index = int(data.get("index", len(self.order)))
            block = data.get("content_block") or {}
            entry = _Block(
                str(block.get("type", "")),
                id=str(block.get("id", "")),
                name=str(block.get("name", "")),
                initial_input=block.get("input"),
            )
            if entry.kind == "text" and block.get("text"):
                entry.text.append(str(block["text"]))
            if entry.kind == "thinking" and block.get("thinking"):
                entry.text.append(str(block["thinking"]))
            self.blocks[index] = entry
            self.order.append(index)
        elif kind == "content_block_delta":
            index = int(data.get("index", -1))
            delta = data.get("delta") or {}
            entry = self.blocks.get(index) or self._orphan(index)
            delta_type = delta.get("type")
            if delta_type == "text_delta":
                piece = str(delta.get("text", ""))
                entry.text.append(piece)
                return piece, ""
            if delta_type == "thinking_delta":
                piece = str(delta.get("thinking", ""))
                entry.text.append(piece)
                return "", piece
            if delta_type == "input_json_delta":
                entry.json_parts.append(str(delta.get("partial_json", "")))
        elif kind == "message_delta":
            delta = data.get("delta") or {}
            if delta.get("stop_reason"):
                self.stop_reason = str(delta["stop_reason"])
            merge_usage_fields(self.usage, data.get("usage"))
        elif kind == "message_stop":
            self.stopped = True
        return "", ""

    def _orphan(self, index: int) -> _Block:
        entry = self.blocks[index] = _Block("text")
        self.order.append(index)
        return entry

    def result(self) -> ChatResult:
        """The accumulated answer."""
        text: list[str] = []
        thinking: list[str] = []
        calls: list[ToolCall] = []
        for index in self.order:
            block = self.blocks[index]
            if block.kind == "text":
                text.extend(block.text)
            elif block.kind == "thinking":
                thinking.extend(block.text)
            elif block.kind == "tool_use":
                raw = "".join(block.json_parts)
                source: Any = raw if raw.strip() else block.initial_input
                arguments, bad = decode_arguments(source)
                calls.append(ToolCall(block.id, block.name, arguments, raw_arguments=bad))
        reply = AssistantMessage(
            "".join(text), tool_calls=calls, reasoning="".join(thinking) or None
        )
        return ChatResult(
            reply,
            anthropic_usage(self.usage),
            normalize_stop_reason(self.stop_reason, bool(calls)),
            self.model,
        )

    @property
    def empty(self) -> bool:
        """Nothing usable arrived."""
        return not self.order and self.stop_reason is None


def encode(data: Any) -> str:
    """Compact JSON (used for error bodies in tests)."""
    return json.dumps(data, separators=(",", ":"))
