"""``text_tool_calls``: tool calls written as text, for providers without native tool calling."""

from __future__ import annotations

import json
import re
from typing import Any

from attrs import evolve

from agentfsm.engine.context import RunContext
from agentfsm.engine.messages import AssistantMessage, ChatResult, ToolCall

__all__ = ["TOOL_CALLS_BLOCK", "parse_text_tool_calls", "text_tool_calls"]

TOOL_CALLS_BLOCK = re.compile(r"\[TOOL_CALLS\](.*?)(?:\[/TOOL_CALLS\]|\Z)", re.S)
"""``[TOOL_CALLS][{"name": …, "arguments": {…}}, …][/TOOL_CALLS]`` (closing tag optional)."""


def _arguments(item: dict[str, Any]) -> dict[str, Any] | None:
    args = item.get("arguments", item.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return None
    return args if isinstance(args, dict) else None


def parse_text_tool_calls(text: str, id_prefix: str) -> tuple[str, list[ToolCall]] | None:
    """The text without its ``[TOOL_CALLS]`` block, and the calls; ``None`` if there is no
    well-formed block."""
    match = TOOL_CALLS_BLOCK.search(text)
    if match is None:
        return None
    try:
        data = json.loads(match.group(1).strip())
    except ValueError:
        return None
    items = data if isinstance(data, list) else [data]
    calls = []
    for index, item in enumerate(items, start=1):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        args = _arguments(item)
        if args is None:
            return None
        call_id = item.get("id") if isinstance(item.get("id"), str) else None
        calls.append(ToolCall(call_id or f"{id_prefix}{index}", item["name"], args))
    if not calls:
        return None
    return (text[: match.start()] + text[match.end() :]).strip(), calls


class text_tool_calls:
    """When a reply has no native tool calls, parse a ``[TOOL_CALLS]`` block in its text."""

    name = "text_tool_calls"

    def shape_reply(self, ctx: RunContext, result: ChatResult) -> ChatResult | None:
        message = result.message
        if message.tool_calls or "[TOOL_CALLS]" not in message.content:
            return None
        parsed = parse_text_tool_calls(message.content, f"text_call_{ctx.turn}_")
        if parsed is None:
            return None
        text, calls = parsed
        reply = AssistantMessage(text, tool_calls=calls, reasoning=message.reasoning)
        return evolve(result, message=reply, finish_reason="tool_calls")

    def __repr__(self) -> str:
        return "text_tool_calls()"
