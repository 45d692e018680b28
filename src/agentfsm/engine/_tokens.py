"""Coarse token estimates: ``ceil(chars / 4)``, the same rule everywhere.

The estimate is deliberately cheap and provider-independent; it only gates compression.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from math import ceil

from ._messages import AssistantMessage, Message, ToolCall, ToolMessage

__all__ = [
    "TOOL_MESSAGE_OVERHEAD_TOKENS",
    "estimate_message_tokens",
    "estimate_messages_tokens",
    "estimate_text_tokens",
    "tool_calls_json",
]

TOOL_MESSAGE_OVERHEAD_TOKENS = 8
"""Flat overhead added for every tool message."""


def estimate_text_tokens(text: str) -> int:
    """``ceil(len(text) / 4)``."""
    return ceil(len(text) / 4)


def tool_calls_json(calls: Iterable[ToolCall]) -> str:
    """Tool calls as compact JSON (``[{"id":…,"name":…,"arguments":{…}}]``)."""
    return json.dumps(
        [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls],
        ensure_ascii=False,
        separators=(",", ":"),
    )


def estimate_message_tokens(message: Message) -> int:
    """Content tokens, plus an assistant message's JSON tool calls, plus 8 for a tool message."""
    tokens = estimate_text_tokens(message.content)
    if isinstance(message, AssistantMessage):
        if message.tool_calls:
            tokens += estimate_text_tokens(tool_calls_json(message.tool_calls))
    elif isinstance(message, ToolMessage):
        tokens += TOOL_MESSAGE_OVERHEAD_TOKENS
    return tokens


def estimate_messages_tokens(messages: Iterable[Message]) -> int:
    """Sum of :func:`estimate_message_tokens` over ``messages``."""
    return sum(estimate_message_tokens(m) for m in messages)
