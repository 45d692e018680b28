"""The second reading of the Anthropic Messages wire: a message body, or its event stream
(content blocks by index; LiteLLM's one call split over blocks of one id). Signed thinking
blocks and redacted thinking are the answer's reasoning items: what the next request must
send back."""

from __future__ import annotations

from typing import Any

from agentfsm.adapters.providers import RecordedResponse

from ._common import (
    LIMITS,
    Answer,
    Bad,
    Event,
    Failure,
    Large,
    Unsettled,
    anthropic_usage,
    as_array,
    as_object,
    as_text,
    calls_of,
    empty_answer,
    failed,
    finish_of,
    malformed,
    merge,
    named,
    payloads,
    stream_error,
)

__all__ = ["messages_body", "messages_stream"]


def messages_body(response: RecordedResponse, data: dict[str, Any]) -> Answer | Failure:
    if data.get("type") == "error":
        return failed(response, data)
    blocks = [b for b in as_array(data.get("content"), "content") if isinstance(b, dict)]
    if len(blocks) > LIMITS.max_blocks:
        raise Large("max_blocks")
    text = "".join(as_text(b.get("text"), "text") or "" for b in blocks if b.get("type") == "text")
    reasoning = "".join(
        as_text(b.get("thinking"), "thinking") or "" for b in blocks if b.get("type") == "thinking"
    )
    items = [
        _kept(b["type"], as_text(b.get(_CONTENT[b["type"]]), b["type"]) or "", _signature(b))
        for b in blocks
        if b.get("type") in _CONTENT
    ]
    uses = [b for b in blocks if b.get("type") == "tool_use"]
    calls = calls_of(
        [
            (as_text(b.get("id"), "id"), as_text(b.get("name"), "name") or "", b.get("input"))
            for b in uses
        ]
    )
    return Answer(
        text,
        reasoning or None,
        tuple(item for item in items if item is not None),
        calls,
        *finish_of(as_text(data.get("stop_reason"), "stop_reason"), calls),
        anthropic_usage(as_object(data.get("usage"), "usage")),
        named(data.get("id")),
        named(data.get("model")),
    )


_CONTENT = {"thinking": "thinking", "redacted_thinking": "data"}
"""The reasoning blocks an answer keeps to send back, and the field holding their content."""


def _signature(block: dict[str, Any]) -> str:
    """A thinking block's signature (none given: ``""``)."""
    given = block.get("signature") if block.get("type") == "thinking" else None
    return (as_text(given, "signature") or "") if given else ""


def _kept(kind: str, content: str, signature: str) -> dict[str, Any] | None:
    """A reasoning block as the next request must send it back: a thinking block with its
    signature (one without cannot go back: nothing), a redacted one with its data."""
    if kind == "redacted_thinking":
        return {"type": kind, "data": content}
    if not signature:
        return None
    return {"type": kind, "thinking": content, "signature": signature}


def _index(payload: dict[str, Any], default: int) -> int:
    index = payload.get("index")
    if index is None:
        return default
    if isinstance(index, bool) or not isinstance(index, int):
        raise Bad("index is not an integer")
    return index


def messages_stream(response: RecordedResponse, text: str) -> Answer | Failure:
    model = ident = reason = None
    usage: dict[str, Any] = {}
    blocks: dict[Any, dict[str, Any]] = {}  # index -> {type, text, id, name, json, input}
    order: list[Any] = []
    said_any = stopped = False

    def block(index: Any, kind: str) -> dict[str, Any]:
        if index not in blocks:
            order.append(index)
            if len(order) > LIMITS.max_blocks:
                raise Large("max_blocks")
        blocks[index] = {"type": kind, "text": [], "json": []}
        return blocks[index]

    def stops(event: Event) -> bool:
        return isinstance(event.payload, dict) and _kind(event) == "message_stop"

    for event in payloads(text, stops, "a frame"):
        if isinstance(event, str):
            return malformed(said_any)
        payload = event.payload
        if not isinstance(payload, dict):
            continue
        kind = _kind(event)
        if kind == "ping":
            continue
        if kind == "error" or payload.get("type") == "error":
            return stream_error(payload, response, said_any)
        if kind == "message_start":
            message = as_object(payload.get("message"), "message")
            model = message["model"] if isinstance(message.get("model"), str) else model
            ident = message["id"] if isinstance(message.get("id"), str) else ident
            merge(usage, as_object(message.get("usage"), "usage"))
        elif kind == "content_block_start":
            index = _index(payload, len(order))
            started = as_object(payload.get("content_block"), "content_block")
            last = blocks[order[-1]] if order else None
            same_call = (
                started.get("type") == "tool_use"
                and started.get("id")
                and last is not None
                and last["type"] == "tool_use"
                and last.get("id") == started.get("id")
            )
            if index in blocks and not (same_call and blocks[index] is last):
                raise Unsettled(f"a second content block started at index {index}")
            if same_call and last is not None:  # LiteLLM: one call in several blocks
                blocks[index] = last
                continue
            entry = block(index, as_text(started.get("type"), "type") or "")
            entry["id"] = as_text(started.get("id"), "id") or ""
            entry["name"] = as_text(started.get("name"), "name") or ""
            entry["input"] = started.get("input")
            entry["signature"] = [_signature(started)] if entry["type"] == "thinking" else []
            if entry["type"] in ("text", "thinking"):
                entry["text"] = [as_text(started.get(entry["type"]), entry["type"]) or ""]
            if entry["type"] == "redacted_thinking":  # whole in its start: no delta adds to it
                entry["data"] = as_text(started.get("data"), "data") or ""
        elif kind == "content_block_delta":
            index = _index(payload, -1)
            delta = as_object(payload.get("delta"), "delta")
            entry = blocks.get(index) or block(index, "text")
            part = delta.get("type")
            if part == "text_delta":
                entry["text"].append(as_text(delta.get("text"), "text") or "")
                said_any = said_any or bool(delta.get("text"))
            elif part == "thinking_delta":
                entry["text"].append(as_text(delta.get("thinking"), "thinking") or "")
                said_any = said_any or bool(delta.get("thinking"))
            elif part == "signature_delta":
                entry.setdefault("signature", []).append(
                    as_text(delta.get("signature"), "signature") or ""
                )
            elif part == "input_json_delta":
                entry["json"].append(as_text(delta.get("partial_json"), "partial_json") or "")
        elif kind == "message_delta":
            delta = as_object(payload.get("delta"), "delta")
            reason = as_text(delta.get("stop_reason"), "stop_reason") or reason
            merge(usage, as_object(payload.get("usage"), "usage"))
        elif kind == "message_stop":
            stopped = True
    if not order and reason is None:
        return empty_answer(response)
    if not stopped and reason is None:
        return Failure("connection", None, not said_any, "a stream cut before message_stop")
    entries = [blocks[i] for i in dict.fromkeys(order) if i in blocks]
    unique = list({id(e): e for e in entries}.values())
    text_out = "".join("".join(e["text"]) for e in unique if e["type"] == "text")
    thinking = "".join("".join(e["text"]) for e in unique if e["type"] == "thinking")
    items = [
        _kept(e["type"], e.get("data", "".join(e["text"])), "".join(e.get("signature", [])))
        for e in unique
        if e["type"] in _CONTENT
    ]
    found = [
        (e["id"], e["name"], "".join(e["json"]) if "".join(e["json"]).strip() else e["input"])
        for e in unique
        if e["type"] == "tool_use"
    ]
    calls = calls_of(found)
    return Answer(
        text_out,
        thinking or None,
        tuple(item for item in items if item is not None),
        calls,
        *finish_of(reason, calls),
        anthropic_usage(usage),
        ident,
        model,
    )


def _kind(event: Event) -> str:
    """A Messages event's type: its SSE event name, else its payload's ``type``."""
    if event.kind and event.kind != "message":
        return event.kind
    payload = event.payload
    return str(payload.get("type", "")) if isinstance(payload, dict) else ""
