"""The recorded-corpus tier: the checks' invariants on real recorded provider bytes.

Each recorded exchange the target's wire reads (by default those of the corpus that ships
with agentfsm, :func:`~.bundled.bundled_corpus`) is served, response by response, by a
:class:`~agentfsm.testing.FakeProviderServer` (real HTTP; streams event by event) to the
adapter the target builds. Every check that declares a corpus invariant (``Check.corpus``)
judges each exchange (:class:`~.exchange.RecordedExchange`): a verdict when the exchange
exercises it, nothing otherwise. The report has one result per check.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path

from attrs import define, field

from agentfsm.adapters.providers import (
    RecordedResponse,
    WireFixture,
    fixture_wire,
    load_wire_fixture,
)
from agentfsm.engine import ChatDelta, ChatFn, UserMessage
from agentfsm.testing import FakeProviderServer, Reply

from ._bundled import INDEX, CorpusMissingError, bundled_corpus, corpus_index
from ._context import RecordedTarget, Wire
from ._exchange import CALL_TIMEOUT, CallOutcome, RecordedExchange, parse_reply
from ._model import QUIRK_NOTES, Check, CheckResult, Group, Mode, Outcome, Report

__all__ = [
    "CALL_TIMEOUT",
    "bundled_corpus",
    "corpus_files",
    "corpus_wires",
    "replay_call",
    "run_corpus",
    "served_reply",
]

_HOP = re.compile(r"(proxy-)?connection|keep-alive|te|trailers?|upgrade|transfer-encoding")


_SUFFIXES = (".json", ".yaml", ".sse", ".jsonl")


def _recorded(path: Path) -> bool:
    """Not a ``.json`` file other than a wire fixture (a report next to the recordings)."""
    if path.suffix != ".json":
        return True
    with path.open("rb") as file:
        return b'"format": "agentfsm.wire-fixture/' in file.read(200)


def _paths(wire_dir: Path) -> list[Path]:
    """The recorded files of a folder: those its ``index.json`` lists, else every recorded
    file in it or one folder down. A missing or empty folder is an error."""
    if not wire_dir.is_dir():
        raise CorpusMissingError(f"no recorded corpus: {wire_dir} is not a folder")
    if (wire_dir / INDEX).is_file():
        return [wire_dir / entry["file"] for entry in corpus_index(wire_dir)["exchanges"]]
    found = [p for pattern in ("*", "*/*") for p in wire_dir.glob(pattern)]  # flat too
    paths = sorted(p for p in found if p.is_file() and p.suffix in _SUFFIXES and _recorded(p))
    if not paths:
        raise CorpusMissingError(f"no recorded exchanges in {wire_dir}")
    return paths


def _all_fixtures(wire_dir: Path | None) -> list[WireFixture]:
    folder = bundled_corpus() if wire_dir is None else Path(wire_dir)
    return [load_wire_fixture(p) for p in _paths(folder)]


def _whole(fixture: WireFixture) -> bool:
    return all(response.whole for response in fixture.responses)


def _fixtures(wire_dir: Path | None, wire: Wire) -> tuple[list[WireFixture], int]:
    """The replayable fixtures of ``wire``, and how many of that wire are not (a recording
    that cut a body, kept it content-encoded, or holds it only up to an abort or a broken
    connection would replay as another answer)."""
    fixtures = [f for f in _all_fixtures(wire_dir) if fixture_wire(f) == wire]
    whole = [f for f in fixtures if _whole(f)]
    return whole, len(fixtures) - len(whole)


def corpus_files(wire_dir: Path | None, wire: Wire) -> list[Path]:
    """The recorded files of ``wire_dir`` (``None``: the bundled corpus) an adapter of
    ``wire`` reads."""
    return [fixture.path for fixture in _fixtures(wire_dir, wire)[0]]


def corpus_wires(wire_dir: Path | None) -> dict[str | None, list[Path]]:
    """The recorded files of ``wire_dir`` (``None``: the bundled corpus) by the wire each
    speaks (:func:`~agentfsm.adapters.providers._replay.fixture_wire`: the file's ``wire``
    field, its API, the path of its requests, the shape of its body); ``None`` gathers the
    files no adapter of the project reads. A missing or empty folder raises
    :class:`~.bundled.CorpusMissingError`."""
    out: dict[str | None, list[Path]] = {}
    for fixture in _all_fixtures(wire_dir):
        out.setdefault(fixture_wire(fixture), []).append(fixture.path)
    return out


def served_reply(response: RecordedResponse, streamed: bool) -> Reply:
    """How a :class:`~agentfsm.testing.FakeProviderServer` serves a recorded response over
    loopback: its status, headers (hop-by-hop ones left out) and body; a stream event by
    event."""
    headers = tuple((k, v) for k, v in response.headers if not _HOP.fullmatch(k.lower()))
    events = re.split(rb"(?<=\n\n)|(?<=\r\n\r\n)", response.body)  # streams: by event
    frames = tuple(e for e in events if e) if streamed else None
    return Reply(response.status, headers, response.body, frames)


async def replay_call(chat: ChatFn, deltas: list[ChatDelta]) -> CallOutcome:
    """One call of ``chat`` (the streamed pieces into ``deltas``), closed after: what it
    gave, an exception it raised, or ``None`` when it hung past :data:`CALL_TIMEOUT`."""
    try:
        async with asyncio.timeout(CALL_TIMEOUT) as deadline:
            return await chat([UserMessage("replay")], [], max_tokens=None, on_delta=deltas.append)
    except Exception as error:
        return None if isinstance(error, TimeoutError) and deadline.expired() else error
    finally:
        with suppress(Exception):  # adapters without ``aclose`` included
            await chat.aclose()  # type: ignore[attr-defined]


@define
class _Tally:
    files: set[str] = field(factory=set)
    failures: list[tuple[str, str, str]] = field(factory=list)  # where, expected, got


async def _replay(
    target: RecordedTarget,
    fixture: WireFixture,
    judges: list[Check],
    tallies: dict[str, _Tally],
) -> None:
    label = fixture.label
    with FakeProviderServer() as server:
        root = server.base_url
        base_url = f"{root}/v1" if target.wire == "openai-chat" else root
        for index, response in enumerate(fixture.responses):
            where = label if len(fixture.responses) == 1 else f"{label} #{index}"
            recorded = parse_reply(response, target.wire)
            reply = served_reply(response, recorded.streamed)
            server.handler = lambda _request, reply=reply: reply  # retries get it again too
            before, deltas = len(server.requests), list[ChatDelta]()
            outcome = await replay_call(target.factory(base_url), deltas)
            text = "".join(d.text for d in deltas if d.kind == "text")
            exchange = RecordedExchange(recorded, outcome, text, len(server.requests) - before)
            for check in judges:
                assert check.corpus is not None
                verdict = check.corpus(exchange)
                if verdict is None:
                    continue
                tally = tallies.setdefault(check.id, _Tally())
                tally.files.add(label)
                if not verdict.holds:
                    tally.failures.append((where, verdict.expected, verdict.got))


def _result(check: Check, tally: _Tally | None, target: RecordedTarget) -> CheckResult:
    base: tuple[str, str, Group, Mode] = (check.id, check.name, check.group, "recorded")
    if tally is None:
        return CheckResult(*base, "skip", "no recorded file exercises this")
    count = f"{len(tally.files)} recorded file{'s' if len(tally.files) != 1 else ''}"
    reason = target.xfail.get(check.id)
    if not tally.failures:
        marked = f"; passes although marked xfail ({reason})" if reason else ""
        return CheckResult(*base, "pass", f"holds on {count}{marked}")
    failing = sorted({where.split(" #")[0] for where, _, _ in tally.failures})
    details = "; ".join(f"{w}: expected {e}; got {g}" for w, e, g in tally.failures[:3])
    note = f" (known quirk: {', '.join(check.quirks)}; see {QUIRK_NOTES})" if check.quirks else ""
    message = f"fails on {len(failing)} of {count} ({', '.join(failing)}): {details}{note}"
    message += f"; xfail: {reason}" if reason else ""
    _, expected, got = tally.failures[0]
    outcome: Outcome = "xfail" if reason else "fail"
    return CheckResult(*base, outcome, message, expected, got, check.quirks)


async def run_corpus(
    target: RecordedTarget,
    wire_dir: Path | None = None,
    progress: Callable[[CheckResult], object] | None = None,
    *,
    checks: Iterable[Check] | None = None,
) -> Report:
    """Replay the recorded files of ``target.wire`` through ``target.factory``'s adapter.

    ``wire_dir`` is a corpus folder (with an ``index.json``), a ``--record`` folder or a
    folder of provider folders; ``None`` is the corpus that ships with agentfsm. A missing
    or empty folder raises :class:`~.bundled.CorpusMissingError`. Only the files of
    ``target.wire`` are replayed (see :func:`corpus_wires`), and of those only the ones
    whose bodies are whole (a recording past its size limit, or of a call aborted midway,
    is not).
    Each of ``checks`` (all of them by default) that declares a corpus invariant judges every
    exchange. One result per check: ``skip`` when no file exercises it, ``fail`` (or
    ``xfail``) naming the failing files; ``progress`` gets each result."""
    from ._checks import ALL_CHECKS

    chosen = list(checks) if checks is not None else list(ALL_CHECKS)
    judges = [check for check in chosen if check.corpus is not None]
    started = datetime.now(UTC).isoformat(timespec="seconds")
    fixtures, cut = _fixtures(wire_dir, target.wire)
    tallies: dict[str, _Tally] = {}
    for fixture in fixtures:
        await _replay(target, fixture, judges, tallies)
    label = f"{target.name} on recorded corpus ({len(fixtures)} files"
    label += f"; {cut} with a cut, encoded or unfinished body left out)" if cut else ")"
    report = Report(label, "recorded", started=started, wire=target.wire)
    for check in chosen:
        report.results.append(_result(check, tallies.get(check.id), target))
        if progress is not None:
            progress(report.results[-1])
    return report
