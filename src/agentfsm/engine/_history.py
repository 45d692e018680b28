"""History helpers of the core contract: system prompt seeding and tool-result messages."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._messages import (
    ImagePart,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
)

if TYPE_CHECKING:
    from ._context import ToolOutcome

__all__ = [
    "TURN_BUDGET_EXHAUSTED",
    "budget_exhausted_result",
    "format_tool_result_content",
    "images_message",
    "seed_system_prompt",
    "tool_message_from_result",
]

TURN_BUDGET_EXHAUSTED = "turn_budget_exhausted"
"""Error of the result that closes a tool call requested on the last allowed turn."""


def seed_system_prompt(messages: Sequence[Message], system_prompt: str | None) -> list[Message]:
    """Copy ``messages`` and apply the system prompt rules.

    1. No system message: prepend one.
    2. A system message with the same content: the copy is returned unchanged.
    3. A system message with other content: it is replaced in place (in the copy).

    ``None`` means no system prompt: the copy is returned as is. The input is never mutated.
    """
    history = list(messages)
    if system_prompt is None:
        return history
    for index, message in enumerate(history):
        if isinstance(message, SystemMessage):
            if message.content != system_prompt:
                history[index] = SystemMessage(system_prompt)
            return history
    history.insert(0, SystemMessage(system_prompt))
    return history


def format_tool_result_content(result: ToolResult) -> str:
    """Raw output on success; ``{"ok":false,"output":…,"error":…}`` JSON on failure."""
    if result.ok:
        return result.output
    return json.dumps(
        {"ok": False, "output": result.output, "error": result.error},
        ensure_ascii=False,
        separators=(",", ":"),
    )


def tool_message_from_result(call: ToolCall, result: ToolResult) -> ToolMessage:
    """The tool message answering ``call`` with ``result``."""
    return ToolMessage(call.id, format_tool_result_content(result), is_error=not result.ok)


def budget_exhausted_result() -> ToolResult:
    """The result that closes a call skipped because no turn is left to read it."""
    return ToolResult(ok=False, output="", error=TURN_BUDGET_EXHAUSTED)


def images_message(outcomes: Sequence[ToolOutcome]) -> UserMessage | None:
    """The images of a turn's tool results as one user message to follow all the results
    (inside a tool result they would break the call/result pairing), or ``None``."""
    images = []
    names = []
    for outcome in outcomes:
        image = outcome.result.metadata.get("image")
        if isinstance(image, dict) and isinstance(image.get("data"), str):
            images.append(ImagePart(str(image.get("media_type", "image/png")), image["data"]))
            names.append(outcome.call.name)
    if not images:
        return None
    label = ", ".join(dict.fromkeys(names))
    return UserMessage(f"[image output of {label}]", images=images)
