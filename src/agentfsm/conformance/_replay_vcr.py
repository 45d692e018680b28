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
- ``unjudged``: the recording cannot settle what the server sent (a redirect, a coding the
  reading does not undo, tool-call fragments the wire's rules part more than one way), or
  the replay cannot send it as recorded (a header HTTP does not allow, an interim 1xx
  response, a 204 with a body): the reason is given, and only the deliveries' agreement
  is checked (none is made when the replay cannot send the response);
- ``crashed``: the adapter raised something other than a
  :class:`~agentfsm.adapters.providers.ProviderError`, or hung (see :func:`_bounded`), or
  the second reading itself failed; the exchange's detail says which.

Nothing one exchange does reaches another: whatever is raised while it is judged is that
exchange's verdict, and a file that cannot be read is reported and passed.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
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
from agentfsm.engine import ChatDelta, ChatFn, ChatResult, Usage, UserMessage
from agentfsm.testing import FakeProviderServer

from ._corpus import served_reply
from ._exchange import CallOutcome
from ._reading import Answer, Failure, Reading, read_recorded
from ._vcr import Cassette, VcrExchange, cassette_files, read_cassette

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
"""Reads of one body at most in the ``pieces`` delivery, and frames at most over loopback:
a larger body comes in larger pieces (whole events over loopback), so what a delivery costs
grows with the body, never with the number of its pieces."""
IDLE_SECONDS = 10.0
"""A delivery is hung when the process spends no CPU time at all for this long: the
adapter waits for what never comes (the body served has ended)."""
CPU_SECONDS = 20.0
CPU_SECONDS_PER_MIB = 4.0
"""A delivery is hung, too, once it has spent this much CPU time plus
:data:`CPU_SECONDS_PER_MIB` per MiB of body: many times what reading a body costs. CPU
time, unlike a clock, does not run faster when the machine is busy."""
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
_TICK = 0.25


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
    """``text``, ``reasoning``, ``reasoning items`` (their number), ``reasoning item 0`` (what
    the next request sends back: a Responses item's encrypted content, a thinking block's
    text and signature, a redacted block's data), ``calls`` (their number), ``call 0 id`` /
    ``name`` / ``arguments``, ``finish reason``, ``finish reason raw``, ``usage``
    (present or not), ``usage input_tokens`` … ``usage reasoning_tokens``, ``response
    id``, ``model``, ``outcome`` (an answer or an error), ``error kind``, ``error status``,
    ``error retryable``, ``streamed text`` and ``streamed reasoning`` (the deltas against
    the text and the reasoning); across
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
    whole or in pieces of ``size`` bytes; what goes wrong in serving it is kept in
    :attr:`failed` (the replay's fault, never the adapter's)."""

    def __init__(self, response: RecordedResponse, size: int | None) -> None:
        self.response, self.size = response, size
        self.failed = ""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            headers = [(k.encode("ascii"), v.encode("utf-8")) for k, v in self.response.headers]
            return httpx.Response(
                self.response.status,
                headers=headers,
                stream=_Pieces(self.response.body, self.size),
                request=request,
            )
        except Exception as error:
            self.failed = type(error).__name__
            raise


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_NOT_IN_VALUES = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _unservable(response: RecordedResponse) -> str:
    """Why the replay cannot send ``response`` as recorded (empty when it can): what is
    said holds no header's name or value."""
    if response.status < 200:
        return f"an interim {response.status} response was recorded, not the answer"
    if response.status in (204, 304) and response.body:
        return f"a {response.status} response with a body, which HTTP never sends"
    for name, value in response.headers:
        if not _TOKEN.fullmatch(name) or _NOT_IN_VALUES.search(value):
            return "a response header the replay cannot send as recorded (its name or value)"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "a response header the replay cannot send as recorded (its value)"
    return ""


_EVENT_END = re.compile(rb"(?<=\n\n)|(?<=\r\n\r\n)|(?<=\r\r)")


def _loopback_reply(response: RecordedResponse, streamed: bool) -> Any:
    """How the loopback server sends ``response``: a stream event by event, consecutive
    events sent together once there are more than :data:`MAX_PIECES` of them (a body
    still in its coding in pieces), any other body whole."""
    reply = served_reply(response, streamed)
    if not streamed:
        return attrs.evolve(reply, frames=None)
    size = piece_size(len(response.body))
    encoded = any(k.lower() == "content-encoding" for k, _ in response.headers)
    if encoded:
        parts = [response.body[i : i + size] for i in range(0, len(response.body), size)]
    else:
        parts = [e for e in _EVENT_END.split(response.body) if e]
    frames: list[bytes] = []
    for part in parts:
        if frames and len(frames[-1]) < size:
            frames[-1] += part
        else:
            frames.append(part)
    return attrs.evolve(reply, frames=tuple(frames))


async def _bounded(chat: ChatFn, deltas: list[ChatDelta], size: int) -> CallOutcome:
    """One call of ``chat`` (the streamed pieces into ``deltas``), closed after: what it gave,
    what it raised, or ``None`` when it hung: no CPU time spent by the process for
    :data:`IDLE_SECONDS`, or more spent than its budget (:data:`CPU_SECONDS` and
    :data:`CPU_SECONDS_PER_MIB`). Both count work done, not time passed, so a busy machine
    makes no delivery hang."""
    budget = CPU_SECONDS + CPU_SECONDS_PER_MIB * size / (1024 * 1024)
    call = asyncio.ensure_future(
        chat([UserMessage("replay")], [], max_tokens=None, on_delta=deltas.append)
    )
    begun = last = time.process_time()
    idle = 0.0
    try:
        while not call.done():
            await asyncio.wait({call}, timeout=_TICK)
            spent = time.process_time()
            idle = idle + _TICK if spent - last < _TICK / 50 else 0.0
            last = spent
            if not call.done() and (idle >= IDLE_SECONDS or spent - begun > budget):
                call.cancel()
                await asyncio.wait({call}, timeout=IDLE_SECONDS)
                return None
        error = call.exception()
        return error if isinstance(error, Exception) else call.result()
    finally:
        with suppress(Exception):  # adapters without ``aclose`` included
            await asyncio.wait_for(chat.aclose(), IDLE_SECONDS)  # type: ignore[attr-defined]


async def _deliver(
    how: Delivery, response: RecordedResponse, streamed: bool, wire: str
) -> tuple[CallOutcome, list[ChatDelta], str]:
    """One delivery: what the adapter gave, its deltas, and what went wrong in the replay
    itself, outside the adapter (the error's type; empty when nothing did)."""
    path, factory = ADAPTERS[wire]
    deltas: list[ChatDelta] = []
    if how == "loopback":
        try:
            served = _loopback_reply(response, streamed)
            server = FakeProviderServer().start()
        except Exception as error:
            return None, deltas, type(error).__name__
        try:
            server.handler = lambda _request: served  # a retry gets it again too
            chat = factory(server.base_url + path, None)
            return await _bounded(chat, deltas, len(response.body)), deltas, ""
        finally:
            with suppress(RuntimeError):  # a server thread slow to end: nothing to judge
                await asyncio.to_thread(server.stop)
    transport = _Serve(response, piece_size(len(response.body)) if how == "pieces" else None)
    async with httpx.AsyncClient(transport=transport) as client:
        chat = factory(f"http://replay.invalid{path}", client)
        outcome = await _bounded(chat, deltas, len(response.body))
    return outcome, deltas, transport.failed


def _brief(value: object) -> str:
    text = repr(value)  # escapes control characters, lone surrogates, line separators
    return text if len(text) <= 120 else text[:119] + "…"


_USAGE_FIELDS = tuple(a.name for a in attrs.fields(Usage))


def _usage_fields(usage: Usage | None) -> dict[str, Any]:
    if usage is None:
        return {"usage": None}
    return {"usage": "reported"} | {f"usage {n}": getattr(usage, n) for n in _USAGE_FIELDS}


def _items(items: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    return {"reasoning items": len(items)} | {
        f"reasoning item {n}": item for n, item in enumerate(items)
    }


def _answer_fields(answer: Answer) -> dict[str, Any]:
    """The expected answer, field by field."""
    out: dict[str, Any] = {
        "outcome": "an answer",
        "text": answer.text,
        "reasoning": answer.reasoning,
        **_items(answer.reasoning_items),
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
        **_items(message.reasoning_items),
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
    out["streamed reasoning"] = "".join(d.text for d in deltas if d.kind == "thinking")
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
        fields["streamed reasoning"] = outcome.reasoning or ""  # and the thinking deltas
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
        if name.startswith("reasoning item ") and expected.get("reasoning items") != got.get(
            "reasoning items"
        ):
            continue
        if name.startswith("usage ") and (got.get("usage") is None or expected["usage"] is None):
            continue
        if not _same(got.get(name), want):
            out.append(VcrDifference(name, _brief(want), _brief(got.get(name)), how))
    return out


def _same(got: object, want: object) -> bool:
    """Whether two values are the same JSON value: of the same types all the way down
    (``1``, ``1.0`` and ``true`` are three values, as they are three texts, and ``NaN`` is
    itself), the members of an object in any order (JSON does not order them)."""
    return type(got) is type(want) and _canonical(got) == _canonical(want)


def _canonical(value: object) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=repr)
    except (TypeError, ValueError):  # keys that are not all strings, a cycle
        return repr(value)


async def _replay(exchange: VcrExchange, root: Path) -> VcrResult:
    started = time.monotonic()
    base = (_name(exchange.file, root), exchange.index, exchange.host, exchange.wire)
    try:
        result = await _judge(exchange, base)
    except Exception as error:  # the kit's own fault: this exchange's verdict, no other's
        # Only the type: the message of an error in serving could hold a header's value.
        what = f"the replay itself failed ({type(error).__name__})"
        result = VcrResult(*base, "crashed", detail=what)
    return attrs.evolve(result, seconds=round(time.monotonic() - started, 3))


async def _judge(exchange: VcrExchange, base: tuple[str, int, str, str]) -> VcrResult:
    if exchange.response is None:
        return VcrResult(*base, "unreadable", detail=exchange.problem)
    if exchange.wire not in ADAPTERS:
        return VcrResult(*base, "no adapter", detail=f"no adapter on the {exchange.wire} wire")
    unservable = _unservable(exchange.response)
    if unservable:
        return VcrResult(*base, "unjudged", detail=unservable)
    try:
        reading = read_recorded(exchange.response, exchange.wire)  # type: ignore[arg-type]
    except Exception as error:
        what = f"second reading: {type(error).__name__}: {error}"
        return VcrResult(*base, "crashed", detail=_brief(what)[1:-1])
    expected = _expected(reading)
    given = (
        {c.id for c in reading.outcome.calls if c.id}
        if isinstance(reading.outcome, Answer)
        else set()
    )
    views: dict[Delivery, dict[str, Any]] = {}
    found: list[VcrDifference] = []
    for how in DELIVERIES:
        outcome, deltas, failed = await _deliver(
            how, exchange.response, reading.streamed, exchange.wire
        )
        if failed:
            why = f"the replay could not serve the response as recorded ({failed})"
            return VcrResult(*base, "unjudged", detail=why)
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
    cassette, or by one exchange (its verdict says what went wrong), and no header of a
    cassette is ever put in the report. ``progress`` gets each result."""
    root = Path(folder)
    report = VcrReport(str(root), datetime.now(UTC).isoformat(timespec="seconds"))
    for file in cassette_files(root):
        try:
            cassette = read_cassette(file)
        except Exception as error:  # the kit's own fault: this file is reported, not the run
            cassette = Cassette(file, problem=f"could not be read ({type(error).__name__})")
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
