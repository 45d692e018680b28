"""What a check works with: a scripted server (recorded mode) or a live URL (live mode)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

import httpx
from attrs import define, field, frozen

from agentfsm._deprecated import deprecated_getattr as _deprecated_getattr
from agentfsm.adapters.providers import (
    AnthropicChat,
    OpenAIChat,
    OpenAIQuirks,
    RetryPolicy,
    Timeouts,
    endpoint_url,
)
from agentfsm.engine.messages import ChatResult, Message, ToolSpec, UserMessage
from agentfsm.engine.protocols import ChatDelta, ChatFn
from agentfsm.testing import FakeProviderServer, Reply

from .model import Capabilities

__all__ = [
    "TOOL_WEATHER",
    "TOOL_WITHOUT_ARGS",
    "LiveContext",
    "LiveTarget",
    "RawExchange",
    "RecordedContext",
    "RecordedTarget",
    "Wire",
]

Wire: TypeAlias = Literal["openai-chat", "anthropic"]

TOOL_WEATHER = ToolSpec(
    "get_weather",
    "Get the current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TOOL_WITHOUT_ARGS = ToolSpec(
    "get_time", "Get the current time.", {"type": "object", "properties": {}}
)


@frozen
class RecordedTarget:
    """What recorded mode (and the recorded corpus) checks: any :class:`ChatFn` the factory
    builds for a base URL (the kit's own server, serving scripted or recorded bytes), e.g.
    ``lambda url: OpenAIChat("m", base_url=url)``."""

    factory: Callable[[str], ChatFn]
    wire: Wire = "openai-chat"
    capabilities: Capabilities = field(factory=Capabilities)
    name: str = "adapter"
    xfail: Mapping[str, str] = field(factory=dict)
    """Known failures by check id, each with its reason."""


@frozen
class LiveTarget:
    """What live mode checks: a live URL, reached through the project's adapters and raw
    probes."""

    base_url: str
    model: str
    wire: Wire = "openai-chat"
    api_key: str | None = field(default=None, repr=False)
    capabilities: Capabilities = field(factory=Capabilities)
    quirks: OpenAIQuirks = field(factory=OpenAIQuirks)
    record_dir: Path | None = None
    name: str | None = None
    xfail: Mapping[str, str] = field(factory=dict)
    timeouts: Timeouts = field(
        factory=lambda: Timeouts(connect=10, first_byte=120, idle=60, terminal_grace=2)
    )

    @property
    def label(self) -> str:
        return self.name or f"{self.model} @ {self.base_url}"


async def ask(
    chat: ChatFn,
    *,
    prompt: str = "What is the weather in Paris?",
    tools: Sequence[ToolSpec] = (),
    messages: Sequence[Message] | None = None,
    max_tokens: int | None = None,
    deltas: list[ChatDelta] | None = None,
) -> ChatResult:
    """Call ``chat`` the way the loop does."""
    return await chat(
        list(messages) if messages is not None else [UserMessage(prompt)],
        tools,
        max_tokens=max_tokens,
        on_delta=deltas.append if deltas is not None else None,
    )


@define
class RecordedContext:
    """A check in recorded mode: script the server, then call the adapter."""

    server: FakeProviderServer
    target: RecordedTarget

    @property
    def wire(self) -> Wire:
        return self.target.wire

    @property
    def base_url(self) -> str:
        root = self.server.base_url
        return f"{root}/v1" if self.wire == "openai-chat" else root

    def script(self, *replies: Reply) -> None:
        """The server's next answers, in order."""
        self.server.enqueue(*replies)

    def chat(self) -> ChatFn:
        """A fresh adapter for this check's server."""
        return self.target.factory(self.base_url)

    async def ask(self, **kwargs: Any) -> ChatResult:
        chat = self.chat()
        try:
            return await ask(chat, **kwargs)
        finally:
            close = getattr(chat, "aclose", None)
            if callable(close):
                await close()

    @property
    def requests(self) -> list[Any]:
        return self.server.requests


@frozen
class RawExchange:
    """What the endpoint really sent back (for wire deviations)."""

    status: int
    headers: dict[str, str]
    text: str

    def sse_payloads(self) -> list[Any]:
        """JSON payloads of the ``data:`` lines (``[DONE]`` left out)."""
        out = []
        for line in re.split(r"\r\n|\r|\n", self.text):
            if line.startswith("data:"):
                body = line[5:].strip()
                if body and body != "[DONE]":
                    try:
                        out.append(json.loads(body))
                    except ValueError:
                        out.append(body)
        return out

    def json(self) -> Any:
        return json.loads(self.text)


RECORDED_HEADERS = frozenset(
    {
        "content-type",
        "date",
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
        "x-request-id",
        "request-id",
        "openai-processing-ms",
        "openai-version",
        "anthropic-version",
    }
)
"""Response headers a recording keeps (an allow-list: anything else, cookies and keys
included, is left out)."""
RECORDED_HEADER_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")


def recorded_header(name: str) -> bool:
    """Whether a recording keeps the response header ``name``."""
    lowered = name.lower()
    return lowered in RECORDED_HEADERS or lowered.startswith(RECORDED_HEADER_PREFIXES)


@define
class LiveContext:
    """A check in live mode."""

    target: LiveTarget
    recordings: list[dict[str, Any]] = field(factory=list)

    @property
    def wire(self) -> Wire:
        return self.target.wire

    def chat(self, *, stream: bool = True, quirks: OpenAIQuirks | None = None) -> ChatFn:
        options: dict[str, Any] = {
            "base_url": self.target.base_url,
            "api_key": self.target.api_key,
            "stream": stream,
            "retry": RetryPolicy(max_attempts=2, initial_delay=0.5),
            "timeouts": self.target.timeouts,
        }
        if self.wire == "anthropic":
            return AnthropicChat(self.target.model, **options)
        return OpenAIChat(self.target.model, quirks=quirks or self.target.quirks, **options)

    async def ask(
        self, *, stream: bool = True, quirks: OpenAIQuirks | None = None, **kwargs: Any
    ) -> ChatResult:
        chat = self.chat(stream=stream, quirks=quirks)
        try:
            return await ask(chat, **kwargs)
        finally:
            close = getattr(chat, "aclose", None)
            if callable(close):
                await close()

    async def raw(self, body: dict[str, Any], *, name: str) -> RawExchange:
        """POST ``body`` as it is (model filled in) and keep the exact answer."""
        body = {"model": self.target.model, **body}
        headers = {"content-type": "application/json"}
        if self.wire == "anthropic":
            url = endpoint_url(self.target.base_url, "anthropic")
            headers["anthropic-version"] = "2023-06-01"
            body.setdefault("max_tokens", 256)
            if self.target.api_key:
                headers["x-api-key"] = self.target.api_key
        else:
            url = endpoint_url(self.target.base_url, "openai-chat")
            if self.target.api_key:
                headers["authorization"] = f"Bearer {self.target.api_key}"
        async with httpx.AsyncClient(timeout=httpx.Timeout(120, connect=10)) as client:
            response = await client.post(url, headers=headers, content=json.dumps(body))
        exchange = RawExchange(response.status_code, dict(response.headers), response.text)
        self.recordings.append(
            {
                "name": name,
                "request": {"method": "POST", "uri": url, "body": json.dumps(body)},
                "response": {
                    "status": exchange.status,
                    "headers": {k: [v] for k, v in exchange.headers.items() if recorded_header(k)},
                    "body": exchange.text,
                },
            }
        )
        return exchange


__getattr__ = _deprecated_getattr(
    __name__,
    {
        "AdapterTarget": (f"{__name__}.RecordedTarget", lambda: RecordedTarget),
        "EndpointTarget": (f"{__name__}.LiveTarget", lambda: LiveTarget),
    },
)
