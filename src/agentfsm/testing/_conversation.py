"""A request read on any of the three wires (OpenAI Chat Completions, Anthropic Messages,
OpenAI Responses), and a scripted turn written back on the request's wire: the fake server's
protocol half, whatever scenario plays."""

from __future__ import annotations

import hmac
import json
import re
import uuid
from typing import Any

from attrs import frozen

from agentfsm.engine import AssistantMessage, ChatResult, ToolCall, Usage

from ._fake_server import RecordedRequest, Reply
from ._responses_replies import responses_reply

__all__ = [
    "Conversation",
    "ScriptTurn",
    "count_tokens",
    "error_reply",
    "has_key",
    "overflow",
    "read",
    "render",
]


@frozen
class ScriptTurn:
    """One reply of a scripted model: ``text``, ``tool_calls`` (name and arguments), or both."""

    text: str = ""
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()


@frozen
class Conversation:
    """What a scenario needs to know of a request, whichever wire it came on."""

    wire: str
    """``openai``, ``anthropic`` or ``responses``."""
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
    prompt_tokens: int
    """The conversation's text and tools, counted in word pieces."""
    max_tokens: int | None = None
    """``max_tokens`` (``max_output_tokens`` on the Responses wire), when given."""
    tool_choice: str | None = None
    """``auto``, ``none``, ``required``, or the name of the tool it names (``None``: absent)."""
    parallel: bool = True
    """``parallel_tool_calls`` is not ``false``."""


_TEXT_PARTS = ("text", "input_text", "output_text")


def _text(content: Any) -> str:
    """The text of a message content: a string, or a list of parts/blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in _TEXT_PARTS
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
            if isinstance(part, dict) and part.get("type") in _TEXT_PARTS
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
        elif role in ("system", "developer"):
            items.append(("system", _text(message.get("content")), ""))
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


def _responses(body: dict[str, Any]) -> tuple[list[tuple[str, str, str]], frozenset[str]]:
    """The Responses wire's ``input`` (a string or items) as (role, text, tool name)."""
    names: dict[str, str] = {}
    items: list[tuple[str, str, str]] = []
    given = body.get("input")
    for item in [{"role": "user", "content": given}] if isinstance(given, str) else given or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "function_call":
            names[str(item.get("call_id"))] = str(item.get("name", ""))
            if not items or items[-1][0] != "assistant":
                items.append(("assistant", "", ""))
        elif kind == "function_call_output":
            output = item.get("output")
            name = names.get(str(item.get("call_id")), "")
            items.append(("tool", output if isinstance(output, str) else _text(output), name))
        elif item.get("role") == "assistant":
            items.append(("assistant", _text(item.get("content")), ""))
        elif item.get("role") == "user":
            items.append(("user", _user_text(item.get("content")), ""))
    tools = frozenset(
        str(tool.get("name"))
        for tool in body.get("tools") or []
        if isinstance(tool, dict) and tool.get("type") == "function"
    )
    return items, tools


_WIRES = {"/chat/completions": "openai", "/messages": "anthropic", "/responses": "responses"}
_PARSERS = {"openai": _openai, "anthropic": _anthropic, "responses": _responses}


def _tool_choice(choice: Any) -> str | None:
    """``tool_choice`` on any wire: ``auto``, ``none``, ``required`` or a tool's name."""
    if isinstance(choice, str):
        return choice
    if not isinstance(choice, dict):
        return None
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else choice.get("name")
    if isinstance(name, str) and choice.get("type") in ("function", "tool"):
        return name
    kind = choice.get("type")
    return {"any": "required"}.get(str(kind), str(kind)) if kind else None


def count_tokens(text: str) -> int:
    """The fake server's tokens: word pieces, as :func:`_pieces` streams them."""
    return len(re.findall(r"\S+\s*", text))


def _prompt_tokens(body: dict[str, Any], items: list[tuple[str, str, str]]) -> int:
    system = body.get("system") if "system" in body else body.get("instructions")
    text = " ".join(item[1] for item in items) + " " + _text(system)
    schemas = json.dumps(body.get("tools") or [], sort_keys=True)
    return 3 * len(items) + count_tokens(text) + len(schemas) // 4


def read(request: RecordedRequest) -> Conversation | None:
    path = request.path.split("?", 1)[0].rstrip("/")
    wire = next((wire for end, wire in _WIRES.items() if path.endswith(end)), None)
    if wire is None or request.method != "POST":
        return None
    body = request.json()
    if not isinstance(body, dict):
        raise ValueError("the request body is not a JSON object")
    items, tools = _PARSERS[wire](body)
    last = max((i for i, item in enumerate(items) if item[0] == "user"), default=-1)
    after = items[last + 1 :]
    limit = body.get("max_output_tokens" if wire == "responses" else "max_tokens")
    if wire == "openai" and limit is None:
        limit = body.get("max_completion_tokens")
    _check_options(body, wire)
    return Conversation(
        wire=wire,
        model=str(body.get("model") or "fake-model"),
        stream=body.get("stream") is True,
        tools=tools,
        last_user=items[last][1] if last >= 0 else "",
        assistant_turns=sum(1 for item in items if item[0] == "assistant"),
        since_user=tuple((name, text) for role, text, name in after if role == "tool"),
        assistant_since_user=sum(1 for item in after if item[0] == "assistant"),
        prompt_tokens=_prompt_tokens(body, items),
        max_tokens=limit if isinstance(limit, int) and not isinstance(limit, bool) else None,
        tool_choice=_tool_choice(body.get("tool_choice")),
        parallel=body.get("parallel_tool_calls") is not False,
    )


def _check_options(body: dict[str, Any], wire: str) -> None:
    """A ``temperature`` outside the wire's range (0-2; 0-1 on the Messages wire), or a
    ``max_tokens`` that is not a positive integer, is the client's error (a 400)."""
    temperature = body.get("temperature")
    top = 1 if wire == "anthropic" else 2
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not 0 <= temperature <= top
    ):
        raise ValueError(f"temperature must be a number from 0 to {top}, got {temperature!r}")
    for key in ("max_tokens", "max_output_tokens", "max_completion_tokens"):
        value = body.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ValueError(f"{key} must be a positive integer, got {value!r}")


def overflow(conversation: Conversation, window: int) -> Reply:
    tokens = conversation.prompt_tokens
    if conversation.wire == "anthropic":
        return error_reply(400, f"prompt is too long: {tokens} tokens > {window} maximum")
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages "
        f"resulted in {tokens} tokens."
    )
    error = {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}
    return Reply.json({"error": error}, 400)


def has_key(request: RecordedRequest, key: str) -> bool:
    given = request.headers.get("x-api-key") or request.headers.get("authorization", "")
    return hmac.compare_digest(given.removeprefix("Bearer ").encode(), key.encode())


def error_reply(status: int, message: str, kind: str = "invalid_request_error") -> Reply:
    return Reply.json({"type": "error", "error": {"type": kind, "message": message}}, status)


# -- wire rendering --------------------------------------------------------------------


def _pieces(text: str) -> list[str]:
    """``text`` in a few word-sized pieces, as a model streams it."""
    return re.findall(r"\S+\s*|\s+", text) or [text]


def render(conversation: Conversation, turn: ScriptTurn) -> Reply:
    """``turn`` on the request's wire, cut at its ``max_tokens`` (a word piece a token)."""
    text, cut = turn.text, False
    pieces = _pieces(text) if text else []
    limit = conversation.max_tokens
    if limit is not None and len(pieces) > limit:
        text, cut = "".join(pieces[:limit]), True
    calls = [] if cut else [(uuid.uuid4().hex[:16], name, args) for name, args in turn.tool_calls]
    usage_in = conversation.prompt_tokens
    usage_out = count_tokens(text) + sum(len(json.dumps(args)) // 4 + 2 for _, _, args in calls)
    if conversation.wire == "responses":
        return _responses_reply(conversation, text, calls, usage_in, usage_out, cut)
    if conversation.wire == "openai":
        return _openai_reply(conversation, text, calls, usage_in, usage_out, cut)
    return _anthropic_reply(conversation, text, calls, usage_in, usage_out, cut)


def _responses_reply(
    conversation: Conversation,
    text: str,
    calls: list[tuple[str, str, dict[str, Any]]],
    usage_in: int,
    usage_out: int,
    cut: bool,
) -> Reply:
    message = AssistantMessage(
        text, tool_calls=[ToolCall(f"call_{call_id}", name, args) for call_id, name, args in calls]
    )
    finish = "length" if cut else "tool_calls" if calls else "stop"
    result = ChatResult(
        message, Usage(usage_in, usage_out), finish, conversation.model, "resp_fake"
    )
    return responses_reply(result, stream=conversation.stream)


def _sse(payload: Any, event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(payload)}\n\n"


def _openai_reply(
    conversation: Conversation,
    text: str,
    calls: list[tuple[str, str, dict[str, Any]]],
    usage_in: int,
    usage_out: int,
    cut: bool,
) -> Reply:
    finish = "length" if cut else "tool_calls" if calls else "stop"
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
    conversation: Conversation,
    text: str,
    calls: list[tuple[str, str, dict[str, Any]]],
    usage_in: int,
    usage_out: int,
    cut: bool,
) -> Reply:
    stop = "max_tokens" if cut else "tool_use" if calls else "end_turn"
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
