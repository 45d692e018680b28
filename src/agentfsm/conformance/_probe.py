"""``probe``: find out which quirk profile a server needs, from what it answers.

A handful of small raw requests, each compared with a variation of itself (with and without
``tool_choice``, streamed and unstreamed, text as a string and as blocks): a quirk is
suggested only when the server's own answers show it. :mod:`.probe_verify` then re-runs the
decisive checks under the suggestion.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal, overload

import httpx
from attrs import define, evolve, field

from agentfsm.adapters.providers import (
    ANTHROPIC_VERSION,
    AnthropicQuirks,
    BadShape,
    OpenAIQuirks,
    QuirkProfile,
    ResponsesQuirks,
    WireName,
    endpoint_url,
    parse_completion,
    parse_message,
    parse_response,
)
from agentfsm.engine import ChatResult

from ._context import fold_payloads
from ._raw_bodies import as_responses, usage_prompt_keys
from ._record import scrub

__all__ = ["PROMPT_GROWTH", "ProbeError", "probe"]

PROMPT_GROWTH = 20
"""Prompt tokens a variation must add before the probe calls a part of the request ignored
(a tool definition is well above it; a tokenizer's noise well below)."""

_TOOL = {
    "name": "get_time",
    "description": "Get the current time.",
    "parameters": {"type": "object", "properties": {}},
}
_SYSTEM = "You are a helpful assistant that calls functions."
_ASK_TIME = "What time is it? Use the tool."


class ProbeError(Exception):
    """The server could not be probed: nothing answered, or its first plain request failed.
    The message is one line and holds no key."""


def _ok(status: int) -> bool:
    return 200 <= status < 300


def _line(text: str, limit: int = 200) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


@define
class _Prober:
    """The raw requests of one probe, and what they showed."""

    url: str
    wire: WireName
    model: str
    api_key: str | None = field(repr=False)
    timeout: float
    findings: list[str] = field(factory=list)

    def excerpt(self, text: str) -> str:
        return _line(scrub(text, (self.api_key,) if self.api_key else ()))

    async def post(self, body: dict[str, Any]) -> tuple[int, str]:
        headers = {"content-type": "application/json"}
        if self.wire == "anthropic":
            headers["anthropic-version"] = ANTHROPIC_VERSION
            if self.api_key:
                headers["x-api-key"] = self.api_key
        elif self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        if self.wire == "openai-responses":
            body = as_responses(body)
        content = json.dumps({"model": self.model, **body})
        timeout = httpx.Timeout(self.timeout, connect=min(10.0, self.timeout))
        try:
            # A fresh connection each time: llama-cpp-python drops a kept-alive connection
            # after the empty stream it sends for a streamed automatic tool choice.
            async with asyncio.timeout(self.timeout * 2):
                async with httpx.AsyncClient(timeout=timeout) as client:
                    response = await client.post(self.url, headers=headers, content=content)
        except (httpx.HTTPError, httpx.InvalidURL, TimeoutError) as error:
            what = str(error) or "no answer in time"
            raise ProbeError(
                f"cannot reach {self.url}: {type(error).__name__}: {self.excerpt(what)}"
            ) from None
        return response.status_code, response.text

    def failed(self, what: str, status: int, text: str) -> ProbeError:
        return ProbeError(
            f"{what} to {self.url} failed: HTTP {status}: {self.excerpt(text) or '(empty body)'}"
            " (check the base URL, the model name and the API key)"
        )

    def tool(self) -> dict[str, Any]:
        if self.wire == "anthropic":
            return {
                "name": _TOOL["name"],
                "description": _TOOL["description"],
                "input_schema": _TOOL["parameters"],
            }
        return {"type": "function", "function": _TOOL}

    def prompt_tokens(self, text: str) -> int | None:
        try:
            usage = json.loads(text).get("usage") or {}
        except (ValueError, AttributeError):
            return None
        value = usage.get(usage_prompt_keys(self.wire)[0])
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def answer(self, status: int, text: str, streamed: bool) -> ChatResult | None:
        """The answer read with the adapter's own parsers; ``None`` when nothing parses."""
        if not _ok(status):
            return None
        try:
            if not streamed:
                data = json.loads(text)
                if self.wire == "openai-responses":
                    return parse_response(data)
                return parse_message(data) if self.wire == "anthropic" else parse_completion(data)
            payloads = []
            for line in text.splitlines():
                if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                    payloads.append(json.loads(line[5:]))
            if not payloads:
                return None
            return fold_payloads(self.wire, payloads)
        except (ValueError, TypeError, AttributeError, KeyError, BadShape):
            return None


def _said(result: ChatResult | None) -> bool:
    """Whether an answer holds text or a tool call."""
    return result is not None and bool(result.message.content.strip() or result.message.tool_calls)


def _shown(result: ChatResult | None, status: int) -> str:
    if result is None:
        return f"HTTP {status}" if not _ok(status) else "no parsable answer (an empty 200 stream)"
    return f"neither text nor a tool call (finish {result.finish_reason!r})"


async def _first(p: _Prober, max_field: str = "max_tokens") -> tuple[str, tuple[int, str]]:
    """The plain request every probe starts with; returns the max-tokens field that works
    and the answer."""
    hello: dict[str, Any] = {"messages": [{"role": "user", "content": "Say hi."}], max_field: 8}
    status, text = await p.post(hello)
    if not _ok(status) and p.wire == "openai-chat" and "max_completion_tokens" in text:
        del hello[max_field]
        again = await p.post({**hello, "max_completion_tokens": 8})
        if _ok(again[0]):
            p.findings.append(f"wants max_completion_tokens instead of max_tokens ({status})")
            return "max_completion_tokens", again
    if not _ok(status):
        raise p.failed("the first plain request", status, text)
    p.findings.append(f"a plain request answers ({status})")
    return max_field, (status, text)


_THINK_ASK = "What is 2 + 3? Answer with the number."


async def _thinks_inline(p: _Prober, max_field: str = "max_tokens") -> bool:
    """Whether answers start with the model's reasoning inline, as ``<think>…`` (Q47)."""
    ask = {"messages": [{"role": "user", "content": _THINK_ASK}], max_field: 256}
    answer = p.answer(*(await p.post(ask)), streamed=False)
    if answer is None or not answer.message.content.lstrip().startswith("<think>"):
        return False
    p.findings.append(
        f"answers start with their reasoning inline ({p.excerpt(answer.message.content)[:60]!r})"
    )
    return True


async def _tool_choice(
    p: _Prober, base: dict[str, Any], auto: Any
) -> tuple[bool, tuple[int, str], tuple[int, str]]:
    """Whether tools reach the prompt only with ``tool_choice``, and both answers."""
    plain = await p.post(base)
    chosen = await p.post({**base, "tool_choice": auto})
    if not _ok(plain[0]) or not _ok(chosen[0]):
        bad = plain if not _ok(plain[0]) else chosen
        p.findings.append(f"a request with tools fails: HTTP {bad[0]}: {p.excerpt(bad[1])}")
        return False, plain, chosen
    without, with_choice = p.prompt_tokens(plain[1]), p.prompt_tokens(chosen[1])
    if without is not None and with_choice is not None:
        if with_choice > without + PROMPT_GROWTH:
            p.findings.append(
                "tools reach the prompt only with tool_choice auto "
                f"({without} vs {with_choice} prompt tokens)"
            )
            return True, plain, chosen
        return False, plain, chosen
    called = p.answer(*chosen, streamed=False)
    if called is not None and called.message.tool_calls:
        answered = p.answer(*plain, streamed=False)
        if answered is not None and not answered.message.tool_calls:
            p.findings.append("no usage to compare; a tool call comes only with tool_choice auto")
            return True, plain, chosen
    return False, plain, chosen


async def _streamed_tools(p: _Prober, body: dict[str, Any], unstreamed: tuple[int, str]) -> bool:
    """Whether requests with tools must go unstreamed: the streamed answer holds nothing the
    unstreamed one holds."""
    status, text = await p.post({**body, "stream": True})
    streamed = p.answer(status, text, streamed=True)
    if _said(streamed):
        return False
    answered = p.answer(*unstreamed, streamed=False)
    if _said(answered):
        p.findings.append(
            f"a streamed request with tools gets {_shown(streamed, status)}; "
            "the same request unstreamed answers"
        )
        return True
    p.findings.append(
        f"a request with tools gets {_shown(streamed, status)} streamed and "
        f"{_shown(answered, unstreamed[0])} unstreamed: no request variation explains it"
    )
    return False


async def _openai(p: _Prober) -> OpenAIQuirks:
    quirks = evolve(OpenAIQuirks(), max_tokens_field=(await _first(p))[0])
    field_ = quirks.max_tokens_field
    if await _thinks_inline(p, field_):
        quirks = evolve(quirks, think_tags=True)
    hello = {"messages": [{"role": "user", "content": "Say hi."}], field_: 8, "stream": True}
    status, text = await p.post({**hello, "stream_options": {"include_usage": True}})
    if not _ok(status):
        again, _ = await p.post(hello)
        if _ok(again):
            quirks = evolve(quirks, stream_options=False)
            p.findings.append(f"rejects stream_options ({status}); the stream without it answers")
        else:
            p.findings.append(f"a streamed request fails: HTTP {status}: {p.excerpt(text)}")
    ask = [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": _ASK_TIME}]
    base = {"messages": ask, "tools": [p.tool()], field_: 64}
    explicit, plain, chosen = await _tool_choice(p, base, "auto")
    quirks = evolve(quirks, explicit_tool_choice=explicit)
    profile_body = {**base, "tool_choice": "auto"} if explicit else base
    if quirks.stream_options:
        profile_body = {**profile_body, "stream_options": {"include_usage": True}}
    if await _streamed_tools(p, profile_body, chosen if explicit else plain):
        quirks = evolve(quirks, stream_with_tools=False)
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
    replay = {"tools": [p.tool()], field_: 16}
    status, _ = await p.post({**replay, "messages": history})
    if not _ok(status):
        history[1]["content"] = ""
        empty, _ = await p.post({**replay, "messages": history})
        if _ok(empty):  # the content shape, not something else, was refused
            quirks = evolve(quirks, null_assistant_content=False)
            p.findings.append(f"rejects content: null on assistant tool-call turns ({status})")
    return quirks


async def _anthropic(p: _Prober) -> AnthropicQuirks:
    _, as_string = await _first(p)
    quirks = AnthropicQuirks()
    blocks = [{"type": "text", "text": "Say hi."}]
    as_blocks = await p.post({"messages": [{"role": "user", "content": blocks}], "max_tokens": 8})
    string_tokens, block_tokens = p.prompt_tokens(as_string[1]), p.prompt_tokens(as_blocks[1])
    if not _ok(as_blocks[0]) and _ok(as_string[0]):
        quirks = evolve(quirks, string_content=True)
        p.findings.append(
            f"rejects text blocks ({as_blocks[0]}); the same text as a string answers"
        )
    elif (
        string_tokens is not None
        and block_tokens is not None
        and block_tokens > string_tokens + max(10, string_tokens // 2)
    ):
        quirks = evolve(quirks, string_content=True)
        p.findings.append(
            "text blocks reach the prompt as more than their text "
            f"({string_tokens} prompt tokens as a string, {block_tokens} as a block)"
        )
    ask = [{"role": "user", "content": _ASK_TIME}]
    base = {"system": _SYSTEM, "messages": ask, "tools": [p.tool()], "max_tokens": 64}
    explicit, plain, chosen = await _tool_choice(p, base, {"type": "auto"})
    quirks = evolve(quirks, explicit_tool_choice=explicit)
    profile_body = {**base, "tool_choice": {"type": "auto"}} if explicit else base
    if await _streamed_tools(p, profile_body, chosen if explicit else plain):
        quirks = evolve(quirks, stream_with_tools=False)
    return quirks


async def _responses(p: _Prober) -> ResponsesQuirks:
    await _first(p)
    quirks = ResponsesQuirks()
    if await _thinks_inline(p):
        p.findings.append(
            "the Responses adapter keeps such text as it is: --wire openai-chat with "
            "think_tags=true moves it into reasoning"
        )
    hello = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 16}
    status, text = await p.post({**hello, "include": ["reasoning.encrypted_content"]})
    if not _ok(status) and _ok((await p.post(hello))[0]):
        quirks = evolve(quirks, encrypted_reasoning=False)
        p.findings.append(
            f"rejects include: reasoning.encrypted_content ({status}: {p.excerpt(text)[:80]})"
        )
    ask = [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": _ASK_TIME}]
    base = {"messages": ask, "tools": [p.tool()], "max_tokens": 64}
    explicit, plain, chosen = await _tool_choice(p, base, "auto")
    quirks = evolve(quirks, explicit_tool_choice=explicit)
    profile_body = {**base, "tool_choice": "auto"} if explicit else base
    if await _streamed_tools(p, profile_body, chosen if explicit else plain):
        quirks = evolve(quirks, stream_with_tools=False)
    return quirks


@overload
async def probe(
    base_url: str,
    model: str,
    api_key: str | None = None,
    *,
    wire: Literal["openai-chat"] = "openai-chat",
    request_seconds: float = 120,
) -> tuple[list[str], OpenAIQuirks]: ...


@overload
async def probe(
    base_url: str,
    model: str,
    api_key: str | None = None,
    *,
    wire: Literal["anthropic"],
    request_seconds: float = 120,
) -> tuple[list[str], AnthropicQuirks]: ...


@overload
async def probe(
    base_url: str,
    model: str,
    api_key: str | None = None,
    *,
    wire: WireName,
    request_seconds: float = 120,
) -> tuple[list[str], QuirkProfile]: ...


async def probe(
    base_url: str,
    model: str,
    api_key: str | None = None,
    *,
    wire: WireName = "openai-chat",
    request_seconds: float = 120,
) -> tuple[list[str], QuirkProfile]:
    """Send a few small requests and return what was found and the suggested profile.

    Each request is bounded by ``request_seconds`` (connect: at most 10 s; the whole
    exchange: twice ``request_seconds``).

    Raises:
        ProbeError: nothing answered at ``base_url`` (refused, DNS, timeout), or the first
            plain request got no 2xx answer (a wrong key, an unknown model or route).
    """
    try:
        url = endpoint_url(base_url, wire)
    except (httpx.InvalidURL, UnicodeError) as error:
        raise ProbeError(f"not a usable base URL: {base_url[:200]!r} ({error})") from None
    prober = _Prober(url, wire, model, api_key, request_seconds)
    quirks: QuirkProfile
    if wire == "anthropic":
        quirks = await _anthropic(prober)
    elif wire == "openai-responses":
        quirks = await _responses(prober)
    else:
        quirks = await _openai(prober)
    return prober.findings, quirks
