"""Anthropic Messages wire format: requests out, responses and stream events in."""

from __future__ import annotations

import hashlib
import json
import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from attrs import define, field, frozen

from agentfsm.engine import (
    AssistantMessage,
    ChatResult,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
    utf8_bytes,
)

from ._finish import normalize_finish
from ._limits import BadShape, Limits, TooLarge
from ._openai_wire import decode_arguments, unique_call_id
from ._shapes import Buffer, opt_dict, opt_list, opt_str
from ._usage import anthropic_usage, merge_usage_fields

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MAX_TOOL_USE_ID",
    "REASONING_BLOCKS",
    "AnthropicQuirks",
    "EventAccumulator",
    "build_request",
    "normalize_stop_reason",
    "parse_message",
    "reasoning_item",
    "wire_tool_id",
]

DEFAULT_MAX_TOKENS = 8192
"""The Messages API requires ``max_tokens``; this is sent when the caller gives none."""


@frozen
class AnthropicQuirks:
    """What a Messages server needs, when it differs from Anthropic's own API.

    ``agentfsm conformance probe --wire anthropic`` suggests a profile for an endpoint.
    """

    explicit_tool_choice: bool = False
    """Send ``tool_choice: {"type": "auto"}`` with tools (LiteLLM's Messages route in front
    of llama-cpp-python leaves the tools out of the prompt without it, so the model never
    calls one)."""
    stream_with_tools: bool = True
    """Stream requests that offer tools; ``False`` sends those unstreamed (LiteLLM's Messages
    route in front of llama-cpp-python turns llama.cpp's empty stream for a streamed
    automatic tool choice into an empty ``end_turn`` answer)."""
    string_content: bool = False
    """Send a turn that is one text block as a plain string (LiteLLM's Messages route in
    front of llama-cpp-python renders text blocks into the prompt as a Python ``repr``)."""


def normalize_stop_reason(reason: str | None, has_tool_calls: bool) -> str | None:
    """Anthropic stop reasons in the common vocabulary (:data:`~agentfsm.adapters.
    providers.FINISH_REASONS`): ``end_turn`` and ``stop_sequence`` are ``stop``,
    ``max_tokens`` and ``model_context_window_exceeded`` are ``length``, ``refusal`` is
    ``content_filter``, ``tool_use`` is ``tool_calls``; any other (``pause_turn``) is
    ``other``."""
    return normalize_finish(reason, has_tool_calls)[0]


def _merge(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Append a turn, merging consecutive turns of the same role (the API wants them
    alternating, and every result of a parallel call in one user turn)."""
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


MAX_TOOL_USE_ID = 64
"""The longest ``tool_use`` id sent; every id sent matches ``^[a-zA-Z0-9_-]+$``."""
_WIRE_ID = re.compile(rf"[a-zA-Z0-9_-]{{1,{MAX_TOOL_USE_ID}}}")
_NOT_WIRE = re.compile(r"[^a-zA-Z0-9_-]+")


def wire_tool_id(call_id: str, salt: int = 0) -> str:
    """``call_id`` as the Messages API accepts it: unchanged when it already matches
    ``^[a-zA-Z0-9_-]+$`` within :data:`MAX_TOOL_USE_ID` characters, else its allowed
    characters (at most 40) and a hash of the whole id (other providers' ids such as
    ``call_abc.def:1``, empty ids, spaces, non-ASCII text, lone surrogates). The same id
    always gives the same result; ``salt`` gives another one for the same id."""
    if not salt and _WIRE_ID.fullmatch(call_id):
        return call_id
    prefix = _NOT_WIRE.sub("_", call_id)[:40].strip("_") or "id"
    seed = utf8_bytes(call_id) + (f"\x00{salt}".encode() if salt else b"")
    return f"{prefix}_{hashlib.sha256(seed).hexdigest()[:16]}"


class _WireIds:
    """The ids of one request's history on the wire: each original id has one wire id
    (:func:`wire_tool_id`) in every turn, and distinct ids get distinct wire ids."""

    def __init__(self) -> None:
        self._wire: dict[str, str] = {}
        self._taken: set[str] = set()

    def _fresh(self, call_id: str, salt: int) -> str:
        wire = wire_tool_id(call_id, salt)
        while wire in self._taken:
            salt += 1
            wire = wire_tool_id(call_id, salt)
        self._taken.add(wire)
        return wire

    def of(self, call_id: str) -> str:
        """The wire id of ``call_id``."""
        wire = self._wire.get(call_id)
        if wire is None:
            wire = self._wire[call_id] = self._fresh(call_id, 0)
        return wire

    def repeat(self, call_id: str, occurrence: int) -> str:
        """A wire id of its own for the ``occurrence``-th repeat of ``call_id`` in one turn
        (the API rejects a turn whose ``tool_use`` blocks share an id)."""
        return self._fresh(call_id, occurrence)


def build_request(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    *,
    temperature: float | None,
    max_tokens: int | None,
    stream: bool,
    quirks: AnthropicQuirks | None = None,
) -> dict[str, Any]:
    """The JSON body of a ``/v1/messages`` request."""
    quirks = quirks if quirks is not None else AnthropicQuirks()
    system = "\n\n".join(m.content for m in messages if isinstance(m, SystemMessage))
    turns: list[dict[str, Any]] = []
    ids = _WireIds()
    open_calls: dict[str, deque[str]] = {}
    """The latest assistant turn's calls not yet answered: original id -> wire ids, in
    order (a turn may repeat an id; its results pair with its calls in order)."""
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
            blocks: list[dict[str, Any]] = [
                dict(item) for item in message.reasoning_items if _sent_back(item)
            ]
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            open_calls = {}
            for call in message.tool_calls:
                pending = open_calls.setdefault(call.id, deque())
                wire = ids.repeat(call.id, len(pending)) if pending else ids.of(call.id)
                pending.append(wire)
                blocks.append(
                    {"type": "tool_use", "id": wire, "name": call.name, "input": call.arguments}
                )
            if blocks:
                _merge(turns, "assistant", blocks)
        elif isinstance(message, ToolMessage):
            answers = open_calls.get(message.tool_call_id)
            if answers:
                block: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": answers.popleft(),
                    "content": message.content,
                }
                if message.is_error:
                    block["is_error"] = True
            else:  # its call was summarized away (or already answered): keep the text only
                block = {
                    "type": "text",
                    "text": f"[result of tool call {message.tool_call_id}]\n{message.content}",
                }
            _merge(turns, "user", [block])
    if quirks.string_content:
        for turn in turns:
            blocks = turn["content"]
            if len(blocks) == 1 and blocks[0]["type"] == "text":
                turn["content"] = blocks[0]["text"]
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
        if quirks.explicit_tool_choice:
            body["tool_choice"] = {"type": "auto"}
    if temperature is not None:
        body["temperature"] = temperature
    if stream:
        body["stream"] = True
    return body


def _str(value: Any, where: str) -> str:
    return opt_str(value, where) or ""


def _too_many(what: str, limit: str, bound: int) -> TooLarge:
    return TooLarge(limit, f"the reply holds more than {bound} {what}")


REASONING_BLOCKS = ("thinking", "redacted_thinking")
"""The Messages blocks a reply's :attr:`~agentfsm.engine._messages.AssistantMessage.
reasoning_items` keep, to be sent back unchanged with the next request (the API requires
a tool-use turn's thinking blocks back when thinking is on)."""


def reasoning_item(kind: str, content: str, signature: str = "") -> dict[str, Any] | None:
    """The reasoning item a ``thinking`` block (its text and signature) or a
    ``redacted_thinking`` block (its ``data``) keeps: ``None`` for a thinking block
    without a signature, which the API would not take back."""
    if kind == "redacted_thinking":
        return {"type": kind, "data": content}
    if not signature:
        return None
    return {"type": kind, "thinking": content, "signature": signature}


def _sent_back(item: Mapping[str, Any]) -> bool:
    """Whether a kept reasoning item goes back to the Messages API: a signed thinking
    block, or a redacted one (another wire's items, and unsigned thinking, do not)."""
    if item.get("type") == "redacted_thinking":
        return bool(item.get("data"))
    return item.get("type") == "thinking" and bool(item.get("signature"))


def parse_message(data: Mapping[str, Any], limits: Limits | None = None) -> ChatResult:
    """A non-streamed Messages response (``BadShape``/``TooLarge`` when it breaks the format
    or the bounds)."""
    limits = limits if limits is not None else Limits()
    text: list[str] = []
    thinking: list[str] = []
    kept: list[dict[str, Any]] = []
    calls: list[ToolCall] = []
    seen: set[str] = set()
    blocks = opt_list(data.get("content"), "content")
    uses = sum(1 for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use")
    if uses > limits.max_tool_calls:
        raise _too_many("tool calls", "max_tool_calls", limits.max_tool_calls)
    if len(blocks) > limits.max_blocks:
        raise _too_many("content blocks", "max_blocks", limits.max_blocks)
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            text.append(_str(block.get("text"), "content[].text"))
        elif kind == "thinking":
            thinking.append(_str(block.get("thinking"), "content[].thinking"))
            item = reasoning_item(
                kind, thinking[-1], _str(block.get("signature") or None, "signature")
            )
            kept += [item] if item is not None else []
        elif kind == "redacted_thinking":
            item = reasoning_item(kind, _str(block.get("data"), "content[].data"))
            kept += [item] if item is not None else []
        elif kind == "tool_use":
            if len(calls) >= limits.max_tool_calls:
                raise _too_many("tool calls", "max_tool_calls", limits.max_tool_calls)
            arguments, bad = decode_arguments(
                block.get("input"), limits.max_json_depth, limits.max_argument_bytes
            )
            name = _str(block.get("name"), "content[].name")
            args = bad if bad is not None else json.dumps(arguments, sort_keys=True)
            call_id = unique_call_id(
                _str(block.get("id"), "content[].id"), len(calls), name, args, seen
            )
            calls.append(ToolCall(call_id, name, arguments, raw_arguments=bad))
    reply = AssistantMessage(
        "".join(text),
        tool_calls=calls,
        reasoning="".join(thinking) or None,
        reasoning_items=kept,
    )
    finish, raw_reason = normalize_finish(
        opt_str(data.get("stop_reason"), "stop_reason"), bool(calls)
    )
    return ChatResult(
        reply,
        anthropic_usage(opt_dict(data.get("usage"), "usage")),
        finish,
        data.get("model") if isinstance(data.get("model"), str) else None,
        data.get("id") if isinstance(data.get("id"), str) else None,
        raw_reason,
    )


@define
class _Block:
    kind: str
    text: Buffer
    id: str = ""
    name: str = ""
    json_parts: Buffer | None = None
    initial_input: Any = None
    start: dict[str, Any] = field(factory=dict)
    """The ``content_block`` its ``content_block_start`` carried."""
    signature: Buffer | None = None
    citations: list[Any] = field(factory=list)


def _index(value: Any, default: int) -> int:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadShape(f"`index` is a {type(value).__name__}, expected an integer")
    return value


@define
class EventAccumulator:
    """Folds Messages stream events into one :class:`ChatResult`, within ``limits``."""

    limits: Limits = field(factory=Limits)
    blocks: dict[int, _Block] = field(factory=dict, init=False)
    order: list[int] = field(factory=list, init=False)
    usage: dict[str, Any] = field(factory=dict, init=False)
    stop_reason: str | None = field(default=None, init=False)
    model: str | None = field(default=None, init=False)
    response_id: str | None = field(default=None, init=False)
    stopped: bool = field(default=False, init=False)
    started: bool = field(default=False, init=False)
    tool_calls: int = field(default=0, init=False)
    budget: list[int] = field(init=False)
    continued: int | None = field(default=None, init=False)
    """The index of the last block folded into the tool call before it (same id)."""

    def __attrs_post_init__(self) -> None:
        self.budget = [self.limits.max_body_bytes]

    def _new_block(self, index: int, kind: str) -> _Block:
        if len(self.blocks) >= self.limits.max_blocks and index not in self.blocks:
            raise _too_many("content blocks", "max_blocks", self.limits.max_blocks)
        if kind == "tool_use":
            self.tool_calls += 1
            if self.tool_calls > self.limits.max_tool_calls:
                raise _too_many("tool calls", "max_tool_calls", self.limits.max_tool_calls)
        entry = _Block(kind, Buffer(self.budget))
        if index not in self.blocks:
            self.order.append(index)
        self.blocks[index] = entry
        return entry

    def _continues(self, index: int, block: Mapping[str, Any]) -> bool:
        """A ``tool_use`` block with the id of the tool_use block just before it is the same
        call (LiteLLM streams one block per chunk, all with one id): its deltas go there."""
        if block.get("type") != "tool_use" or not block.get("id") or not self.order:
            return False
        last = self.blocks[self.order[-1]]
        if last.kind != "tool_use" or last.id != block.get("id"):
            return False
        if index in self.blocks:
            return self.blocks[index] is last
        if self.continued is not None:
            del self.blocks[self.continued]
        self.blocks[index] = last
        self.continued = index
        return True

    def add(self, kind: str, data: Mapping[str, Any]) -> tuple[str, str]:
        """Fold one event in; returns the new (text, thinking) pieces it carried."""
        if kind == "message_start":
            self.started = True
            message = opt_dict(data.get("message"), "message")
            if isinstance(message.get("model"), str):
                self.model = message["model"]
            if isinstance(message.get("id"), str):
                self.response_id = message["id"]
            merge_usage_fields(self.usage, opt_dict(message.get("usage"), "message.usage"))
        elif kind == "content_block_start":
            index = _index(data.get("index"), len(self.order))
            block = opt_dict(data.get("content_block"), "content_block")
            if self._continues(index, block):
                return "", ""
            self.continued = None
            entry = self._new_block(index, _str(block.get("type"), "content_block.type"))
            entry.id = _str(block.get("id"), "content_block.id")
            entry.name = _str(block.get("name"), "content_block.name")
            entry.initial_input = block.get("input")
            entry.start = dict(block)
            if entry.kind == "text" and block.get("text"):
                entry.text.append(_str(block["text"], "content_block.text"))
            if entry.kind == "thinking" and block.get("thinking"):
                entry.text.append(_str(block["thinking"], "content_block.thinking"))
            if entry.kind == "thinking" and block.get("signature"):
                entry.signature = Buffer(self.budget)
                entry.signature.append(_str(block["signature"], "content_block.signature"))
        elif kind == "content_block_delta":
            index = _index(data.get("index"), -1)
            delta = opt_dict(data.get("delta"), "delta")
            entry = self.blocks.get(index) or self._new_block(index, "text")
            delta_type = delta.get("type")
            if delta_type in ("text_delta", "thinking_delta"):
                key = "text" if delta_type == "text_delta" else "thinking"
                piece = _str(delta.get(key), f"delta.{key}")
                entry.text.append(piece)
                # Streamed as what its block is: the deltas add up to the answer's parts.
                if entry.kind == "text":
                    return piece, ""
                return ("", piece) if entry.kind == "thinking" else ("", "")
            if delta_type == "signature_delta":
                if entry.signature is None:
                    entry.signature = Buffer(self.budget)
                entry.signature.append(_str(delta.get("signature"), "delta.signature"))
                return "", ""
            if delta_type == "citations_delta":
                if len(entry.citations) >= self.limits.max_blocks:
                    raise _too_many("citations", "max_blocks", self.limits.max_blocks)
                entry.citations.append(delta.get("citation"))
                return "", ""
            if delta_type == "input_json_delta":
                part = _str(delta.get("partial_json"), "delta.partial_json")
                if entry.json_parts is None:
                    entry.json_parts = Buffer(self.budget)
                if len(entry.json_parts) + len(part) > self.limits.max_argument_bytes:
                    raise TooLarge(
                        "max_argument_bytes",
                        f"a tool call's arguments exceed {self.limits.max_argument_bytes} bytes",
                    )
                entry.json_parts.append(part)
        elif kind == "message_delta":
            delta = opt_dict(data.get("delta"), "delta")
            reason = opt_str(delta.get("stop_reason"), "delta.stop_reason")
            if reason:
                self.stop_reason = reason
            merge_usage_fields(self.usage, opt_dict(data.get("usage"), "usage"))
        elif kind == "message_stop":
            self.stopped = True
        return "", ""

    def result(self) -> ChatResult:
        """The accumulated answer."""
        text: list[str] = []
        thinking: list[str] = []
        kept: list[dict[str, Any]] = []
        calls: list[ToolCall] = []
        seen: set[str] = set()
        limits = self.limits
        for index in self.order:
            block = self.blocks[index]
            if block.kind == "text":
                text.append(block.text.text())
            elif block.kind in REASONING_BLOCKS:
                if block.kind == "thinking":
                    thinking.append(block.text.text())
                    signature = block.signature.text() if block.signature is not None else ""
                    item = reasoning_item(block.kind, thinking[-1], signature)
                else:
                    item = reasoning_item(block.kind, _str(block.start.get("data"), "data"))
                kept += [item] if item is not None else []
            elif block.kind == "tool_use":
                raw = block.json_parts.text() if block.json_parts is not None else ""
                source: Any = raw if raw.strip() else block.initial_input
                arguments, bad = decode_arguments(
                    source, limits.max_json_depth, limits.max_argument_bytes
                )
                args = bad if bad is not None else json.dumps(arguments, sort_keys=True)
                call_id = unique_call_id(block.id, len(calls), block.name, args, seen)
                calls.append(ToolCall(call_id, block.name, arguments, raw_arguments=bad))
        reply = AssistantMessage(
            "".join(text),
            tool_calls=calls,
            reasoning="".join(thinking) or None,
            reasoning_items=kept,
        )
        finish, raw_reason = normalize_finish(self.stop_reason, bool(calls))
        return ChatResult(
            reply, anthropic_usage(self.usage), finish, self.model, self.response_id, raw_reason
        )

    def content(self) -> list[dict[str, Any]]:
        """The reply's content blocks as the Messages API returned them, rebuilt from the
        events (text with its citations, thinking with its signature, tool inputs, server
        tool blocks as they started): what a ``pause_turn`` continuation sends back."""
        out: list[dict[str, Any]] = []
        for index in self.order:
            block = self.blocks[index]
            wire = dict(block.start)
            wire.setdefault("type", block.kind)
            if block.kind == "text":
                wire["text"] = block.text.text()
                if block.citations:
                    wire["citations"] = list(block.citations)
            elif block.kind == "thinking":
                wire["thinking"] = block.text.text()
                if block.signature is not None:
                    wire["signature"] = block.signature.text()
            elif block.json_parts is not None and block.json_parts.text().strip():
                arguments, bad = decode_arguments(
                    block.json_parts.text(), self.limits.max_json_depth
                )
                wire["input"] = arguments if bad is None else {}
            out.append(wire)
        return out

    @property
    def empty(self) -> bool:
        """Nothing usable arrived."""
        return not self.order and self.stop_reason is None


def encode(data: Any) -> str:
    """Compact JSON (used for error bodies in tests)."""
    return json.dumps(data, separators=(",", ":"))
