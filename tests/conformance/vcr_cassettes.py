"""VCR.py cassettes the project records itself: real HTTP exchanges with a
:class:`~agentfsm.testing.FakeProviderServer`, written in the YAML shapes real recorders
write (vcrpy's, pydantic-ai's ``parsed_body``, Ruby VCR's ``base64_string``, older vcrpy's
``status_code`` and ``content`` for httpx)."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any, Literal

import httpx
import yaml

from agentfsm.conformance._frames import DONE, chunk, completion, data, event, tool_delta
from agentfsm.engine._messages import AssistantMessage, ChatResult, ToolCall, Usage
from agentfsm.testing import FakeProviderServer, Reply, responses_reply

Form = Literal["vcrpy", "pydantic-ai", "ruby", "vcrpy-httpx"]

KEY = "sk-test-DO-NOT-PRINT-7f3a9c1e5b2d4f6a8c0e"
"""The API key every recorded request carries (in headers a cassette keeps)."""

ANSWER = "Hel\u2028lo, wörld 🌍 — done"
"""A text answer with a line separator and characters of several UTF-8 lengths."""

_USAGE = {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}


def _utf8_event(kind: str, payload: dict[str, Any]) -> str:
    """An Anthropic SSE event with its text as raw UTF-8 (not ``\\u`` escapes), so the
    small-pieces delivery splits characters."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload}, ensure_ascii=False)}\n\n"


def _anthropic_stream(text: str) -> Reply:
    start = {"id": "msg_1", "model": "fake-model", "usage": {"input_tokens": 9, "output_tokens": 1}}
    return Reply.sse(
        [
            event("message_start", {"message": {"type": "message", "role": "assistant", **start}}),
            event(
                "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}
            ),
            *(
                event(
                    "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": p}}
                )
                for p in (text[:4], text[4:])
            ),
            event("content_block_stop", {"index": 0}),
            event(
                "message_delta",
                {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}},
            ),
            event("message_stop", {}),
        ]
    )


def scenarios() -> list[tuple[str, Reply]]:
    """(request path, reply) for each recorded exchange: both wires the project reads, text
    and tool calls, streamed and not, errors as a status and inside a 200 stream, a gzip
    body, a Responses exchange and one of another path."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_time", "arguments": '{"tz": "UTC"}'},
    }
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "get_time", "input": {"tz": "UTC"}}
    anthropic_tool = {
        "id": "msg_2",
        "type": "message",
        "role": "assistant",
        "model": "fake-model",
        "content": [{"type": "text", "text": "Checking."}, tool_use],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 20, "output_tokens": 7},
    }
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    return [
        (
            "/v1/chat/completions",
            Reply.sse(
                [
                    chunk({"role": "assistant", "content": ""}),
                    *(chunk({"content": p}) for p in (ANSWER[:5], ANSWER[5:])),
                    chunk({}, finish="stop"),
                    chunk(choices=False, usage=_USAGE),
                    DONE,
                ]
            ),
        ),
        (
            "/v1/chat/completions",
            Reply.json(
                completion(
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    finish="tool_calls",
                    usage=_USAGE,
                )
            ),
        ),
        (
            "/v1/chat/completions",
            Reply.sse(
                [
                    chunk(tool_delta(index=0, id="call_9", name="get_time", arguments="")),
                    chunk(tool_delta(index=0, arguments='{"tz": ')),
                    chunk(tool_delta(index=0, arguments='"UTC"}')),
                    chunk({}, finish="tool_calls"),
                    DONE,
                ]
            ),
        ),
        (
            "/v1/chat/completions",
            Reply.json(
                {
                    "error": {
                        "message": "Rate limit reached",
                        "type": "requests",
                        "code": "rate_limit_exceeded",
                    }
                },
                status=429,
            ),
        ),
        (
            "/v1/chat/completions",
            Reply.sse([data({"error": {"message": "upstream failed", "code": 502}}), DONE]),
        ),
        (
            "/v1/chat/completions",
            Reply.gzipped(Reply.json(completion({"role": "assistant", "content": ANSWER}))),
        ),
        ("/v1/messages", _anthropic_stream(ANSWER)),
        ("/v1/messages", Reply.json(anthropic_tool)),
        ("/v1/messages", Reply.json(overloaded, status=529)),
        ("/v1/responses", responses_reply(ANSWER)),
        ("/v1/models", Reply.json({"object": "list", "data": []})),
    ]


async def record(scripted: list[tuple[str, Reply]]) -> list[dict[str, Any]]:
    """Send one request per scenario to a fake server and keep what crossed the wire: the
    request, the status, the headers, and the body's bytes as they came (still encoded)."""
    out: list[dict[str, Any]] = []
    with FakeProviderServer() as server:
        async with httpx.AsyncClient(headers={"authorization": f"Bearer {KEY}"}) as client:
            for path, reply in scripted:
                server.enqueue(reply)
                body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
                async with client.stream("POST", server.base_url + path, json=body) as response:
                    raw = b"".join([piece async for piece in response.aiter_raw()])
                headers: dict[str, list[str]] = {}
                for name, value in response.headers.multi_items():
                    headers.setdefault(name, []).append(value)
                headers["set-cookie"] = [f"session={KEY}"]
                out.append(
                    {
                        "uri": str(response.request.url),
                        "request_body": json.dumps(body),
                        "status": response.status_code,
                        "message": response.reason_phrase,
                        "headers": headers,
                        "body": raw,
                    }
                )
    return out


def _response_body(recorded: dict[str, Any], form: Form) -> dict[str, Any]:
    raw: bytes = recorded["body"]
    encoded = "content-encoding" in recorded["headers"]
    if form == "vcrpy-httpx":  # older vcrpy: httpx's decoded content, as text
        return {"content": (gzip.decompress(raw) if encoded else raw).decode("utf-8")}
    if form == "ruby":
        if encoded:
            return {
                "body": {"encoding": "ASCII-8BIT", "base64_string": base64.b64encode(raw).decode()}
            }
        return {"body": {"encoding": "UTF-8", "string": raw.decode("utf-8")}}
    content_type = recorded["headers"].get("content-type", [""])[0]
    if form == "pydantic-ai" and not encoded and content_type.startswith("application/json"):
        return {"parsed_body": json.loads(raw)}
    return {"body": {"string": raw if encoded else raw.decode("utf-8")}}


def cassette(recorded: list[dict[str, Any]], form: Form = "vcrpy") -> dict[str, Any]:
    """The recorded exchanges as a cassette of ``form``."""
    interactions = []
    for item in recorded:
        request = {
            "body": item["request_body"],
            "headers": {"authorization": [f"Bearer {KEY}"], "content-type": ["application/json"]},
            "method": "POST",
            "uri": item["uri"],
        }
        status = {"code": item["status"], "message": item["message"]}
        response = {
            "headers": item["headers"],
            **({"status_code": item["status"]} if form == "vcrpy-httpx" else {"status": status}),
            **_response_body(item, form),
        }
        interactions.append({"request": request, "response": response})
    return {"interactions": interactions, "version": 1}


def write(path: Path, content: dict[str, Any]) -> Path:
    """A cassette file as vcrpy writes it (``!!binary`` for bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(content, allow_unicode=True), "utf-8")
    return path


def _rich_result() -> ChatResult:
    """A Responses answer with every part a reply can hold."""
    calls = (
        ToolCall("call_a", "get_time", {"tz": "UTC"}),
        ToolCall("call_b", "read_file", {"path": "a.txt", "limit": 5, "all": True, "ratio": 0.5}),
    )
    message = AssistantMessage(
        ANSWER,
        tool_calls=calls,
        reasoning="Thinking it over",
        reasoning_items=({"type": "reasoning", "encrypted_content": "gAAAA-opaque"},),
    )
    usage = Usage(40, 12, cache_read_tokens=30, reasoning_tokens=4)
    return ChatResult(message, usage, "tool_calls", "fake-model", "resp_rich")


def rich_scenarios() -> list[tuple[str, Reply]]:
    """Replies that between them carry every field an answer has: reasoning and reasoning
    items (Responses items, Anthropic's signed and redacted thinking), several calls (ids
    given and missing, arguments that are not JSON, arguments holding a number, a whole
    number and a boolean), an unknown
    finish reason (kept raw), every usage count, and errors retryable and not, from an
    HTTP status and inside a 200 stream after some text."""
    usage = {
        "prompt_tokens": 50,
        "completion_tokens": 20,
        "total_tokens": 70,
        "prompt_tokens_details": {"cached_tokens": 30, "cache_write_tokens": 10},
        "completion_tokens_details": {"reasoning_tokens": 6},
    }
    chat_stream = Reply.sse(
        [
            chunk({"role": "assistant", "reasoning_content": "Let me "}),
            chunk({"reasoning_content": "think."}),
            chunk({"content": ANSWER}),
            chunk(tool_delta(index=0, id="call_1", name="get_time", arguments='{"tz": ')),
            chunk(tool_delta(index=0, arguments='"UTC"}')),
            chunk(tool_delta(index=1, id="call_2", name="read_file", arguments='{"path"')),
            chunk(
                tool_delta(index=1, arguments=': "a.txt", "limit": 5, "all": true, "ratio": 0.5}')
            ),
            chunk({}, finish="tool_calls"),
            chunk(choices=False, usage=usage),
            DONE,
        ]
    )
    odd_calls = [
        {"id": "", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
        {"id": "call_x", "type": "function", "function": {"name": "run", "arguments": "ls -l"}},
    ]
    chat_odd = Reply.json(
        completion(
            {
                "role": "assistant",
                "content": "Calling.",
                "reasoning": "Short.",
                "tool_calls": odd_calls,
            },
            finish="MALFORMED_FUNCTION_CALL",
            usage=usage,
        )
    )
    anthropic_usage = {
        "input_tokens": 9,
        "output_tokens": 1,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 20,
    }
    start = {"id": "msg_9", "model": "fake-model", "usage": anthropic_usage}
    anthropic_stream = Reply.sse(
        [
            event("message_start", {"message": {"type": "message", "role": "assistant", **start}}),
            event(
                "content_block_start",
                {"index": 0, "content_block": {"type": "thinking", "thinking": ""}},
            ),
            event(
                "content_block_delta",
                {"index": 0, "delta": {"type": "thinking_delta", "thinking": "Hmm."}},
            ),
            event(
                "content_block_delta",
                {"index": 0, "delta": {"type": "signature_delta", "signature": "sig"}},
            ),
            event("content_block_stop", {"index": 0}),
            event(
                "content_block_start",
                {"index": 1, "content_block": {"type": "redacted_thinking", "data": "EmwKAhgB"}},
            ),
            event("content_block_stop", {"index": 1}),
            event(
                "content_block_start", {"index": 2, "content_block": {"type": "text", "text": ""}}
            ),
            event(
                "content_block_delta", {"index": 2, "delta": {"type": "text_delta", "text": ANSWER}}
            ),
            event("content_block_stop", {"index": 2}),
            event(
                "content_block_start",
                {
                    "index": 3,
                    "content_block": {
                        "type": "tool_use",
                        "id": "toolu_9",
                        "name": "get_time",
                        "input": {},
                    },
                },
            ),
            event(
                "content_block_delta",
                {"index": 3, "delta": {"type": "input_json_delta", "partial_json": '{"tz":'}},
            ),
            event(
                "content_block_delta",
                {"index": 3, "delta": {"type": "input_json_delta", "partial_json": ' "UTC"}'}},
            ),
            event("content_block_stop", {"index": 3}),
            event(
                "message_delta",
                {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 33}},
            ),
            event("message_stop", {}),
        ]
    )
    paused = {
        "id": "msg_p",
        "type": "message",
        "role": "assistant",
        "model": "fake-model",
        "content": [{"type": "text", "text": "Searching first."}],
        "stop_reason": "pause_turn",
        "usage": {"input_tokens": 12, "output_tokens": 4},
    }
    rich = _rich_result()
    cut = ChatResult(AssistantMessage("Cut sh"), Usage(5, 64), "length", "fake-model", "resp_cut")
    limited = {
        "error": {
            "message": "Rate limit reached",
            "type": "requests",
            "code": "rate_limit_exceeded",
        }
    }
    invalid = {
        "error": {"message": "Unknown parameter", "type": "invalid_request_error", "code": None}
    }
    return [
        ("/v1/chat/completions", chat_stream),
        ("/v1/chat/completions", chat_odd),
        ("/v1/messages", anthropic_stream),
        ("/v1/messages", Reply.json(paused)),
        ("/v1/responses", responses_reply(rich)),
        ("/v1/responses", responses_reply(rich, stream=False)),
        ("/v1/responses", responses_reply(cut, stream=False)),
        ("/v1/chat/completions", Reply.json(limited, status=429, headers={"retry-after": "1"})),
        ("/v1/responses", Reply.json(invalid, status=400)),
        (
            "/v1/chat/completions",
            Reply.sse(
                [
                    chunk({"content": "Partial"}),
                    data({"error": {"message": "upstream failed", "code": 502}}),
                ]
            ),
        ),
    ]
