"""``probe``: find out which :class:`OpenAIQuirks` an OpenAI-compatible server needs."""

from __future__ import annotations

import json
from typing import Any

import httpx
from attrs import evolve

from agentfsm.adapters.providers import OpenAIQuirks

__all__ = ["probe"]

_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the current time.",
        "parameters": {"type": "object", "properties": {}},
    },
}


async def _post(url: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, str]:
    # A fresh connection each time: llama-cpp-python drops a kept-alive connection after
    # the empty stream it sends for a streamed automatic tool choice.
    async with httpx.AsyncClient(timeout=httpx.Timeout(120, connect=10)) as client:
        response = await client.post(url, headers=headers, content=json.dumps(body))
    return response.status_code, response.text


async def probe(
    base_url: str, model: str, api_key: str | None = None
) -> tuple[list[str], OpenAIQuirks]:
    """Send a few small requests and return what was found and the suggested profile."""
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"content-type": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    quirks = OpenAIQuirks()
    findings: list[str] = []
    hello = [{"role": "user", "content": "Say hi."}]
    status, text = await _post(
        url,
        headers,
        {
            "model": model,
            "messages": hello,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": 8,
        },
    )
    if status == 400 and "stream_options" in text:
        quirks = evolve(quirks, stream_options=False)
        findings.append("rejects stream_options (400)")
    else:
        findings.append(f"stream_options accepted ({status})")
    status, text = await _post(url, headers, {"model": model, "messages": hello, "max_tokens": 8})
    if status == 400 and "max_completion_tokens" in text:
        quirks = evolve(quirks, max_tokens_field="max_completion_tokens")
        findings.append("wants max_completion_tokens instead of max_tokens")
    ask_time = [
        {"role": "system", "content": "You are a helpful assistant that calls functions."},
        {"role": "user", "content": "What time is it? Use the tool."},
    ]
    status, plain = await _post(
        url,
        headers,
        {"model": model, "messages": ask_time, "tools": [_TOOL], quirks.max_tokens_field: 64},
    )
    _, with_choice = await _post(
        url,
        headers,
        {
            "model": model,
            "messages": ask_time,
            "tools": [_TOOL],
            "tool_choice": "auto",
            quirks.max_tokens_field: 64,
        },
    )
    try:
        prompt_plain = json.loads(plain).get("usage", {}).get("prompt_tokens", 0)
        prompt_auto = json.loads(with_choice).get("usage", {}).get("prompt_tokens", 0)
    except (ValueError, AttributeError):
        prompt_plain = prompt_auto = 0
    if prompt_auto > prompt_plain + 20:
        quirks = evolve(quirks, explicit_tool_choice=True)
        findings.append(
            "tools reach the prompt only with tool_choice: auto "
            f"({prompt_plain} vs {prompt_auto} prompt tokens)"
        )
    status, streamed = await _post(
        url,
        headers,
        {
            "model": model,
            "messages": ask_time,
            "tools": [_TOOL],
            "tool_choice": "auto",
            "stream": True,
            quirks.max_tokens_field: 64,
        },
    )
    frames = [line for line in streamed.splitlines() if line.startswith("data:")]
    if status == 200 and not frames:
        quirks = evolve(quirks, stream_with_tools=False)
        findings.append("a streamed request with tools returns an empty 200 stream")
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "What time is it?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
    ]
    replay = {"model": model, "tools": [_TOOL], quirks.max_tokens_field: 16}
    status, text = await _post(url, headers, {**replay, "messages": history})
    if status >= 400:
        history[1]["content"] = ""
        empty, _ = await _post(url, headers, {**replay, "messages": history})
        if empty < 400:  # the content shape, not something else, was refused
            quirks = evolve(quirks, null_assistant_content=False)
            findings.append(f"rejects content: null on assistant tool-call turns ({status})")
    return findings, quirks
