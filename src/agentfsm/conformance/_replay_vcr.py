"""``replay-vcr``: users' own VCR.py cassettes replayed through the project's adapters.

Every exchange of a known wire (:mod:`._vcr`) is served to the adapter of its wire three
times: the body whole in one read, the body in pieces of :data:`PIECE` bytes (split inside
SSE lines and UTF-8 characters), and over loopback by a
:class:`~agentfsm.testing.FakeProviderServer` (the corpus tier's delivery, event by event).
The exchange is *exact* when all three give the same result and that result is what the
recorded bytes say (:func:`~.exchange.parse_reply`: an error or a success, its text, its tool
calls and their arguments, a stream's text deltas adding up to its text); *differing* names
the field (and the delivery); *crashed* is an adapter that raised something other than a
:class:`~agentfsm.adapters.providers.ProviderError`, or hung.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeAlias

import httpx
from attrs import astuple, define, field, frozen

from agentfsm.adapters.providers import (
    AnthropicChat,
    OpenAIChat,
    OpenAIResponses,
    ProviderError,
    RecordedResponse,
    RetryPolicy,
)
from agentfsm.engine import ChatDelta, ChatFn, ChatResult
from agentfsm.testing import FakeProviderServer

from ._corpus import replay_call, served_reply
from ._exchange import CallOutcome, RecordedReply, parse_reply
from ._vcr import VcrExchange, cassette_files, read_cassette

__all__ = [
    "ADAPTERS",
    "DELIVERIES",
    "PIECE",
    "VcrOutcome",
    "VcrReport",
    "VcrResult",
    "replay_vcr",
]

AdapterFactory: TypeAlias = Callable[[str, httpx.AsyncClient | None], ChatFn]
VcrOutcome: TypeAlias = Literal["exact", "differing", "crashed", "no adapter", "unreadable"]
Delivery: TypeAlias = Literal["whole", "pieces", "loopback"]
DELIVERIES: tuple[Delivery, ...] = ("whole", "pieces", "loopback")
PIECE = 7
"""Bytes per read in the ``pieces`` delivery."""
OUTCOMES: tuple[VcrOutcome, ...] = ("exact", "differing", "crashed", "no adapter", "unreadable")

_ONCE = RetryPolicy(max_attempts=1)


def _openai(url: str, client: httpx.AsyncClient | None) -> ChatFn:
    return OpenAIChat("recorded", base_url=url, http_client=client, retry=_ONCE)


def _anthropic(url: str, client: httpx.AsyncClient | None) -> ChatFn:
    return AnthropicChat("recorded", base_url=url, http_client=client, retry=_ONCE)


def _responses(url: str, client: httpx.AsyncClient | None) -> ChatFn:
    return OpenAIResponses("recorded", base_url=url, http_client=client, retry=_ONCE)


ADAPTERS: dict[str, tuple[str, AdapterFactory]] = {
    "openai-chat": ("/v1", _openai),
    "anthropic": ("", _anthropic),
    "openai-responses": ("/v1", _responses),
}
"""Wire -> (the base URL's path, the adapter reading it). A wire of
:data:`~._vcr.VCR_WIRES` missing here is reported "no adapter on this wire"."""


@frozen
class VcrResult:
    """How one exchange of a cassette replayed."""

    file: str
    index: int
    host: str
    wire: str
    outcome: VcrOutcome
    fields: tuple[str, ...] = ()
    """The fields that differed (``differing``), e.g. ``text``, ``calls``, ``usage``."""
    detail: str = ""
    """What differed or crashed, and in which delivery; why it could not be replayed."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "interaction": self.index,
            "host": self.host,
            "wire": self.wire,
            "outcome": self.outcome,
            "fields": list(self.fields),
            "detail": self.detail,
        }


@define
class VcrReport:
    """What ``replay-vcr`` found in a folder of cassettes."""

    folder: str
    started: str = ""
    files: int = 0
    """Cassette files read (unreadable ones included)."""
    other: int = 0
    """Interactions of other paths (not a wire the project speaks), left out."""
    results: list[VcrResult] = field(factory=list)
    unreadable: list[tuple[str, str]] = field(factory=list)
    """Files that could not be read at all, and why."""

    def providers(self) -> dict[tuple[str, str], dict[VcrOutcome, int]]:
        """(host, wire) -> how many exchanges had each outcome, hosts sorted."""
        out: dict[tuple[str, str], dict[VcrOutcome, int]] = {}
        for result in sorted(self.results, key=lambda r: (r.host, r.wire)):
            counts = out.setdefault((result.host, result.wire), dict.fromkeys(OUTCOMES, 0))
            counts[result.outcome] += 1
        return out

    @property
    def replayed(self) -> int:
        return sum(r.outcome in ("exact", "differing", "crashed") for r in self.results)

    @property
    def passed(self) -> bool:
        """Something was replayed, and every exchange read was exact."""
        bad = [r for r in self.results if r.outcome in ("differing", "crashed", "unreadable")]
        return self.replayed > 0 and not bad and not self.unreadable

    def as_dict(self) -> dict[str, Any]:
        from agentfsm._version import __version__

        return {
            "format": "agentfsm.vcr-replay/1",
            "agentfsm": __version__,
            "folder": self.folder,
            "started": self.started,
            "deliveries": list(DELIVERIES),
            "files": self.files,
            "other_interactions": self.other,
            "providers": [
                {"host": host, "wire": wire, **counts}
                for (host, wire), counts in self.providers().items()
            ],
            "exchanges": [r.as_dict() for r in self.results],
            "unreadable_files": [{"file": f, "problem": p} for f, p in self.unreadable],
        }


class _Pieces(httpx.AsyncByteStream):
    def __init__(self, body: bytes, size: int | None) -> None:
        self.body, self.size = body, size or max(len(body), 1)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.body), self.size):
            yield self.body[start : start + self.size]


class _Serve(httpx.AsyncBaseTransport):
    """Serves one recorded response to every request (a retry gets it again too), its body
    whole or in pieces of ``size`` bytes."""

    def __init__(self, response: RecordedResponse, size: int | None) -> None:
        self.response, self.size = response, size

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            self.response.status,
            headers=list(self.response.headers),
            stream=_Pieces(self.response.body, self.size),
            request=request,
        )


async def _deliver(
    how: Delivery, response: RecordedResponse, reply: RecordedReply, wire: str
) -> tuple[CallOutcome, list[ChatDelta]]:
    path, factory = ADAPTERS[wire]
    deltas: list[ChatDelta] = []
    if how == "loopback":
        served = served_reply(response, reply.streamed)
        with FakeProviderServer() as server:
            server.handler = lambda _request: served  # a retry gets it again too
            return await replay_call(factory(server.base_url + path, None), deltas), deltas
    size = PIECE if how == "pieces" else None
    async with httpx.AsyncClient(transport=_Serve(response, size)) as client:
        return await replay_call(factory(f"http://replay.invalid{path}", client), deltas), deltas


def _view(outcome: ChatResult | ProviderError, deltas: list[ChatDelta]) -> dict[str, Any]:
    """What one delivery gave, field by field."""
    if isinstance(outcome, ProviderError):
        return {"outcome": "error", "error": (outcome.kind, outcome.status, outcome.in_stream)}
    message, usage = outcome.message, outcome.usage
    return {
        "outcome": "success",
        "text": message.content,
        "reasoning": message.reasoning,
        "calls": [(c.id, c.name) for c in message.tool_calls],
        "arguments": [
            c.arguments if c.raw_arguments is None else c.raw_arguments for c in message.tool_calls
        ],
        "finish": outcome.finish_reason,
        "usage": astuple(usage) if usage is not None else None,
        "model": outcome.model,
        "response id": outcome.response_id,
        "streamed text": "".join(d.text for d in deltas if d.kind == "text"),
    }


def _brief(value: object) -> str:
    text = repr(value)  # escapes control characters, lone surrogates, line separators
    return text if len(text) <= 120 else text[:119] + "…"


def _against_bytes(view: dict[str, Any], reply: RecordedReply) -> list[tuple[str, str]]:
    """The fields where a delivery's result is not what the recorded bytes say."""
    wanted = "error" if reply.error is not None else "success"
    if view["outcome"] != wanted:
        got = view.get("error") or f"a success with text {_brief(view.get('text'))}"
        unended = " (a stream without its closing event)" if reply.streamed else ""
        unended = unended if wanted == "success" and not reply.terminal else ""
        return [("outcome", f"recorded {wanted}{unended}; got {got}")]
    if wanted == "error":
        return []
    out: list[tuple[str, str]] = []
    if view["text"] != reply.text:
        out.append(("text", f"recorded {_brief(reply.text)}; got {_brief(view['text'])}"))
    recorded = list(reply.calls.values())
    names, wanted_names = [name for _, name in view["calls"]], [c.name for c in recorded]
    if names != wanted_names:
        out.append(("calls", f"recorded {_brief(wanted_names)}; got {_brief(names)}"))
    else:
        pairs = zip([c.arguments() for c in recorded], view["arguments"], strict=True)
        if any(want is not None and want != got for want, got in pairs):
            args = [c.arguments() for c in recorded]
            out.append(("arguments", f"recorded {_brief(args)}; got {_brief(view['arguments'])}"))
    if reply.streamed and view["streamed text"] != view["text"]:
        detail = f"deltas {_brief(view['streamed text'])}; text {_brief(view['text'])}"
        out.append(("streamed text", detail))
    return out


async def _replay(exchange: VcrExchange, root: Path) -> VcrResult:
    base = (_name(exchange.file, root), exchange.index, exchange.host, exchange.wire)
    if exchange.response is None:
        return VcrResult(*base, "unreadable", detail=exchange.problem)
    if exchange.wire not in ADAPTERS:
        return VcrResult(*base, "no adapter", detail=f"no adapter on the {exchange.wire} wire")
    try:
        reply = parse_reply(exchange.response, exchange.wire)  # type: ignore[arg-type]
    except RecursionError:
        return VcrResult(*base, "unreadable", detail="a body nested too deeply to read")
    views: dict[Delivery, dict[str, Any]] = {}
    for how in DELIVERIES:
        outcome, deltas = await _deliver(how, exchange.response, reply, exchange.wire)
        if not isinstance(outcome, ChatResult | ProviderError):
            what = "hung" if outcome is None else f"{type(outcome).__name__}: {outcome}"
            return VcrResult(*base, "crashed", detail=f"{how}: {_brief(what)[1:-1]}")
        views[how] = _view(outcome, deltas)
    found: list[tuple[str, str]] = []
    for how in DELIVERIES:
        found += [(name, f"{how}: {detail}") for name, detail in _against_bytes(views[how], reply)]
        if how != "whole":
            whole = views["whole"]
            found += [
                (name, f"{how}: {_brief(value)}; whole: {_brief(whole.get(name))}")
                for name, value in views[how].items()
                if value != whole.get(name)
            ]
    if not found:
        return VcrResult(*base, "exact")
    fields = tuple(dict.fromkeys(name for name, _ in found))
    return VcrResult(*base, "differing", fields, found[0][1])


def _name(file: Path, root: Path) -> str:
    """How reports name a cassette: its path under the folder given."""
    return file.relative_to(root).as_posix() if file.is_relative_to(root) else file.name


async def replay_vcr(
    folder: str | Path, progress: Callable[[VcrResult], object] | None = None
) -> VcrReport:
    """Replay every VCR.py cassette (``*.yaml`` / ``*.yml``, at any depth) under ``folder``.

    The exchanges whose request path speaks a wire the project knows (``…/chat/completions``,
    ``…/v1/messages``, ``…/responses``) are replayed through the adapter of that wire in
    three deliveries: whole, in small pieces, and over loopback. Each is ``exact``,
    ``differing`` (with the fields), ``crashed``, ``no adapter`` (a wire the project has no
    adapter for) or ``unreadable`` (its response cannot be decoded); a file that cannot be
    read at all is in ``unreadable``. Nothing is raised for a bad cassette, and no header of
    a cassette is ever put in the report. ``progress`` gets each result."""
    root = Path(folder)
    report = VcrReport(str(root), datetime.now(UTC).isoformat(timespec="seconds"))
    for file in cassette_files(root):
        cassette = read_cassette(file)
        report.files += 1
        report.other += cassette.other
        if cassette.problem:
            report.unreadable.append((_name(file, root), cassette.problem))
        for exchange in cassette.exchanges:
            report.results.append(await _replay(exchange, root))
            if progress is not None:
                progress(report.results[-1])
    return report
