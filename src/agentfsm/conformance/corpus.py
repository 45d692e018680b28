"""The recorded-corpus tier: the checks' invariants on real recorded provider bytes.

Each file of ``shared/wire`` the target's wire reads is served, response by response, by a
:class:`~agentfsm.testing.FakeProviderServer` (real HTTP; streams event by event) to the
adapter the target builds. What the bytes say (finish, tool calls, usage, an error) decides
which invariants apply; each belongs to a check, and the report has one result per check.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeAlias

from attrs import define, field

from agentfsm.adapters.providers import ProviderError, load_wire_fixture
from agentfsm.adapters.providers.errors import is_overflow_message
from agentfsm.adapters.providers.replay import RecordedResponse, WireFixture, fixture_wire
from agentfsm.engine.messages import ChatResult, UserMessage
from agentfsm.engine.protocols import ChatDelta
from agentfsm.testing import FakeProviderServer, Reply

from .context import AdapterTarget, Wire
from .model import QUIRK_NOTES, Check, CheckResult, Group, Mode, Outcome, Report

__all__ = ["CALL_TIMEOUT", "corpus_files", "run_corpus"]

CALL_TIMEOUT = 30.0
"""Seconds one replayed call may take; past that it counts as a hang (check W2)."""

_HOP = re.compile(r"(proxy-)?connection|keep-alive|te|trailers?|upgrade|transfer-encoding")
_QUOTA = re.compile(r"insufficient[_ ]quota|exceeded your current quota|billing|credit", re.I)

_Verdict: TypeAlias = tuple[str, tuple[str, str] | None]  # check id, (expected, got) if broken
_Outcome: TypeAlias = ChatResult | Exception | None  # what a call gave; ``None``: it hung


def _fixtures(wire_dir: Path, wire: Wire) -> list[WireFixture]:
    found = [p for pattern in ("*", "*/*") for p in Path(wire_dir).glob(pattern)]  # flat too
    paths = sorted(p for p in found if p.is_file() and p.suffix in (".yaml", ".sse", ".jsonl"))
    fixtures = [load_wire_fixture(p) for p in paths]
    return [f for f in fixtures if fixture_wire(f) == wire]


def corpus_files(wire_dir: Path, wire: Wire) -> list[Path]:
    """The recorded files of ``wire_dir`` (``shared/wire``) an adapter of ``wire`` reads."""
    return [fixture.path for fixture in _fixtures(wire_dir, wire)]


@define
class _RawCall:
    id: str = ""
    name: str = ""
    text: str = ""  # the argument fragments, concatenated
    blank: bool = False  # a later fragment carries an empty id or name

    def arguments(self) -> dict[str, Any] | None:  # None: not a JSON object
        try:
            value = json.loads(self.text) if self.text.strip() else {}
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


@define
class _Raw:  # what the recorded bytes of one response say
    status: int
    streamed: bool = False
    error: str | None = None  # the error body or event, when the response is a failure
    terminal: bool = False  # the stream ends with ``[DONE]`` or ``message_stop``
    finish: list[str] = field(factory=list)
    text: str = ""
    model: str = ""
    calls: dict[Any, _RawCall] = field(factory=dict)
    no_index: bool = False  # tool-call fragments without an ``index``
    usages: list[dict[str, Any]] = field(factory=list)  # one per payload carrying usage
    empty_choices_usage: dict[str, Any] | None = None


def _parse(response: RecordedResponse, wire: Wire) -> _Raw:
    raw = _Raw(response.status)
    text = response.body.decode("utf-8", "replace")
    content_type = {k.lower(): v for k, v in response.headers}.get("content-type", "")
    payloads: list[Any] = []
    if "event-stream" in content_type or re.search(r"^data:", text, re.M):
        raw.streamed = True
        for line in re.split(r"\r\n|\r|\n", text):
            if line.startswith("event:") and line[6:].strip() == "error":
                raw.error = raw.error or "event: error"
            elif line.startswith("data:"):
                raw.terminal = raw.terminal or line[5:].strip() == "[DONE]"
                with suppress(ValueError):
                    payloads.append(json.loads(line[5:]))
    elif text.strip():
        with suppress(ValueError):
            payloads.append(json.loads(text))
    if response.status >= 400:
        raw.error = text or f"HTTP {response.status}"
    elif raw.streamed and not payloads and not raw.terminal:
        raw.error = "an empty 200 stream"  # Q26: never an empty success
    for payload in (p for p in payloads if isinstance(p, dict)):
        if raw.streamed and (payload.get("type") == "error" or payload.get("error")):
            raw.error = json.dumps(payload)
        holders = (payload, payload.get("message"), payload.get("x_groq"))
        raw.usages += [h["usage"] for h in holders if isinstance(h, dict) and h.get("usage")][:1]
        (_anthropic if wire == "anthropic" else _openai)(raw, payload)
    return raw


def _openai(raw: _Raw, payload: dict[str, Any]) -> None:
    raw.model = str(payload.get("model") or raw.model)
    choices = payload.get("choices")
    if choices == [] and isinstance(payload.get("usage"), dict):
        raw.empty_choices_usage = payload["usage"]
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            continue
        if choice.get("finish_reason"):
            raw.finish.append(str(choice["finish_reason"]))
        part = choice.get("delta" if raw.streamed else "message")  # some streams send both
        if not isinstance(part, dict):
            continue
        for value in (part.get("content"), part.get("refusal")):
            if isinstance(value, list):  # content parts: only the visible text counts
                parts = [p for p in value if isinstance(p, dict) and p.get("type") == "text"]
                value = "".join(str(p.get("text", "")) for p in parts)
            raw.text += value if isinstance(value, str) else ""
        last: Any = None
        fragments = [f for f in part.get("tool_calls") or [] if isinstance(f, dict)]
        for position, fragment in enumerate(fragments):
            function = fragment.get("function") or {}
            fid, name, args = fragment.get("id"), function.get("name"), function.get("arguments")
            if not raw.streamed:
                key: Any = ("n", len(raw.calls))
            elif "index" in fragment:
                key = ("i", fragment["index"])
            else:
                raw.no_index = True
                key = ("id", fid) if fid else (last or ("n", position))
            call, last = raw.calls.setdefault(key, _RawCall()), key
            call.blank = call.blank or (bool(call.id or call.name) and "" in (fid, name))
            call.id = call.id or (fid if isinstance(fid, str) else "")
            call.name = call.name or (name if isinstance(name, str) else "")
            call.text += json.dumps(args) if isinstance(args, dict) else str(args or "")


def _anthropic(raw: _Raw, payload: dict[str, Any]) -> None:
    kind, delta = payload.get("type"), payload.get("delta")
    blocks: list[tuple[Any, Any]] = []
    message = payload.get("message") if kind == "message_start" else payload
    if isinstance(message, dict) and kind in ("message", "message_start"):
        raw.model = str(message.get("model") or raw.model)
        raw.finish += [str(message["stop_reason"])] if message.get("stop_reason") else []
        blocks = [(("n", i), block) for i, block in enumerate(message.get("content") or [])]
    elif kind == "content_block_start":
        blocks = [(("i", payload.get("index")), payload.get("content_block"))]
    elif kind == "content_block_delta" and isinstance(delta, dict):
        raw.text += str(delta.get("text", "")) if delta.get("type") == "text_delta" else ""
        call = raw.calls.get(("i", payload.get("index")))
        if call is not None and delta.get("type") == "input_json_delta":
            call.text += str(delta.get("partial_json", ""))
    elif kind == "message_delta" and isinstance(delta, dict) and delta.get("stop_reason"):
        raw.finish.append(str(delta["stop_reason"]))
    raw.terminal = raw.terminal or kind == "message_stop"
    for key, block in blocks:
        if isinstance(block, dict) and block.get("type") == "text":
            raw.text += str(block.get("text", ""))
        elif isinstance(block, dict) and block.get("type") == "tool_use":
            ident, name = str(block.get("id", "")), str(block.get("name", ""))
            arguments = json.dumps(block["input"]) if block.get("input") else ""
            raw.calls[key] = _RawCall(ident, name, arguments)


def _ints(obj: Any, *keys: str) -> list[int]:
    """Every integer under one of ``keys``, at any depth (outer ones first)."""
    pairs: list[tuple[Any, Any]] = list(obj.items() if isinstance(obj, dict) else [])
    pairs += enumerate(obj) if isinstance(obj, list) else []
    found = [v for k, v in pairs if k in keys and isinstance(v, int)]
    return found + [n for _, v in pairs for n in _ints(v, *keys)]


def _v(check: str, ok: bool, expected: str, got: object) -> _Verdict:
    if isinstance(got, ProviderError):
        got = f"ProviderError({got.kind}, status={got.status}, in_stream={got.in_stream})"
    elif isinstance(got, ChatResult):
        text, calls = got.message.content, len(got.message.tool_calls)
        got = f"a success (finish {got.finish_reason!r}, text {text!r:.60}, {calls} calls)"
    text = got if isinstance(got, str) else repr(got)
    return (check, None if ok else (expected, text if len(text) <= 200 else text[:199] + "…"))


def _judge_error(raw: _Raw, outcome: _Outcome, requests: int) -> Iterator[_Verdict]:
    error = outcome if isinstance(outcome, ProviderError) else None
    words, status = raw.error or "", raw.status
    if status >= 400:
        ok = error is not None and error.status == status and not error.in_stream
        yield _v("W5", ok, f"a ProviderError with status {status}", outcome)
    else:
        ok = error is not None and error.in_stream
        yield _v("W4", ok, "a ProviderError marked in_stream, never a success", outcome)
    if status == 429:
        ok = error is not None and error.kind != "context_overflow"
        yield _v("E7", ok, "throttling is not an overflow", outcome)
        check, kind = ("E4", "quota") if _QUOTA.search(words) else ("E3", "rate_limit")
    elif is_overflow_message(words) or "context_length_exceeded" in words:
        check, kind = "E7", "context_overflow"
    elif status in (401, 403):
        check, kind = "E1", "auth"
    elif status in (503, 529) or "overloaded_error" in words:
        check, kind = "E5", "overloaded"
    elif status >= 400:
        check, kind = ("E6", "server") if status >= 500 else ("E2", "bad_request")
    else:
        return  # another in-stream error: W4 only
    once = kind in ("auth", "bad_request", "context_overflow", "quota")  # never retried
    ok = error is not None and error.kind == kind and (requests == 1 or not once)
    got = outcome if error is None or error.kind != kind else f"{requests} requests"
    yield _v(check, ok, f"kind {kind}" + (" after exactly 1 request" if once else ""), got)


def _judge_tools(raw: _Raw, result: ChatResult | None, outcome: _Outcome) -> Iterator[_Verdict]:
    wanted, calls = list(raw.calls.values()), list(result.message.tool_calls) if result else []
    pairs = [(c.id, c.name) for c in calls] if result else outcome
    finish = result.finish_reason if result else outcome
    yield _v("T2", finish == "tool_calls", f"finish 'tool_calls' (recorded {raw.finish})", finish)
    if len(wanted) == 1:
        ok = len(calls) == 1 and calls[0].name == wanted[0].name and bool(calls[0].id)
        ok = ok and calls[0].id == (wanted[0].id or calls[0].id)
        yield _v("T1", ok, f"one call {wanted[0].name!r} id {wanted[0].id!r}", pairs)
    else:
        ids = [c.id for c in calls]
        ok = [c.name for c in calls] == [w.name for w in wanted]
        ok = ok and all(ids) and len(set(ids)) == len(ids)
        yield _v("T8", ok, f"{[w.name for w in wanted]} with distinct ids", pairs)
    parsed = [w.arguments() for w in wanted]
    args = [c.arguments if c.raw_arguments is None else c.raw_arguments for c in calls]
    if all(p is not None for p in parsed):
        yield _v("T5", args == parsed, f"arguments {parsed}", args if result else outcome)
    if {} in parsed:
        empty = [a for a, p in zip(args, parsed, strict=False) if p == {}]
        ok = len(args) == len(parsed) and all(a == {} for a in empty)
        yield _v("T6", ok, "arguments {} where none were sent", args if result else outcome)
    if raw.no_index:
        yield _v("T3", len(calls) == len(wanted), f"{len(wanted)} calls", pairs)
    if any(w.blank for w in wanted):
        yield _v("T13", len(calls) == len(wanted), f"{len(wanted)} calls, no phantom", pairs)


def _judge(raw: _Raw, outcome: _Outcome, streamed: str, requests: int) -> Iterator[_Verdict]:
    if outcome is None:
        yield ("W2", ("the call completes (no hang)", f"no answer in {CALL_TIMEOUT:g} s"))
        return
    unexpected = isinstance(outcome, Exception) and not isinstance(outcome, ProviderError)
    crash = f"unexpected {type(outcome).__name__}: {str(outcome)[:200]}"
    yield _v("W1", not unexpected, "a ChatResult or a ProviderError", crash)
    if unexpected:
        return
    if raw.streamed and not raw.terminal:
        yield ("W2", None)
    if raw.error is not None:
        yield from _judge_error(raw, outcome, requests)
        return
    result = outcome if isinstance(outcome, ChatResult) else None
    content = result.message.content if result else None
    finish = result.finish_reason if result else None
    summary: object = result if result is not None else outcome
    if raw.calls:
        yield from _judge_tools(raw, result, outcome)
    else:
        yield _v("T11", bool(result and not result.message.tool_calls), "no tool calls", summary)
    if {"length", "max_tokens"} & set(raw.finish):
        ok = finish == "length" and bool(content or not raw.text)
        yield _v("A3", ok, "finish 'length', the partial text kept", summary)
    elif not raw.calls:
        stop = "stop" if {"stop", "end_turn", "stop_sequence"} & set(raw.finish) else None
        ok = isinstance(content, str) and finish is not None and finish == (stop or finish)
        ok = ok and content == raw.text and bool(result and (result.model or not raw.model))
        yield _v("A1", ok, f"the recorded text, finish {stop or 'set'}, the model", summary)
    if raw.streamed:
        got: object = f"deltas {streamed!r:.80}, final {content!r:.80}" if result else outcome
        yield _v("A2", result is not None and streamed == (content or ""), "equal texts", got)
    usage = result.usage if result else None
    got = usage if result is not None else outcome
    if _ints(raw.usages, "prompt_tokens", "completion_tokens", "input_tokens", "output_tokens"):
        kinds = ("input", "output", "cache_read", "cache_write", "reasoning")
        counts = [getattr(usage, f"{kind}_tokens", None) for kind in kinds]
        ok = all(isinstance(n, int) and n >= 0 for n in counts)
        yield _v("U1", ok, "usage with non-negative integer counts", got)
    outputs = [n for u in raw.usages for n in _ints(u, "completion_tokens", "output_tokens")[:1]]
    if raw.streamed and len(raw.usages) > 1 and outputs:
        # The last cumulative count (plus reasoning, where the provider leaves it out).
        extra = max(_ints(raw.usages[-1], "reasoning_tokens"), default=0)
        ok = usage is not None and usage.output_tokens in (outputs[-1], outputs[-1] + extra)
        yield _v("U3", ok, f"output_tokens the last cumulative count ({outputs[-1]})", got)
    if max(_ints(raw.usages, "reasoning_tokens"), default=0) > 0:
        ok = usage is not None and 0 < usage.reasoning_tokens <= usage.output_tokens
        yield _v("U5", ok, "0 < reasoning_tokens <= output_tokens", got)
    read = max(_ints(raw.usages, "cached_tokens", "cache_read_input_tokens"), default=0)
    written = max(_ints(raw.usages, "cache_creation_input_tokens", "cache_write_tokens"), default=0)
    if read or written:
        cache = (usage.cache_read_tokens, usage.cache_write_tokens) if usage else (0, 0)
        ok = usage is not None and sum(cache) <= usage.input_tokens
        ok = ok and all(n > 0 for n, raw_n in zip(cache, (read, written), strict=True) if raw_n)
        yield _v("U4", ok, f"cache read {read} / written {written} inside input_tokens", got)
    if raw.empty_choices_usage is not None:
        prompt = _ints(raw.empty_choices_usage, "prompt_tokens")[:1]
        ok = usage is not None and [usage.input_tokens] == (prompt or [usage.input_tokens])
        yield _v("W3", ok, f"the usage of the chunk without choices (prompt {prompt})", got)


async def _call(target: AdapterTarget, base_url: str, deltas: list[ChatDelta]) -> _Outcome:
    chat = target.factory(base_url)
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


async def _replay(target: AdapterTarget, fixture: WireFixture, tallies: dict[str, _Tally]) -> None:
    label = f"{fixture.path.parent.name}/{fixture.path.name}"
    with FakeProviderServer() as server:
        root = server.base_url
        base_url = f"{root}/v1" if target.wire == "openai-chat" else root
        for index, response in enumerate(fixture.responses):
            where = label if len(fixture.responses) == 1 else f"{label} #{index}"
            raw = _parse(response, target.wire)
            headers = tuple((k, v) for k, v in response.headers if not _HOP.fullmatch(k.lower()))
            events = re.split(rb"(?<=\n\n)|(?<=\r\n\r\n)", response.body)  # streams: by event
            frames = tuple(e for e in events if e) if raw.streamed else None
            reply = Reply(response.status, headers, response.body, frames)
            server.handler = lambda _request, reply=reply: reply  # retries get it again too
            before, deltas = len(server.requests), list[ChatDelta]()
            outcome = await _call(target, base_url, deltas)
            requests = len(server.requests) - before
            text = "".join(d.text for d in deltas if d.kind == "text")
            for check, failure in _judge(raw, outcome, text, requests):
                tally = tallies.setdefault(check, _Tally())
                tally.files.add(label)
                if failure is not None:
                    tally.failures.append((where, *failure))


def _result(check: Check, tally: _Tally | None, target: AdapterTarget) -> CheckResult:
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
    target: AdapterTarget, wire_dir: Path, progress: Callable[[CheckResult], object] | None = None
) -> Report:
    """Replay the recorded files of ``target.wire`` through ``target.factory``'s adapter.

    One result per check: ``skip`` when no file exercises it, ``fail`` (or ``xfail``) naming
    the failing files; ``progress`` gets each result."""
    from .checks import ALL_CHECKS

    started = datetime.now(UTC).isoformat(timespec="seconds")
    fixtures = _fixtures(Path(wire_dir), target.wire)
    tallies: dict[str, _Tally] = {}
    for fixture in fixtures:
        await _replay(target, fixture, tallies)
    label = f"{target.name} on recorded corpus ({len(fixtures)} files)"
    report = Report(label, "recorded", started=started, wire=target.wire)
    for check in ALL_CHECKS:
        report.results.append(_result(check, tallies.get(check.id), target))
        if progress is not None:
            progress(report.results[-1])
    return report
