"""Scripted conversations for :class:`FakeProviderServer`, answered on either wire.

A scenario reads each request (OpenAI Chat Completions or Anthropic Messages, streamed or
not) and answers the way a model would: with text, tool calls, or both. It keeps no state
between requests; what it says depends on the conversation the request carries, so many
runs, one after another or at the same time, each get the whole scenario.

- ``echo``: answers with the last user message (the prompt).
- ``tools``: lists the workspace (``list_dir``), reads its first file (``read_file``), then
  answers with what it saw; a tool the request does not offer is skipped.
- a script (:func:`load_script`): a list of turns; the reply to a request is the turn
  numbered by how many assistant turns its conversation already has (so each new run starts
  at the first turn), wrapping around after the last.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from attrs import frozen

from ._fake_server import RecordedRequest, Reply, ReplyHandler

__all__ = ["SCENARIOS", "ScriptTurn", "load_script", "scenario_handler"]

SCENARIOS = ("echo", "tools")
"""The built-in scenarios."""

MAX_SCRIPT_BYTES = 10 * 1024 * 1024
"""The largest script file read."""


@frozen
class ScriptTurn:
    """One reply of a scripted model: ``text``, ``tool_calls`` (name and arguments), or both."""

    text: str = ""
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()


@frozen
class _Conversation:
    """What a scenario needs to know of a request, whichever wire it came on."""

    wire: str
    """``openai`` or ``anthropic``."""
    model: str
    stream: bool
    tools: frozenset[str]
    """The tool names the request offers."""
    last_user: str
    """The text of the last user message (system reminders removed)."""
    assistant_turns: int
    """Assistant messages in the whole conversation."""
    since_user: tuple[tuple[str, str], ...]
    """Tool results after the last user text message: (tool name, result text)."""
    assistant_since_user: int
    """Assistant messages after the last user text message."""
    size: int
    """The request body's length, for a usage estimate."""


def _text(content: Any) -> str:
    """The text of a message content: a string, or a list of parts/blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)


def _user_text(content: Any) -> str:
    """A user message's own words: its last text part that is not only a system reminder
    (a preamble block may come before the prompt in the same message)."""
    parts = [content] if isinstance(content, str) else []
    if isinstance(content, list):
        parts = [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        ]
    words = [_REMINDER.sub("", part).strip() for part in parts]
    return next((text for text in reversed(words) if text), "")


def _openai(body: dict[str, Any]) -> tuple[list[tuple[str, str, str]], frozenset[str]]:
    """The messages as (role, text, tool name) and the offered tool names."""
    names: dict[str, str] = {}
    items: list[tuple[str, str, str]] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                if isinstance(call, dict) and isinstance(call.get("function"), dict):
                    names[str(call.get("id"))] = str(call["function"].get("name", ""))
            items.append(("assistant", _text(message.get("content")), ""))
        elif role == "tool":
            name = names.get(str(message.get("tool_call_id")), "")
            items.append(("tool", _text(message.get("content")), name))
        elif role == "user":
            items.append(("user", _user_text(message.get("content")), ""))
    tools = frozenset(
        str(tool["function"].get("name"))
        for tool in body.get("tools") or []
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict)
    )
    return items, tools


def _anthropic(body: dict[str, Any]) -> tuple[list[tuple[str, str, str]], frozenset[str]]:
    names: dict[str, str] = {}
    items: list[tuple[str, str, str]] = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if message.get("role") == "assistant":
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    names[str(block.get("id"))] = str(block.get("name", ""))
            items.append(("assistant", _text(content), ""))
            continue
        results = [
            block
            for block in blocks
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]
        for block in results:
            name = names.get(str(block.get("tool_use_id")), "")
            items.append(("tool", _text(block.get("content")), name))
        text = _user_text(content)
        if not results or text:
            items.append(("user", text, ""))
    tools = frozenset(
        str(tool.get("name")) for tool in body.get("tools") or [] if isinstance(tool, dict)
    )
    return items, tools


def _conversation(request: RecordedRequest) -> _Conversation | None:
    path = request.path.split("?", 1)[0].rstrip("/")
    wire = (
        "openai"
        if path.endswith("/chat/completions")
        else "anthropic"
        if path.endswith("/messages")
        else None
    )
    if wire is None or request.method != "POST":
        return None
    body = request.json()
    if not isinstance(body, dict):
        raise ValueError("the request body is not a JSON object")
    items, tools = _openai(body) if wire == "openai" else _anthropic(body)
    last = max((i for i, item in enumerate(items) if item[0] == "user"), default=-1)
    after = items[last + 1 :]
    return _Conversation(
        wire=wire,
        model=str(body.get("model") or "fake-model"),
        stream=body.get("stream") is True,
        tools=tools,
        last_user=items[last][1] if last >= 0 else "",
        assistant_turns=sum(1 for item in items if item[0] == "assistant"),
        since_user=tuple((name, text) for role, text, name in after if role == "tool"),
        assistant_since_user=sum(1 for item in after if item[0] == "assistant"),
        size=len(request.body),
    )


# -- scenarios -------------------------------------------------------------------------


def _echo(conversation: _Conversation) -> ScriptTurn:
    return ScriptTurn(conversation.last_user or "(an empty prompt)")


def _first_file(listing: str) -> str | None:
    for line in listing.splitlines():
        name = line.strip()
        if name and not name.endswith("/") and not name.startswith(("(", "[", "…")):
            return name
    return None


def _tools(conversation: _Conversation) -> ScriptTurn:
    results = dict(conversation.since_user)
    step = conversation.assistant_since_user
    if step == 0 and "list_dir" not in results and "list_dir" in conversation.tools:
        return ScriptTurn("Let me look at the workspace.", (("list_dir", {"path": "."}),))
    listing = results.get("list_dir", "")
    first = _first_file(listing)
    can_read = first is not None and "read_file" in conversation.tools
    if step == 1 and can_read and "read_file" not in results:
        return ScriptTurn(f"Reading {first}.", (("read_file", {"path": first, "limit": 20}),))
    count = len([line for line in listing.splitlines() if line.strip()])
    entries = f"{count} entr{'y' if count == 1 else 'ies'}"
    if "read_file" in results:
        lines = results["read_file"].strip().splitlines()
        opening = re.sub(r"^\s*\d+\s+", "", lines[0])[:200] if lines else "(empty)"
        return ScriptTurn(
            f"The workspace has {entries}; {first} begins with: {opening}\n"
            f"(You asked: {conversation.last_user[:500]})"
        )
    if listing:
        return ScriptTurn(f"The workspace has {entries} and no file I could read.")
    return ScriptTurn(f"No tools to look with. You asked: {conversation.last_user[:500]}")


def _scripted(turns: Sequence[ScriptTurn]) -> Callable[[_Conversation], ScriptTurn]:
    def reply(conversation: _Conversation) -> ScriptTurn:
        return turns[conversation.assistant_turns % len(turns)]

    return reply


def load_script(path: str | Path) -> tuple[ScriptTurn, ...]:
    """The turns of a JSON script file: a list of turns, or ``{"turns": [...]}``; each turn
    is ``{"text": "..."}``, ``{"tool_calls": [{"name": "...", "arguments": {...}}]}`` or
    both.

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not such a script (the message says where).
    """
    file = Path(path)
    with file.open("rb") as handle:
        data = handle.read(MAX_SCRIPT_BYTES + 1)
    if len(data) > MAX_SCRIPT_BYTES:
        raise ValueError(f"{file}: larger than {MAX_SCRIPT_BYTES} bytes")
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{file}: not JSON ({error})") from None
    turns = document.get("turns") if isinstance(document, dict) else document
    if not isinstance(turns, list) or not turns:
        raise ValueError(f'{file}: expected a non-empty list of turns, or {{"turns": [...]}}')
    return tuple(_turn(file, index, turn) for index, turn in enumerate(turns))


def _turn(file: Path, index: int, turn: Any) -> ScriptTurn:
    where = f"{file}: turn {index + 1}"
    if not isinstance(turn, dict) or not set(turn) <= {"text", "tool_calls"}:
        raise ValueError(f'{where}: expected an object with "text" and/or "tool_calls"')
    text = turn.get("text", "")
    if not isinstance(text, str):
        raise ValueError(f'{where}: "text" must be a string')
    calls: list[tuple[str, dict[str, Any]]] = []
    raw_calls = turn.get("tool_calls", [])
    if not isinstance(raw_calls, list):
        raise ValueError(f'{where}: "tool_calls" must be a list')
    for call in raw_calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ValueError(f'{where}: each tool call needs a "name" string')
        arguments = call.get("arguments", {})
        if not isinstance(arguments, dict):
            raise ValueError(f'{where}: the "arguments" of {call["name"]} must be an object')
        calls.append((call["name"], arguments))
    if not text and not calls:
        raise ValueError(f'{where}: give "text", "tool_calls" or both')
    return ScriptTurn(text, tuple(calls))


def scenario_handler(scenario: str | Sequence[ScriptTurn]) -> ReplyHandler:
    """A :attr:`FakeProviderServer.handler` that plays ``scenario`` on both wires:
    ``"echo"``, ``"tools"`` or script turns (:func:`load_script`). Requests to
    ``…/chat/completions`` get OpenAI replies and requests to ``…/messages`` Anthropic
    ones, streamed when the request asks; ``GET …/models`` lists one model; anything else
    is a 404.

    Raises:
        ValueError: an unknown scenario name, or no turns.
    """
    play: Callable[[_Conversation], ScriptTurn]
    if isinstance(scenario, str):
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {scenario!r} (known: {', '.join(SCENARIOS)})")
        play = _echo if scenario == "echo" else _tools
    else:
        if not scenario:
            raise ValueError("a script needs at least one turn")
        play = _scripted(tuple(scenario))

    def handler(request: RecordedRequest) -> Reply:
        if request.method == "GET" and request.path.split("?", 1)[0].rstrip("/").endswith(
            "/models"
        ):
            return Reply.json({"object": "list", "data": [{"id": "fake", "object": "model"}]})
        try:
            conversation = _conversation(request)
        except ValueError as error:
            return _error(400, f"fake-server: {error}")
        if conversation is None:
            return _error(404, f"fake-server: no such endpoint {request.path[:200]!r}")
        return _render(conversation, play(conversation))

    return handler


def _error(status: int, message: str) -> Reply:
    return Reply.json(
        {"type": "error", "error": {"type": "invalid_request_error", "message": message}},
        status,
    )


# -- wire rendering --------------------------------------------------------------------


def _pieces(text: str) -> list[str]:
    """``text`` in a few word-sized pieces, as a model streams it."""
    return re.findall(r"\S+\s*|\s+", text) or [text]


def _render(conversation: _Conversation, turn: ScriptTurn) -> Reply:
    usage_in = max(1, conversation.size // 4)
    usage_out = max(1, (len(turn.text) + len(json.dumps(turn.tool_calls))) // 4)
    calls = [(f"{uuid.uuid4().hex[:16]}", name, args) for name, args in turn.tool_calls]
    if conversation.wire == "openai":
        return _openai_reply(conversation, turn.text, calls, usage_in, usage_out)
    return _anthropic_reply(conversation, turn.text, calls, usage_in, usage_out)


def _sse(payload: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(payload)}\n\n"


def _openai_reply(
    conversation: _Conversation,
    text: str,
    calls: list[tuple[str, str, dict[str, Any]]],
    usage_in: int,
    usage_out: int,
) -> Reply:
    finish = "tool_calls" if calls else "stop"
    usage = {
        "prompt_tokens": usage_in,
        "completion_tokens": usage_out,
        "total_tokens": usage_in + usage_out,
    }
    wire_calls = [
        {
            "id": f"call_{call_id}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        for call_id, name, args in calls
    ]
    head = {"id": "chatcmpl-fake", "model": conversation.model, "created": 0}
    if not conversation.stream:
        message = {"role": "assistant", "content": text or None, "tool_calls": wire_calls or None}
        choice = {"index": 0, "message": message, "finish_reason": finish}
        return Reply.json(
            {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
        )

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return _sse({**head, "object": "chat.completion.chunk", "choices": [choice]})

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"content": piece}) for piece in (_pieces(text) if text else [])]
    frames += [
        chunk({"tool_calls": [{"index": index, **call}]}) for index, call in enumerate(wire_calls)
    ]
    frames.append(chunk({}, finish))
    frames.append(_sse({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage}))
    frames.append("data: [DONE]\n\n")
    return Reply.sse(frames)


def _anthropic_reply(
    conversation: _Conversation,
    text: str,
    calls: list[tuple[str, str, dict[str, Any]]],
    usage_in: int,
    usage_out: int,
) -> Reply:
    stop = "tool_use" if calls else "end_turn"
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [
        {"type": "tool_use", "id": f"toolu_{call_id}", "name": name, "input": args}
        for call_id, name, args in calls
    ]
    message = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": conversation.model,
        "stop_sequence": None,
    }
    if not conversation.stream:
        usage = {"input_tokens": usage_in, "output_tokens": usage_out}
        return Reply.json({**message, "content": blocks, "stop_reason": stop, "usage": usage})
    start: dict[str, Any] = {**message, "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": usage_in, "output_tokens": 0}
    frames = [_sse({"type": "message_start", "message": start}, "message_start")]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"])]
        else:
            opening = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        frames.append(
            _sse(
                {"type": "content_block_start", "index": index, "content_block": opening},
                "content_block_start",
            )
        )
        frames += [
            _sse(
                {"type": "content_block_delta", "index": index, "delta": delta},
                "content_block_delta",
            )
            for delta in deltas
        ]
        frames.append(_sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    frames.append(
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": usage_out},
            },
            "message_delta",
        )
    )
    frames.append(_sse({"type": "message_stop"}, "message_stop"))
    return Reply.sse(frames)
