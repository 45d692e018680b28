"""Handlers for FakeProviderServer that behave like a small model behind a server, on both
wires, with the faults ``conformance probe`` must find (as llama-cpp-python and LiteLLM in
front of it show them)."""

from __future__ import annotations

import json
from typing import Any

from attrs import define

from agentfsm.conformance._frames import DONE, chunk, completion, event, tool_delta
from agentfsm.testing import Reply
from agentfsm.testing._fake_server import RecordedRequest

__all__ = ["AnthropicServer", "OpenAIServer"]

SSE = {"content-type": "text/event-stream"}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text") or b.get("content") or "") for b in content)
    return ""


def prompt_tokens(body: dict[str, Any], tools_shown: bool, blocks_extra: int = 0) -> int:
    """What a tokenizer would count, roughly: 15 for the template, a token a word of every
    text in the request (tool results included), 80 for the tools when the model sees them,
    ``blocks_extra`` for each text block (a server that renders blocks as a repr)."""
    words = len(str(body.get("system") or "").split())
    blocks = 0
    for message in body.get("messages") or []:
        content = message.get("content")
        words += len(_text_of(content).split())
        if isinstance(content, list):
            blocks += sum(1 for b in content if b.get("type") == "text")
    return 15 + words + (80 if tools_shown else 0) + blocks * blocks_extra


@define
class _Model:
    """What the model answers: a tool call when a tool is shown and the last turn asks,
    else text."""

    def reply(self, body: dict[str, Any], tools_shown: bool) -> tuple[str, str | None]:
        """(text, name of the tool to call or None)."""
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        if last.get("role") == "tool" or (
            isinstance(last.get("content"), list)
            and any(b.get("type") == "tool_result" for b in last["content"])
        ):
            return "It is sunny in Paris, 21 °C.", None
        prompt = _text_of(last.get("content"))
        if tools_shown and body.get("tools"):
            first = body["tools"][0]
            return "", first.get("name") or first["function"]["name"]
        return ("PONG" if "PONG" in prompt else "Hi there."), None


def _arguments(name: str) -> str:
    return json.dumps({"city": "Paris"} if name == "get_weather" else {})


@define
class OpenAIServer:
    """A Chat Completions server."""

    key: str | None = None
    """Refuse other keys with LiteLLM's 400 ``No connected db.``."""
    tools_need_tool_choice: bool = False
    empty_auto_stream: bool = False
    """A streamed request showing tools with ``tool_choice: auto`` gets an empty 200 stream."""
    clean_empty_auto_stream: bool = False
    """… gets a clean empty answer (``finish_reason: stop``, no text, no call)."""
    rejects_null_content: bool = False
    rejects_stream_options: bool = False
    wants_max_completion_tokens: bool = False
    never_calls_tools: bool = False
    rejects_tool_history: bool = False
    """Refuses every history holding a tool call, whatever its content shape."""

    def __call__(self, request: RecordedRequest) -> Reply:
        if self.key is not None and request.headers.get("authorization") != f"Bearer {self.key}":
            error = {"message": "Authentication Error, No connected db.", "code": "400"}
            return Reply.json({"error": error}, 400)
        body: dict[str, Any] = request.json()
        if self.rejects_stream_options and "stream_options" in body:
            return Reply.json({"error": {"message": "unknown field stream_options"}}, 400)
        if self.wants_max_completion_tokens and "max_tokens" in body:
            message = "Use 'max_completion_tokens' instead of 'max_tokens'"
            return Reply.json({"error": {"message": message}}, 400)
        if self.rejects_tool_history and any(m.get("tool_calls") for m in body["messages"]):
            return Reply.json({"error": {"message": "tool calls are not supported"}}, 500)
        nulls = [m for m in body["messages"] if m["role"] == "assistant" and m["content"] is None]
        if self.rejects_null_content and nulls:
            return Reply.json({"detail": "content: Input should be a valid string"}, 500)
        shown = bool(body.get("tools")) and (
            "tool_choice" in body or not self.tools_need_tool_choice
        )
        text, call = _Model().reply(body, shown and not self.never_calls_tools)
        auto = shown and body.get("tool_choice") == "auto"
        usage = {"prompt_tokens": prompt_tokens(body, shown), "completion_tokens": 3}
        usage["total_tokens"] = usage["prompt_tokens"] + 3
        if body.get("stream"):
            if auto and self.empty_auto_stream:
                return Reply.raw(b"", headers=SSE)
            if auto and self.clean_empty_auto_stream:
                return Reply.sse([chunk({"role": "assistant"}), chunk({}, finish="stop"), DONE])
            if call is not None:
                delta = tool_delta(index=0, id="call_1", name=call, arguments=_arguments(call))
                return Reply.sse([chunk(delta), chunk({}, finish="tool_calls"), DONE])
            frames = [chunk({"content": text}), chunk({}, finish="stop")]
            if body.get("stream_options"):
                frames.append(chunk(choices=False, usage=usage))
            return Reply.sse([*frames, DONE])
        if call is not None:
            answer: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": call, "arguments": _arguments(call)},
                    }
                ],
            }
            return Reply.json(completion(answer, finish="tool_calls", usage=usage))
        return Reply.json(completion({"role": "assistant", "content": text}, usage=usage))


@define
class AnthropicServer:
    """A Messages server."""

    key: str | None = None
    tools_need_tool_choice: bool = False
    clean_empty_auto_stream: bool = False
    """A streamed request showing tools with ``tool_choice: auto`` gets an empty text block,
    ``end_turn`` and usage 0/0 (LiteLLM over llama.cpp's empty stream)."""
    blocks_inflate: bool = False
    """Text blocks reach the prompt as a Python repr: more prompt tokens than the string."""

    def __call__(self, request: RecordedRequest) -> Reply:
        if self.key is not None and request.headers.get("x-api-key") != self.key:
            error = {"type": "authentication_error", "message": "invalid x-api-key"}
            return Reply.json({"type": "error", "error": error}, 401)
        body: dict[str, Any] = request.json()
        shown = bool(body.get("tools")) and (
            "tool_choice" in body or not self.tools_need_tool_choice
        )
        text, call = _Model().reply(body, shown)
        prompt = prompt_tokens(body, shown, 45 if self.blocks_inflate else 0)
        auto = shown and body.get("tool_choice") == {"type": "auto"}
        usage = {"input_tokens": prompt, "output_tokens": 3}
        stop = "tool_use" if call is not None else "end_turn"
        if call is not None:
            content: list[dict[str, Any]] = [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": call,
                    "input": json.loads(_arguments(call)),
                }
            ]
        else:
            content = [{"type": "text", "text": text}]
        if not body.get("stream"):
            return Reply.json(
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "fake-model",
                    "content": content,
                    "stop_reason": stop,
                    "usage": usage,
                }
            )
        if auto and self.clean_empty_auto_stream:
            content, stop, usage = (
                [{"type": "text", "text": ""}],
                "end_turn",
                {
                    "input_tokens": 0,
                    "output_tokens": 0,
                },
            )
        start = {"message": {"id": "msg_1", "model": "fake-model", "usage": usage}}
        frames = [event("message_start", start)]
        for index, block in enumerate(content):
            if block["type"] == "text":
                frames.append(
                    event(
                        "content_block_start",
                        {"index": index, "content_block": {"type": "text", "text": ""}},
                    )
                )
                if block["text"]:
                    delta = {"type": "text_delta", "text": block["text"]}
                    frames.append(event("content_block_delta", {"index": index, "delta": delta}))
            else:
                opened = {**block, "input": {}}
                frames.append(
                    event("content_block_start", {"index": index, "content_block": opened})
                )
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                frames.append(event("content_block_delta", {"index": index, "delta": delta}))
            frames.append(event("content_block_stop", {"index": index}))
        final = {"delta": {"stop_reason": stop}, "usage": {"output_tokens": usage["output_tokens"]}}
        frames += [event("message_delta", final), event("message_stop", {})]
        return Reply.sse(frames)
