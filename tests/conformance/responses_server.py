"""A scripted OpenAI Responses endpoint that answers from the request, like a model would.

Written by the project for the tests (not a recording): text or function calls per the
prompt, streamed or not, usage, ``status: incomplete`` past ``max_output_tokens``, a 400
``context_length_exceeded`` past its window, a 401 for a wrong key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentfsm import AssistantMessage, ChatResult, ToolCall, Usage
from agentfsm.testing import Reply, responses_reply
from agentfsm.testing._fake_server import RecordedRequest

CITIES = ("Paris", "Tokyo", "東京")
WINDOW = 200


@dataclass(frozen=True)
class ResponsesServer:
    """The defaults answer correctly; each other value is one defect."""

    window: int | None = WINDOW
    """Prompts of more words than this get a 400 ``context_length_exceeded``."""
    ignores_max_tokens: bool = False
    """The whole answer, ``completed``, whatever ``max_output_tokens``."""
    drops_usage: bool = False
    """Usage is all zeros."""


def _error(status: int, code: str, message: str) -> Reply:
    kind = "invalid_request_error"
    return Reply.json({"error": {"message": message, "type": kind, "code": code}}, status)


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def _calls(body: dict[str, Any], prompt: str) -> list[ToolCall]:
    choice = body.get("tool_choice")
    if not body.get("tools") or choice == "none":
        return []
    forced = choice.get("name") if isinstance(choice, dict) else None
    if forced == "get_time" or (forced is None and "time" in prompt):
        return [ToolCall("call_0", "get_time", {})]
    if forced == "get_weather" or "weather" in prompt:
        cities = [city for city in CITIES if city in prompt]
        return [ToolCall(f"call_{i}", "get_weather", {"city": c}) for i, c in enumerate(cities)]
    return []


def answer(server: ResponsesServer, request: RecordedRequest) -> Reply:
    """What ``server`` sends back for ``request``."""
    if "wrong" in request.headers.get("authorization", ""):
        return _error(401, "invalid_api_key", "Incorrect API key provided.")
    body: dict[str, Any] = request.json()
    items = body["input"]
    words = sum(len(_text(item).split()) for item in items if "content" in item)
    words += len(str(body.get("instructions") or "").split())
    if server.window and words > server.window:
        return _error(400, "context_length_exceeded", "Your input exceeds the context window.")
    outputs: list[str] = []
    for item in reversed(items):
        if item.get("type") != "function_call_output":
            break
        outputs.insert(0, item["output"])
    prompt = _text(items[-1]) if not outputs else ""
    calls = [] if outputs else _calls(body, prompt)
    if outputs:
        text = " ".join(outputs)
    elif calls:
        text = ""
    elif "PONG" in prompt:
        text = "PONG"
    elif "Count" in prompt:
        text = ", ".join(str(i) for i in range(1, 101))
    else:
        text = "Hello! The sea is calm today."
    finish = "tool_calls" if calls else "stop"
    limit = body.get("max_output_tokens")
    pieces = text.split(" ")
    if limit and len(pieces) > limit and not server.ignores_max_tokens:
        text, finish = " ".join(pieces[:limit]), "length"
    output_tokens = len(text.split()) + 10 * len(calls)
    usage = Usage(0, 0) if server.drops_usage else Usage(words, output_tokens)
    result = ChatResult(AssistantMessage(text, tool_calls=calls), usage, finish, "fake-model")
    return responses_reply(result, stream=bool(body.get("stream")))
