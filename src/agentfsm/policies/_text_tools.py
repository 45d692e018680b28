"""``text_tool_calls``: tool calls written as text, for providers without native tool calling."""

from __future__ import annotations

import json
import re
from collections.abc import Set
from typing import Any

from attrs import define, evolve

from agentfsm.engine import AssistantMessage, ChatResult, Message, RunContext, ToolCall

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


def _unique(wanted: str | None, fallback: str, taken: set[str]) -> str:
    """``wanted`` when it is free, else ``fallback``, else ``fallback`` with a suffix."""
    if wanted and wanted not in taken:
        return wanted
    candidate, n = fallback, 1
    while candidate in taken:
        n += 1
        candidate = f"{fallback}_{n}"
    return candidate


def parse_text_tool_calls(
    text: str, id_prefix: str, *, taken: Set[str] = frozenset()
) -> tuple[str, list[ToolCall]] | None:
    """The text without its ``[TOOL_CALLS]`` block, and the calls; ``None`` if there is no
    well-formed block.

    Every call gets an id of its own: the one the model wrote when it is neither repeated in
    the block nor in ``taken`` (ids already in use), else ``{id_prefix}{n}``, made unique
    the same way."""
    match = TOOL_CALLS_BLOCK.search(text)
    if match is None:
        return None
    try:
        data = json.loads(match.group(1).strip())
    except ValueError:
        return None
    items = data if isinstance(data, list) else [data]
    calls = []
    used = set(taken)
    for index, item in enumerate(items, start=1):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return None
        args = _arguments(item)
        if args is None:
            return None
        wanted = item.get("id") if isinstance(item.get("id"), str) else None
        call_id = _unique(wanted, f"{id_prefix}{index}", used)
        used.add(call_id)
        calls.append(ToolCall(call_id, item["name"], args))
    if not calls:
        return None
    return (text[: match.start()] + text[match.end() :]).strip(), calls


@define
class _Ids:
    """The tool call ids of the run's history, collected incrementally."""

    seen: set[str]
    compressions: int = 0
    scanned: int = 0


def _taken(ctx: RunContext, owner: object) -> set[str]:
    """Every tool call id the run's history has used (including ids a compression has since
    summarized away, and those of earlier runs it was seeded with)."""
    ids = ctx.state(owner, lambda: _Ids(set()))
    history: list[Message] = ctx.history
    if ids.compressions != ctx.compressions or ids.scanned > len(history):
        ids.compressions, ids.scanned = ctx.compressions, 0  # history rewritten: rescan
    for message in history[ids.scanned :]:
        if isinstance(message, AssistantMessage):
            ids.seen.update(call.id for call in message.tool_calls)
    ids.scanned = len(history)
    return ids.seen


class text_tool_calls:
    """When a reply has no native tool calls, parse a ``[TOOL_CALLS]`` block in its text.

    Call ids are unique across the run's history: an id the model repeats, or one already
    used, is replaced by ``text_call_{turn}_{n}`` (suffixed further if that is taken too).
    """

    name = "text_tool_calls"

    def shape_reply(self, ctx: RunContext, result: ChatResult) -> ChatResult | None:
        message = result.message
        if message.tool_calls or "[TOOL_CALLS]" not in message.content:
            return None
        taken = _taken(ctx, self)
        parsed = parse_text_tool_calls(message.content, f"text_call_{ctx.turn}_", taken=taken)
        if parsed is None:
            return None
        text, calls = parsed
        taken.update(call.id for call in calls)
        reply = evolve(message, content=text, tool_calls=calls)
        return evolve(result, message=reply, finish_reason="tool_calls")

    def __repr__(self) -> str:
        return "text_tool_calls()"
