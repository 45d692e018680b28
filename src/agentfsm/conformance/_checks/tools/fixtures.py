"""What the tool checks ask with: the tools, their arguments, the prompts, the foreign ids."""

from __future__ import annotations

import json
from typing import Any

from ..._context import TOOL_WEATHER, TOOL_WITHOUT_ARGS

__all__ = [
    "FOREIGN_CALLS",
    "GET_TIME",
    "GET_WEATHER",
    "LONG_CALL_ID",
    "OPENAI_ONLY",
    "PARIS_ARGS",
    "PARIS_JSON",
    "SAY_HELLO",
    "SYSTEM_PROMPT",
    "TOKYO_ARGS",
    "TOKYO_JSON",
    "WEATHER_IN_PARIS",
    "WEATHER_IN_PARIS_WITH_TOOL",
    "openai_call",
]

GET_WEATHER = TOOL_WEATHER.name
"""The tool with one argument, ``city``."""
GET_TIME = TOOL_WITHOUT_ARGS.name
"""The tool without parameters."""

PARIS_ARGS: dict[str, Any] = {"city": "Paris"}
TOKYO_ARGS: dict[str, Any] = {"city": "Tokyo"}
PARIS_JSON = json.dumps(PARIS_ARGS)
"""``PARIS_ARGS`` as the JSON string OpenAI sends."""
TOKYO_JSON = json.dumps(TOKYO_ARGS)

WEATHER_IN_PARIS = "What is the weather in Paris?"
WEATHER_IN_PARIS_WITH_TOOL = "What is the weather in Paris? Use get_weather."
SAY_HELLO = "Say hello."
SYSTEM_PROMPT = "You are a helpful assistant that calls functions."

LONG_CALL_ID = "call_" + ("0123456789abcdef" * 4)[:55]
"""A 60-character tool-call id (OpenAI accepts at most 40)."""
FOREIGN_CALLS = (
    ("abc123", "Paris"),
    ("toolu_01A09q90qw90lq917835lq9", "Tokyo"),
    (LONG_CALL_ID, "Lima"),
)
"""Tool-call ids in other providers' shapes, each with the city it asked about."""

OPENAI_ONLY = "not applicable to the anthropic wire"


def openai_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """One tool call of an OpenAI assistant message."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
