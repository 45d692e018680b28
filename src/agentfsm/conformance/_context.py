"""What a check works with: a scripted server (recorded mode) or a live URL (live mode)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

import httpx
from attrs import Attribute, define, evolve, field, frozen

from agentfsm.adapters.providers import (
    AnthropicChat,
    AnthropicQuirks,
    EventAccumulator,
    OpenAIChat,
    OpenAIQuirks,
    OpenAIResponses,
    QuirkProfile,
    ResponseAccumulator,
    ResponsesQuirks,
    RetryPolicy,
    StreamAccumulator,
    Timeouts,
    endpoint_url,
    quirk_names,
)
from agentfsm.engine import ChatDelta, ChatFn, ChatResult, Message, ToolSpec, UserMessage
from agentfsm.testing import FakeProviderServer, Reply

from ._model import Capabilities
from ._raw_bodies import as_responses
from ._record import RECORD_LIMIT, Capture, Recorder, recording_client

__all__ = [
    "TOOL_WEATHER",
    "TOOL_WITHOUT_ARGS",
    "LiveContext",
    "LiveTarget",
    "RawExchange",
    "RecordedContext",
    "RecordedTarget",
    "WIRES",
    "Wire",
]

Wire: TypeAlias = Literal["openai-chat", "anthropic", "openai-responses"]

WIRES: tuple[Wire, ...] = ("openai-chat", "anthropic", "openai-responses")
"""Every wire the kit checks."""

_SHARED = tuple(
    name
    for name in quirk_names("openai-chat")
    if name in quirk_names("anthropic") and name in quirk_names("openai-responses")
)
"""The quirks every wire's profile has."""

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
    probes.

    ``quirks`` is the OpenAI wire's profile, ``anthropic_quirks`` the Anthropic wire's; the
    adapter of :attr:`wire` is built under its own (:attr:`profile`)."""

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
    record_limit: int = RECORD_LIMIT
    """Bytes of one body a recording keeps (see :mod:`.record`)."""
    recorder: Recorder | None = field(default=None, eq=False, repr=False)
    """Set by the :class:`LiveContext` of a recorded run (leave it ``None``): a context
    made from this target, or from a copy of it with another key, records into it."""
    anthropic_quirks: AnthropicQuirks = field(factory=AnthropicQuirks)
    """The profile ``AnthropicChat`` is built under on the Anthropic wire."""
    responses_quirks: ResponsesQuirks = field(factory=ResponsesQuirks)
    """The profile ``OpenAIResponses`` is built under on the OpenAI Responses wire."""

    @property
    def label(self) -> str:
        return self.name or f"{self.model} @ {self.base_url}"

    @property
    def profile(self) -> QuirkProfile:
        """The quirk profile of the target's wire: ``quirks``, ``anthropic_quirks`` or
        ``responses_quirks``."""
        if self.wire == "openai-responses":
            return self.responses_quirks
        return self.anthropic_quirks if self.wire == "anthropic" else self.quirks

    def profile_for(self, quirks: QuirkProfile | None = None) -> QuirkProfile:
        """The profile the adapter of :attr:`wire` is built under when a check asks for
        ``quirks``: the target's own when ``None``; ``quirks`` itself when it is of the
        wire's class; otherwise (a profile of the other wire, e.g. a check's variation of
        ``quirks`` on the Anthropic wire) the wire's own with the shared quirks
        (``explicit_tool_choice``, ``stream_with_tools``) that ``quirks`` changes from the
        target's profile of its class."""
        own = self.profile
        if quirks is None:
            return own
        if isinstance(quirks, type(own)):
            return quirks
        base: QuirkProfile = (
            self.quirks if isinstance(quirks, OpenAIQuirks) else self.anthropic_quirks
        )
        if isinstance(quirks, ResponsesQuirks):
            base = self.responses_quirks
        changes = {
            name: getattr(quirks, name)
            for name in _SHARED
            if getattr(quirks, name) != getattr(base, name)
        }
        return evolve(own, **changes)


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
        return root if self.wire == "anthropic" else f"{root}/v1"

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


def fold_payloads(wire: Wire, payloads: Sequence[dict[str, Any]]) -> ChatResult:
    """A stream's payloads folded into one answer by the ``wire`` adapter's own accumulator."""
    if wire == "anthropic":
        events = EventAccumulator()
        for payload in payloads:
            events.add(str(payload.get("type", "")), payload)
        return events.result()
    if wire == "openai-responses":
        items = ResponseAccumulator()
        for payload in payloads:
            items.add(str(payload.get("type", "")), payload)
        return items.result()
    chunks = StreamAccumulator()
    for payload in payloads:
        chunks.add(payload)
    return chunks.result()


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


def _follow_check(context: LiveContext, _attribute: Attribute[str], check: str) -> str:
    if context.target.recorder is not None:
        context.target.recorder.check = check
    return check


@define
class LiveContext:
    """A check in live mode.

    With ``target.record_dir`` set, every exchange made through it (adapter calls and raw
    probes) is kept in ``recordings`` (see :mod:`.record`), under the id in ``check``."""

    target: LiveTarget
    recordings: list[Capture] = field(factory=list)
    check: str = field(default="live", on_setattr=_follow_check)
    """The id of the check being run (the runner sets it): what recordings are named after."""

    def __attrs_post_init__(self) -> None:
        if self.target.record_dir is None:
            return
        recorder = self.target.recorder
        if recorder is None:  # a run's own context: its recorder travels with its target
            self.target = evolve(self.target, recorder=Recorder(self.recordings, self.check))
        else:  # made inside a check (e.g. with a wrong key): it records with the run
            self.recordings = recorder.captures

    @property
    def wire(self) -> Wire:
        return self.target.wire

    def _recording(self, name: str, timeout: httpx.Timeout) -> httpx.AsyncClient | None:
        """A client that records its exchanges, when the target records."""
        recorder = self.target.recorder
        if self.target.record_dir is None or recorder is None:
            return None
        return recording_client(
            self.recordings,
            self.target.base_url,
            timeout,
            check=recorder.check,
            name=name,
            limit=self.target.record_limit,
            secrets=(self.target.api_key,) if self.target.api_key else (),
        )

    def chat(self, *, stream: bool = True, quirks: QuirkProfile | None = None) -> ChatFn:
        """A fresh adapter of the target's wire, built under ``target.profile_for(quirks)``
        (see :meth:`LiveTarget.profile_for`)."""
        timeouts = self.target.timeouts
        client = self._recording(
            "adapter",
            httpx.Timeout(connect=timeouts.connect, read=None, write=timeouts.write, pool=None),
        )
        options: dict[str, Any] = {
            "base_url": self.target.base_url,
            "api_key": self.target.api_key,
            "stream": stream,
            "retry": RetryPolicy(max_attempts=2, initial_delay=0.5),
            "timeouts": timeouts,
            "http_client": client,
        }
        profile = self.target.profile_for(quirks)
        adapter: AnthropicChat | OpenAIChat | OpenAIResponses
        if isinstance(profile, AnthropicQuirks):
            adapter = AnthropicChat(self.target.model, quirks=profile, **options)
        elif isinstance(profile, ResponsesQuirks):
            adapter = OpenAIResponses(self.target.model, quirks=profile, **options)
        else:
            adapter = OpenAIChat(self.target.model, quirks=profile, **options)
        return adapter if client is None else _WithClient(adapter, client)

    async def ask(
        self, *, stream: bool = True, quirks: QuirkProfile | None = None, **kwargs: Any
    ) -> ChatResult:
        chat = self.chat(stream=stream, quirks=quirks)
        try:
            return await ask(chat, **kwargs)
        finally:
            close = getattr(chat, "aclose", None)
            if callable(close):
                await close()

    async def raw(self, body: dict[str, Any], *, name: str) -> RawExchange:
        """POST ``body`` as it is (model filled in) and keep the exact answer. On the
        Responses wire a Chat Completions body is sent as its Responses equivalent
        (:func:`~._raw_bodies.as_responses`)."""
        body = {"model": self.target.model, **body}
        headers = {"content-type": "application/json"}
        if self.wire == "anthropic":
            url = endpoint_url(self.target.base_url, "anthropic")
            headers["anthropic-version"] = "2023-06-01"
            body.setdefault("max_tokens", 256)
            if self.target.api_key:
                headers["x-api-key"] = self.target.api_key
        else:
            url = endpoint_url(self.target.base_url, self.wire)
            if self.wire == "openai-responses":
                body = as_responses(body)
            if self.target.api_key:
                headers["authorization"] = f"Bearer {self.target.api_key}"
        bounds = self.target.timeouts
        timeout = httpx.Timeout(bounds.first_byte, connect=bounds.connect)
        recording = self._recording(name, timeout)
        async with recording or httpx.AsyncClient(timeout=timeout) as client:
            response = await client.post(url, headers=headers, content=json.dumps(body))
        return RawExchange(response.status_code, dict(response.headers), response.text)


class _WithClient:
    """An adapter on a (recording) client of its own, which it closes with itself."""

    def __init__(
        self, adapter: AnthropicChat | OpenAIChat | OpenAIResponses, client: httpx.AsyncClient
    ) -> None:
        self._adapter = adapter
        self._client = client

    async def __call__(self, *args: Any, **kwargs: Any) -> ChatResult:
        return await self._adapter(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._adapter, name)

    async def aclose(self) -> None:
        try:
            await self._adapter.aclose()
        finally:
            await self._client.aclose()
