"""``replay-vcr``: users' own cassettes replayed through the project's adapters.

Every exchange of a known wire (:mod:`._vcr`) is served to the adapter of its wire three
times: the body whole in one read, the body in pieces (split inside SSE lines and UTF-8
characters; :func:`piece_size`), and over loopback by a
:class:`~agentfsm.testing.FakeProviderServer` (the corpus tier's delivery, event by event).
Each answer is held, field by field, to a second reading of the recorded bytes
(:mod:`._reading`, which shares no reading code with the adapters) and to the whole
delivery's answer:

- ``exact``: the three deliveries answer what the bytes say: text, reasoning and reasoning
  items, every tool call's id, name and arguments, the finish reason (normalized and raw),
  every usage count, the response's id and model; for an error its kind, status and
  retryability;
- ``differing``: each difference names the field, what was expected and what came, and in
  which delivery;
- ``unjudged``: the recording cannot settle what the server sent (an event stream recorded
  without its ``content-type``, a body cut by its recorder, a redirect): the reason is
  given, and only the three deliveries' agreement is checked;
- ``crashed``: the adapter raised something other than a
  :class:`~agentfsm.adapters.providers.ProviderError`, or hung.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeAlias

import attrs
import httpx
from attrs import define, field, frozen

from agentfsm.adapters.providers import (
    AnthropicChat,
    OpenAIChat,
    OpenAIResponses,
    ProviderError,
    RecordedResponse,
    RetryPolicy,
)
from agentfsm.engine import ChatDelta, ChatFn, ChatResult, Usage
from agentfsm.testing import FakeProviderServer

from ._corpus import replay_call, served_reply
from ._exchange import CallOutcome
from ._reading import Answer, Failure, Reading, read_recorded
from ._vcr import VcrExchange, cassette_files, read_cassette

__all__ = [
    "ADAPTERS",
    "DELIVERIES",
    "MAX_PIECES",
    "PIECE",
    "VcrDifference",
    "VcrOutcome",
    "VcrReport",
    "VcrResult",
    "piece_size",
    "replay_vcr",
]

AdapterFactory: TypeAlias = Callable[[str, httpx.AsyncClient | None], ChatFn]
VcrOutcome: TypeAlias = Literal[
    "exact", "differing", "unjudged", "crashed", "no adapter", "unreadable"
]
Delivery: TypeAlias = Literal["whole", "pieces", "loopback"]
DELIVERIES: tuple[Delivery, ...] = ("whole", "pieces", "loopback")
PIECE = 7
"""Bytes per read in the ``pieces`` delivery, for a body of up to :data:`MAX_PIECES`
times that."""
MAX_PIECES = 2048
"""Reads of one body at most in the ``pieces`` delivery: a larger body comes in larger
pieces, so a multi-megabyte reply replays in well under a second."""
OUTCOMES: tuple[VcrOutcome, ...] = (
    "exact",
    "differing",
    "unjudged",
    "crashed",
    "no adapter",
    "unreadable",
)
FAILING: tuple[VcrOutcome, ...] = ("differing", "crashed", "unreadable")
"""Outcomes that make a run fail."""

_ONCE = RetryPolicy(max_attempts=1)
_OWN_ID = "(an id of the adapter's own)"


def piece_size(body_length: int) -> int:
    """The read size of the ``pieces`` delivery: :data:`PIECE` bytes, or more for a body
    longer than :data:`MAX_PIECES` of them (always odd, so pieces keep splitting UTF-8
    characters and CRLFs at shifting places)."""
    return max(PIECE, math.ceil(body_length / MAX_PIECES)) | 1


def _openai(url: str, client: httpx.AsyncClient | None) -> ChatFn:
    return OpenAIChat("recorded", base_url=url, http_client=client, retry=_ONCE)


def _anthropic(url: str, client: httpx.AsyncClient | None) -> ChatFn:
    # A recording holds one reply: a paused turn (``pause_turn``) is read as it is, never
    # sent back for a continuation the recording does not have.
    return AnthropicChat(
        "recorded", base_url=url, http_client=client, retry=_ONCE, pause_continuations=0
    )


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
class VcrDifference:
    """One field where an answer is not what it should be."""

    field: str
    """``text``, ``reasoning``, ``reasoning items``, ``calls`` (their number), ``call 0
    id`` / ``name`` / ``arguments``, ``finish reason``, ``finish reason raw``, ``usage``
    (present or not), ``usage input_tokens`` … ``usage reasoning_tokens``, ``response
    id``, ``model``, ``outcome`` (an answer or an error), ``error kind``, ``error status``,
    ``error retryable``, ``streamed text`` (the deltas against the text); across
    deliveries also ``error in stream``."""
    expected: str
    """What the recorded bytes say (or, across deliveries, what the whole delivery gave),
    shown briefly."""
    got: str
    delivery: Delivery

    def __str__(self) -> str:
        return f"{self.delivery}: {self.field}: expected {self.expected}; got {self.got}"

    def as_dict(self) -> dict[str, str]:
        return {
            "field": self.field,
            "expected": self.expected,
            "got": self.got,
            "delivery": self.delivery,
        }


@frozen
class VcrResult:
    """How one exchange of a cassette replayed."""

    file: str
    index: int
    host: str
    wire: str
    outcome: VcrOutcome
    differences: tuple[VcrDifference, ...] = ()
    """Every difference found (``differing``)."""
    detail: str = ""
    """The first difference; why the exchange is unjudged, crashed or unreadable."""
    seconds: float = 0.0
    """How long its three deliveries took."""

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields that differed, each once, in the order found."""
        return tuple(dict.fromkeys(d.field for d in self.differences))

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "interaction": self.index,
            "host": self.host,
            "wire": self.wire,
            "outcome": self.outcome,
            "fields": list(self.fields),
            "detail": self.detail,
            "differences": [d.as_dict() for d in self.differences],
            "seconds": self.seconds,
        }


@define
class VcrReport:
    """What ``replay-vcr`` found in a folder of cassettes."""

    folder: str
    started: str = ""
    files: int = 0
    """Cassette files read (unreadable ones included, skipped ones not)."""
    other: int = 0
    """Interactions of other paths (not a wire the project speaks), left out."""
    results: list[VcrResult] = field(factory=list)
    unreadable: list[tuple[str, str]] = field(factory=list)
    """Files that could not be read at all, and why."""
    skipped: list[tuple[str, str]] = field(factory=list)
    """Files that are not cassettes (read, but holding no recorded exchanges), and why."""

    def providers(self) -> dict[tuple[str, str], dict[VcrOutcome, int]]:
        """(host, wire) -> how many exchanges had each outcome, hosts sorted."""
        out: dict[tuple[str, str], dict[VcrOutcome, int]] = {}
        for result in sorted(self.results, key=lambda r: (r.host, r.wire)):
            counts = out.setdefault((result.host, result.wire), dict.fromkeys(OUTCOMES, 0))
            counts[result.outcome] += 1
        return out

    @property
    def judged(self) -> int:
        """Exchanges whose answer was held to the recorded bytes (exact, differing, crashed)."""
        return sum(r.outcome in ("exact", "differing", "crashed") for r in self.results)

    @property
    def passed(self) -> bool:
        """Something was judged, and nothing differed, crashed or could not be read
        (unjudged exchanges and skipped files are reported, not failed)."""
        bad = [r for r in self.results if r.outcome in FAILING]
        return self.judged > 0 and not bad and not self.unreadable

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
            "skipped_files": [{"file": f, "reason": r} for f, r in self.skipped],
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
    how: Delivery, response: RecordedResponse, streamed: bool, wire: str
) -> tuple[CallOutcome, list[ChatDelta]]:
    path, factory = ADAPTERS[wire]
    deltas: list[ChatDelta] = []
    if how == "loopback":
        served = served_reply(response, streamed)
        with FakeProviderServer() as server:
            server.handler = lambda _request: served  # a retry gets it again too
            return await replay_call(factory(server.base_url + path, None), deltas), deltas
    size = piece_size(len(response.body)) if how == "pieces" else None
    async with httpx.AsyncClient(transport=_Serve(response, size)) as client:
        return await replay_call(factory(f"http://replay.invalid{path}", client), deltas), deltas


def _brief(value: object) -> str:
    text = repr(value)  # escapes control characters, lone surrogates, line separators
    return text if len(text) <= 120 else text[:119] + "…"


_USAGE_FIELDS = tuple(a.name for a in attrs.fields(Usage))


def _usage_fields(usage: Usage | None) -> dict[str, Any]:
    if usage is None:
        return {"usage": None}
    return {"usage": "reported"} | {f"usage {n}": getattr(usage, n) for n in _USAGE_FIELDS}


def _answer_fields(answer: Answer) -> dict[str, Any]:
    """The expected answer, field by field."""
    out: dict[str, Any] = {
        "outcome": "an answer",
        "text": answer.text,
        "reasoning": answer.reasoning,
        "reasoning items": list(answer.reasoning_items),
        "calls": len(answer.calls),
    }
    for n, call in enumerate(answer.calls):
        out[f"call {n} id"] = call.id if call.id is not None else _OWN_ID
        out[f"call {n} name"] = call.name
        out[f"call {n} arguments"] = call.raw_arguments or call.arguments
    out["finish reason"] = answer.finish_reason
    out["finish reason raw"] = answer.finish_reason_raw
    out |= _usage_fields(answer.usage)
    out["response id"] = answer.response_id
    out["model"] = answer.model
    return out


def _failure_fields(failure: Failure) -> dict[str, Any]:
    return {
        "outcome": "an error",
        "error kind": failure.kind,
        "error status": failure.status,
        "error retryable": failure.retryable,
    }


def _view(
    outcome: ChatResult | ProviderError, deltas: list[ChatDelta], given: set[str]
) -> dict[str, Any]:
    """What one delivery gave, field by field (the names of :func:`_answer_fields`); a call
    id the adapter made up (unique in the reply, not one the provider gave) shows as such."""
    if isinstance(outcome, ProviderError):
        return {
            "outcome": "an error",
            "error kind": outcome.kind,
            "error status": outcome.status,
            "error retryable": outcome.retryable,
            "error in stream": outcome.in_stream,
        }
    message = outcome.message
    out: dict[str, Any] = {
        "outcome": "an answer",
        "text": message.content,
        "reasoning": message.reasoning,
        "reasoning items": list(message.reasoning_items),
        "calls": len(message.tool_calls),
    }
    ids = [c.id for c in message.tool_calls]
    for n, call in enumerate(message.tool_calls):
        own = call.id and ids.count(call.id) == 1 and call.id not in given
        out[f"call {n} id"] = _OWN_ID if own else call.id
        out[f"call {n} name"] = call.name
        out[f"call {n} arguments"] = call.raw_arguments or call.arguments
    out["finish reason"] = outcome.finish_reason
    out["finish reason raw"] = outcome.finish_reason_raw
    out |= _usage_fields(outcome.usage)
    out["response id"] = outcome.response_id
    out["model"] = outcome.model
    out["streamed text"] = "".join(d.text for d in deltas if d.kind == "text")
    return out


def _expected(reading: Reading) -> dict[str, Any] | None:
    outcome = reading.outcome
    if outcome is None:
        return None
    if isinstance(outcome, Failure):
        return _failure_fields(outcome)
    fields = _answer_fields(outcome)
    if reading.streamed:
        fields["streamed text"] = outcome.text  # the text deltas add up to the text
    return fields


def _compare(
    expected: dict[str, Any],
    got: dict[str, Any],
    how: Delivery,
    skip: frozenset[str] = frozenset(),
) -> list[VcrDifference]:
    """The fields of ``expected`` that ``got`` does not match (after an outcome or a
    number of calls that differ, the fields that depend on them are not compared)."""
    if expected.get("outcome") != got.get("outcome"):
        said = _brief(got.get("error kind") or got.get("text"))
        shown = f"{got.get('outcome')} ({said})"
        return [VcrDifference("outcome", str(expected.get("outcome")), shown, how)]
    out = []
    for name, want in expected.items():
        if name in skip:
            continue
        if name.startswith("call ") and expected.get("calls") != got.get("calls"):
            continue
        if name.startswith("usage ") and (got.get("usage") is None or expected["usage"] is None):
            continue
        if got.get(name) != want:
            out.append(VcrDifference(name, _brief(want), _brief(got.get(name)), how))
    return out


async def _replay(exchange: VcrExchange, root: Path) -> VcrResult:
    started = time.monotonic()
    result = await _judge(
        exchange, (_name(exchange.file, root), exchange.index, exchange.host, exchange.wire)
    )
    return attrs.evolve(result, seconds=round(time.monotonic() - started, 3))


async def _judge(exchange: VcrExchange, base: tuple[str, int, str, str]) -> VcrResult:
    if exchange.response is None:
        return VcrResult(*base, "unreadable", detail=exchange.problem)
    if exchange.wire not in ADAPTERS:
        return VcrResult(*base, "no adapter", detail=f"no adapter on the {exchange.wire} wire")
    reading = read_recorded(exchange.response, exchange.wire)  # type: ignore[arg-type]
    expected = _expected(reading)
    given = (
        {c.id for c in reading.outcome.calls if c.id}
        if isinstance(reading.outcome, Answer)
        else set()
    )
    views: dict[Delivery, dict[str, Any]] = {}
    found: list[VcrDifference] = []
    for how in DELIVERIES:
        outcome, deltas = await _deliver(how, exchange.response, reading.streamed, exchange.wire)
        if not isinstance(outcome, ChatResult | ProviderError):
            what = "hung" if outcome is None else f"{type(outcome).__name__}: {outcome}"
            return VcrResult(*base, "crashed", detail=f"{how}: {_brief(what)[1:-1]}")
        views[how] = view = _view(outcome, deltas, given)
        seen = []
        if expected is not None:
            seen = _compare(expected, view, how)
            found += seen
        if how != "whole":  # the same bytes read the same way in every delivery
            found += _compare(views["whole"], view, how, frozenset(d.field for d in seen))
    if found:
        return VcrResult(*base, "differing", tuple(found), str(found[0]))
    if reading.outcome is None:
        return VcrResult(*base, "unjudged", detail=reading.unjudged)
    return VcrResult(*base, "exact")


def _name(file: Path, root: Path) -> str:
    """How reports name a cassette: its path under the folder given."""
    return file.relative_to(root).as_posix() if file.is_relative_to(root) else file.name


async def replay_vcr(
    folder: str | Path, progress: Callable[[VcrResult], object] | None = None
) -> VcrReport:
    """Replay every cassette (``*.yaml`` / ``*.yml`` of VCR.py, ``*.har``; at any depth)
    under ``folder``.

    The exchanges whose request path speaks a wire the project knows (``…/chat/completions``,
    ``…/v1/messages``, ``…/responses``) are replayed through the adapter of that wire in
    three deliveries: whole, in pieces, and over loopback. Each is ``exact``, ``differing``
    (with every difference), ``unjudged`` (with the reason the recording cannot settle it),
    ``crashed``, ``no adapter`` (a wire the project has no adapter for) or ``unreadable``
    (its response cannot be decoded); a file that cannot be read at all is in
    ``unreadable``, one that is not a cassette in ``skipped``. Nothing is raised for a bad
    cassette, and no header of a cassette is ever put in the report. ``progress`` gets each
    result."""
    root = Path(folder)
    report = VcrReport(str(root), datetime.now(UTC).isoformat(timespec="seconds"))
    for file in cassette_files(root):
        cassette = read_cassette(file)
        if cassette.skipped:
            report.skipped.append((_name(file, root), cassette.skipped))
            continue
        report.files += 1
        report.other += cassette.other
        if cassette.problem:
            report.unreadable.append((_name(file, root), cassette.problem))
        for exchange in cassette.exchanges:
            report.results.append(await _replay(exchange, root))
            if progress is not None:
                progress(report.results[-1])
    return report
