"""The kit's raw requests on the OpenAI Responses wire.

A live check writes its raw probes once, in the Chat Completions shape (the Messages wire
has its own branches). On the Responses wire :func:`as_responses` turns such a body into the
request ``OpenAIResponses`` would send for it: system messages into ``instructions``, turns
into ``input`` items (tool calls as ``function_call``, results as
``function_call_output``), flat tools, ``max_output_tokens``, ``store: false``. A body that
already has ``input`` is sent as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["as_responses", "usage_prompt_keys"]


def _content(content: Any, role: str) -> Any:
    """A message content: a string stays; text parts become the wire's own text parts."""
    if not isinstance(content, list):
        return content if content is not None else ""
    kind = "output_text" if role == "assistant" else "input_text"
    return [
        {**part, "type": kind} if isinstance(part, Mapping) and part.get("type") == "text" else part
        for part in content
    ]


def _items(messages: list[Any]) -> tuple[str | None, list[dict[str, Any]]]:
    system: list[str] = []
    items: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        content = message.get("content")
        if role == "system" and not items and isinstance(content, str):
            system.append(content)
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id"),
                    "output": content if isinstance(content, str) else str(content),
                }
            )
        else:
            if content or role != "assistant":
                items.append({"role": role, "content": _content(content, str(role))})
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.get("id"),
                        "name": function.get("name"),
                        "arguments": function.get("arguments"),
                    }
                )
    return ("\n\n".join(system) if system else None), items


def _tool(tool: Any) -> Any:
    if isinstance(tool, Mapping) and isinstance(tool.get("function"), Mapping):
        return {"type": "function", **tool["function"], "strict": False}
    return tool


def _choice(choice: Any) -> Any:
    if isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        return {"type": "function", "name": choice["function"].get("name")}
    return choice


def as_responses(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` (a Chat Completions request) as the same request on the Responses wire."""
    if "input" in body:
        return dict(body)
    out: dict[str, Any] = {"store": False}
    for key, value in body.items():
        if key == "messages":
            instructions, out["input"] = _items(list(value or []))
            if instructions is not None:
                out["instructions"] = instructions
        elif key in ("max_tokens", "max_completion_tokens"):
            out["max_output_tokens"] = value
        elif key == "tools":
            out["tools"] = [_tool(tool) for tool in value or []]
        elif key == "tool_choice":
            out["tool_choice"] = _choice(value)
        elif key != "stream_options":  # the Responses stream always ends with its usage
            out[key] = value
    return out


def usage_prompt_keys(wire: str) -> tuple[str, ...]:
    """The usage fields whose sum is the prompt a server counted, on ``wire``."""
    if wire == "anthropic":
        return ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    if wire == "openai-responses":
        return ("input_tokens",)
    return ("prompt_tokens",)
