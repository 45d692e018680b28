"""A scripted endpoint that answers both wires the way LiteLLM's proxy in front of
llama-cpp-python does, one flag per behaviour, with prompt tokens counted from the request.

Each flag's default is the proxy's behaviour; ``False`` is what a correct server does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentfsm.conformance._frames import DONE, chunk, completion, event, tool_delta
from agentfsm.testing import Reply
from agentfsm.testing._fake_server import RecordedRequest

__all__ = ["Proxy", "TOOL_TOKENS", "answer"]

TOOL_TOKENS = 180
"""The prompt tokens a tool's schema adds once it reaches the template."""


@dataclass(frozen=True)
class Proxy:
    """How the endpoint behaves: LiteLLM's defaults, a correct server with every flag off."""

    tools_need_choice: bool = True
    """Tools reach the prompt only when ``tool_choice`` is sent (llama-cpp-python's format)."""
    blocks_as_repr: bool = True
    """Messages content blocks reach the template as the list's Python repr."""
    empty_auto_stream: bool = True
    """A streamed request with ``tool_choice: auto`` gets a clean empty answer."""
    calls_tools: bool = True
    """The model calls the tool it sees (off: it always answers in text)."""
    one_block_per_chunk: bool = True
    """A streamed Messages tool call: one ``tool_use`` block per fragment, one id."""
    invented_stream_usage: bool = True
    """Streamed usage is counted by the proxy (7 more prompt tokens than the model's)."""
    status: int | None = None
    """Every request gets this status with a plain error body (a server that fails)."""
    rejects_ids_over: int | None = None
    """A 400 for any tool-call id longer than this."""
    rejects_tool_history: bool = False
    """A 400 for any history with an assistant tool-call turn."""
    empty_everything: bool = False
    """Every answer is empty (finish 'stop', no text, no call)."""
    needs_assistant_text: bool = False
    """A 500 for a Messages assistant turn of tool_use blocks alone (LiteLLM sends the turn
    upstream without content, and llama-cpp-python's template needs it)."""
    drops_tool_results: bool = False
    """Tool results never reach the prompt (llama-cpp-python's template renders no tool
    message); off by default so that the other verdicts show."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return " ".join(str(p.get("text") or p.get("content") or "") for p in parts)


def _prompt_tokens(proxy: Proxy, wire: str, body: dict[str, Any]) -> int:
    count = 10 + len(_text(body.get("system") or "").split())
    for message in body["messages"]:
        content = message.get("content") or ""
        if proxy.drops_tool_results and _is_result(message):
            continue
        if wire == "anthropic" and proxy.blocks_as_repr and isinstance(content, list):
            count += len(str(content)) // 2
        else:
            count += len(_text(content).split())
    if _sees_tools(proxy, body):
        count += TOOL_TOKENS
    return count


def _is_result(message: dict[str, Any]) -> bool:
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return message["role"] == "tool" or any(b.get("type") == "tool_result" for b in blocks)


def _sees_tools(proxy: Proxy, body: dict[str, Any]) -> bool:
    choice = body.get("tool_choice")
    if not body.get("tools") or choice in ("none", {"type": "none"}):
        return False
    return choice is not None or not proxy.tools_need_choice


def _calls(proxy: Proxy, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    last = body["messages"][-1]
    if not proxy.calls_tools or not _sees_tools(proxy, body) or last["role"] != "user":
        return []
    if isinstance(last["content"], list) and any(
        p.get("type") == "tool_result" for p in last["content"]
    ):
        return []
    prompt = _text(last["content"])
    if "time" in prompt:
        return [("get_time", {})]
    return [("get_weather", {"city": "東京" if "東京" in prompt else "Paris"})]


def _reply_text(body: dict[str, Any]) -> str:
    prompt = _text(body["messages"][-1]["content"])
    return "PONG" if "PONG" in prompt else "It is sunny in Paris."


def _rejection(proxy: Proxy, body: dict[str, Any]) -> Reply | None:
    if proxy.status is not None:
        return Reply.json({"error": {"message": "Internal Server Error"}}, proxy.status)
    ids = [str(c.get("id")) for m in body["messages"] for c in m.get("tool_calls") or []]
    ids += [
        str(b.get("id"))
        for m in body["messages"]
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    bare_turns = [
        m
        for m in body["messages"]
        if m["role"] == "assistant"
        and isinstance(m.get("content"), list)
        and all(b.get("type") == "tool_use" for b in m["content"])
    ]
    if proxy.needs_assistant_text and bare_turns:
        message = "litellm.InternalServerError: 'dict object' has no attribute 'content'"
        return Reply.json(
            {"type": "error", "error": {"type": "api_error", "message": message}}, 500
        )
    if proxy.rejects_tool_history and ids:
        return Reply.json({"error": {"message": "tool-call turns are not supported"}}, 400)
    limit = proxy.rejects_ids_over
    if limit is not None and any(len(i) > limit for i in ids):
        message = f"Invalid 'tool_call_id': string too long, maximum length {limit}"
        return Reply.json({"error": {"message": message}}, 400)
    return None


def answer(proxy: Proxy, request: RecordedRequest) -> Reply:
    """The proxy's reply to ``request`` (Chat Completions or Messages, by its path)."""
    body: dict[str, Any] = request.json()
    wire = "anthropic" if request.path.endswith("/messages") else "openai-chat"
    rejected = _rejection(proxy, body)
    if rejected is not None:
        return rejected
    prompt = _prompt_tokens(proxy, wire, body)
    calls = [] if proxy.empty_everything else _calls(proxy, body)
    text = "" if proxy.empty_everything or calls else _reply_text(body)
    choice = body.get("tool_choice")
    auto = choice in ("auto", {"type": "auto"})
    if proxy.empty_auto_stream and body.get("stream") and body.get("tools") and auto:
        calls, text = [], ""
    if wire == "anthropic":
        return _messages(proxy, body, prompt, text, calls)
    return _chat(proxy, body, prompt, text, calls)


def _chat(
    proxy: Proxy, body: dict[str, Any], prompt: int, text: str, calls: list[tuple[str, Any]]
) -> Reply:
    out = len(text.split()) + 4 * len(calls)
    usage = {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out}
    finish = "tool_calls" if calls else "stop"
    wire_calls: list[dict[str, Any]] = [
        {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(calls)
    ]
    if not body.get("stream"):
        message: dict[str, Any] = {
            "role": "assistant",
            "content": (text or None) if calls else text,
        }
        if wire_calls:
            message["tool_calls"] = wire_calls
        return Reply.json(completion(message, finish=finish, usage=usage))
    if not text and not calls:  # LiteLLM's rendering of an empty upstream stream, as sent
        return Reply.sse([chunk({}, finish="stop"), chunk({}), DONE])
    frames = [chunk({"role": "assistant", "content": text})]
    frames += [
        chunk(tool_delta(i, f"call_{i}", name, json.dumps(arguments)))
        for i, (name, arguments) in enumerate(calls)
    ]
    frames.append(chunk({}, finish=finish))
    if (body.get("stream_options") or {}).get("include_usage"):
        extra = 7 if proxy.invented_stream_usage else 0
        counted = {**usage, "prompt_tokens": prompt + extra, "total_tokens": prompt + extra + out}
        frames.append(chunk(choices=False, usage=counted))
    return Reply.sse([*frames, DONE])


def _messages(
    proxy: Proxy, body: dict[str, Any], prompt: int, text: str, calls: list[tuple[str, Any]]
) -> Reply:
    empty = not text and not calls
    out = 0 if empty else len(text.split()) + 4 * len(calls)
    stop = "tool_use" if calls else "end_turn"
    if not body.get("stream"):
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [
            {"type": "tool_use", "id": f"toolu_{i}", "name": n, "input": a}
            for i, (n, a) in enumerate(calls)
        ]
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m"}
        usage = {"input_tokens": prompt, "output_tokens": out}
        return Reply.json({**message, "content": content, "stop_reason": stop, "usage": usage})
    counted = 0 if empty else prompt + (7 if proxy.invented_stream_usage else 0)
    start = {"id": "msg_1", "model": "m", "usage": {"input_tokens": counted, "output_tokens": 0}}
    frames = [event("message_start", {"message": start})]
    index = 0
    if text or empty:
        block = {"type": "text", "text": ""}
        frames.append(event("content_block_start", {"index": 0, "content_block": block}))
        if text:
            delta = {"type": "text_delta", "text": text}
            frames.append(event("content_block_delta", {"index": 0, "delta": delta}))
        frames.append(event("content_block_stop", {"index": 0}))
        index = 1
    for i, (name, arguments) in enumerate(calls):
        raw = json.dumps(arguments, ensure_ascii=False)
        pieces = [raw[j : j + 4] for j in range(0, len(raw), 4)]
        groups = [[p] for p in pieces] if proxy.one_block_per_chunk else [pieces]
        for group in groups:
            use = {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {}}
            frames.append(event("content_block_start", {"index": index, "content_block": use}))
            for piece in group:
                delta = {"type": "input_json_delta", "partial_json": piece}
                frames.append(event("content_block_delta", {"index": index, "delta": delta}))
            frames.append(event("content_block_stop", {"index": index}))
            index += 1
    usage = {"output_tokens": out}
    frames.append(event("message_delta", {"delta": {"stop_reason": stop}, "usage": usage}))
    frames.append(event("message_stop", {}))
    return Reply.sse(frames)
