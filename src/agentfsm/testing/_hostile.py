"""Payloads a hostile provider sends, for :class:`~agentfsm.testing.FakeProviderServer`.

Each builder returns a :class:`~agentfsm.testing.Reply` (or the JSON text of one) that tries to
hang, bloat or crash a client: keep-alives forever, huge lines, gzip bombs, JSON nested
10,000 deep, valid JSON of the wrong types, thousands of tool calls, keys echoed back.
"""

from __future__ import annotations

import functools
import json
import zlib
from typing import Any, Literal

from ._fake_server import Filler, Frame, Repeat, Reply

__all__ = [
    "WRONG_TYPES_ANTHROPIC",
    "WRONG_TYPES_OPENAI",
    "deep_json",
    "echo_key_error",
    "gzip_bomb",
    "huge_line",
    "keep_alive",
    "many_tool_calls",
]


def deep_json(depth: int, inner: str = "1") -> str:
    """``[[[…1…]]]`` nested ``depth`` levels (valid JSON that recursive parsers choke on)."""
    return "[" * depth + inner + "]" * depth


def keep_alive(
    frame: str = ": keep-alive\n\n", *, interval: float = 0.05, first: str | None = None
) -> Reply:
    """A 200 stream that sends ``first`` (if given) and then ``frame`` forever.

    Useful frames: ``": ping\\n\\n"`` (a comment), ``"data: \\n\\n"`` (empty data),
    ``"id: 7\\n\\n"`` (an ``id:``-only event), ``'data: {"choices": []}\\n\\n'``.
    """
    frames: list[Frame] = [first] if first else []
    frames.append(Repeat(frame, interval=interval))
    return Reply.sse(frames)


def huge_line(size: int, *, prefix: str = 'data: {"x": "', pattern: bytes = b"a") -> Reply:
    """A 200 stream whose first line is ``size`` bytes long and never ends."""
    return Reply.sse([prefix, Filler(size, pattern)])


@functools.lru_cache(maxsize=8)
def _bomb(expanded: int, pattern: bytes, prefix: bytes) -> bytes:
    packer = zlib.compressobj(9, wbits=31)
    piece = pattern * (1024 * 1024 // len(pattern))
    parts = [packer.compress(prefix)]
    left = expanded
    while left > 0:
        parts.append(packer.compress(piece[: min(left, len(piece))]))
        left -= len(piece)
    parts.append(packer.flush())
    return b"".join(parts)


def gzip_bomb(
    expanded: int,
    *,
    stream: bool = False,
    status: int = 200,
    pattern: bytes = b"a",
    prefix: bytes = b"",
) -> Reply:
    """A small gzip body (``content-encoding: gzip``) that inflates to ``expanded`` bytes of
    ``pattern`` after ``prefix`` (about 1,000 to 1: 1 GiB costs 1 MiB on the wire).

    ``stream``: a ``text/event-stream`` reply (its compressed bytes sent in 64 KiB chunks).
    """
    body = _bomb(expanded, pattern, prefix)
    headers = {"content-encoding": "gzip"}
    if not stream:
        reply = Reply.raw(body, status, {**headers, "content-type": "application/json"})
        return reply
    chunks: list[Frame] = [body[i : i + 65536] for i in range(0, len(body), 65536)]
    return Reply.sse(chunks, status, headers)


def many_tool_calls(
    count: int, *, stream: bool = False, wire: Literal["openai-chat", "anthropic"] = "openai-chat"
) -> Reply:
    """A reply holding ``count`` tool calls (streamed: one chunk or event per call)."""
    if wire == "anthropic":
        blocks = [
            {"type": "tool_use", "id": f"toolu_{n}", "name": "f", "input": {"n": n}}
            for n in range(count)
        ]
        if not stream:
            return Reply.json(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": blocks,
                    "stop_reason": "tool_use",
                }
            )
        frames: list[Frame] = [_event("message_start", {"message": {"usage": {}}})]
        for n, block in enumerate(blocks):
            frames.append(
                _event("content_block_start", {"index": n, "content_block": {**block, "input": {}}})
            )
        frames.append(_event("message_delta", {"delta": {"stop_reason": "tool_use"}}))
        frames.append(_event("message_stop", {}))
        return Reply.sse(frames)
    calls = [
        {"id": f"call_{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for n in range(count)
    ]
    if not stream:
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        return Reply.json(
            {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
        )
    frames = [
        _data({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": n, **call}]}}]})
        for n, call in enumerate(calls)
    ]
    frames.append(_data({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
    frames.append("data: [DONE]\n\n")
    return Reply.sse(frames)


def echo_key_error(key: str, status: int = 401, *, wire: str = "openai-chat") -> Reply:
    """An error reply that echoes ``key`` in its message, code and type."""
    error = {"message": f"Incorrect API key provided: {key}", "code": key, "type": key}
    if wire == "anthropic":
        return Reply.json({"type": "error", "error": error}, status)
    return Reply.json({"error": error}, status)


def _data(payload: Any) -> str:
    return f"data: {json.dumps(payload)}\n\n"


def _event(kind: str, payload: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n"


WRONG_TYPES_OPENAI: tuple[Any, ...] = (
    {"choices": "abc"},
    {"choices": [1]},
    {"choices": [{"message": "hi"}]},
    {"choices": [{"message": {"content": 5}}]},
    {"choices": [{"message": {"content": "x", "tool_calls": "abc"}}]},
    {"choices": [{"message": {"tool_calls": [1]}}]},
    {"choices": [{"message": {"tool_calls": [{"function": "f"}]}}]},
    {"choices": [{"message": {"tool_calls": [{"function": {"name": 5, "arguments": "{}"}}]}}]},
    {"choices": [{"message": {"content": "x"}, "finish_reason": 7}]},
    {"choices": [{"message": {"content": "x", "reasoning_content": {"a": 1}}}]},
    {"choices": [{"message": {"content": [{"type": "text", "text": {"a": 1}}]}}]},
    {"choices": [{"message": {"content": "x"}}], "usage": "lots"},
    {"choices": [{"message": {"content": "x"}}], "x_groq": "x"},
    [1, 2, 3],
    "just a string",
    12,
)
"""Valid JSON bodies of the wrong types for Chat Completions."""

WRONG_TYPES_ANTHROPIC: tuple[Any, ...] = (
    {"type": "message", "content": "abc"},
    {"type": "message", "content": [{"type": "text", "text": 5}]},
    {"type": "message", "content": [{"type": "thinking", "thinking": []}]},
    {"type": "message", "content": [{"type": "tool_use", "id": 5, "name": "f", "input": {}}]},
    {"type": "message", "content": [{"type": "tool_use", "id": "t", "name": ["f"], "input": {}}]},
    {"type": "message", "content": [{"type": "text", "text": "x"}], "stop_reason": ["x"]},
    {"type": "message", "content": [{"type": "text", "text": "x"}], "usage": "x"},
    [1, 2, 3],
    "just a string",
    None,
)
"""Valid JSON bodies of the wrong types for the Messages API."""
