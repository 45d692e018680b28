"""Mutation test of ``replay-vcr``: every field of a real adapter answer, perturbed, is
reported.

The adapters' real answers to recorded replies (every wire, streamed and not, answers and
errors) are perturbed one field at a time, the same way in all three deliveries, so only
the second reading of the recorded bytes can tell. Each perturbation must make its
exchange ``differing`` on that very field. The count of perturbations caught is printed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeAlias

import attrs
import httpx
import pytest

from agentfsm.adapters.providers import FINISH_REASONS, ProviderError
from agentfsm.conformance import _replay_vcr
from agentfsm.conformance._replay_vcr import replay_vcr
from agentfsm.engine import ChatDelta
from agentfsm.engine._messages import ChatResult, ToolCall, Usage

from .vcr_cassettes import cassette, record, rich_scenarios, write

Outcome: TypeAlias = ChatResult | ProviderError
Perturb: TypeAlias = Callable[[Outcome], Outcome | None]
"""A perturbed copy of an answer, or ``None`` when the perturbation does not apply."""


def _message(result: ChatResult, **changes: Any) -> ChatResult:
    return attrs.evolve(result, message=attrs.evolve(result.message, **changes))


def _answer(change: Callable[[ChatResult], ChatResult | None]) -> Perturb:
    def perturb(outcome: Outcome) -> Outcome | None:
        return change(outcome) if isinstance(outcome, ChatResult) else None

    return perturb


def _error(change: Callable[[ProviderError], None]) -> Perturb:
    def perturb(outcome: Outcome) -> Outcome | None:
        if not isinstance(outcome, ProviderError):
            return None
        copy = ProviderError(outcome.kind, outcome.message)
        copy.__dict__.update(outcome.__dict__)
        change(copy)
        return copy

    return perturb


def _call_change(number: int, what: Callable[[ToolCall], dict[str, Any] | None]) -> Perturb:
    def change(result: ChatResult) -> ChatResult | None:
        calls = list(result.message.tool_calls)
        if len(calls) <= number:
            return None
        changes = what(calls[number])
        if changes is None:
            return None
        calls[number] = attrs.evolve(calls[number], **changes)
        return _message(result, tool_calls=calls)

    return _answer(change)


def _item_change(number: int) -> Callable[[ChatResult], ChatResult | None]:
    """The item's opaque part changed: a thinking block's signature, a redacted block's
    data, a Responses item's encrypted content (what the next request sends back)."""

    def change(result: ChatResult) -> ChatResult | None:
        items = list(result.message.reasoning_items)
        if len(items) <= number:
            return None
        key = next(k for k in ("signature", "data", "encrypted_content") if k in items[number])
        items[number] = {**items[number], key: items[number][key] + "~"}
        return _message(result, reasoning_items=items)

    return change


def _usage(name: str) -> Perturb:
    def change(result: ChatResult) -> ChatResult | None:
        if result.usage is None:
            return None
        usage = attrs.evolve(result.usage, **{name: getattr(result.usage, name) + 1})
        return attrs.evolve(result, usage=usage)

    return _answer(change)


def _usage_as_float(name: str) -> Perturb:
    """The same count, as a float: a count is a whole number, and a reader that hands on
    ``5.0`` is not one that read ``5``."""

    def change(result: ChatResult) -> ChatResult | None:
        if result.usage is None:
            return None
        counts: dict[str, Any] = {name: float(getattr(result.usage, name))}
        usage = attrs.evolve(result.usage, **counts)
        return attrs.evolve(result, usage=usage)

    return _answer(change)


_RETYPED: dict[type, type] = {int: float, bool: int}


def _retyped_arguments(call: ToolCall) -> dict[str, Any] | None:
    """The arguments with each whole number and boolean as a value of another type that
    Python holds equal (``5`` as ``5.0``, ``true`` as ``1``): a tool given them gets other
    values than the model sent."""
    if not any(type(v) in _RETYPED for v in call.arguments.values()):
        return None
    retyped = {k: _RETYPED.get(type(v), lambda x: x)(v) for k, v in call.arguments.items()}
    return {"arguments": retyped, "raw_arguments": None}


def _status_as_float(outcome: Outcome) -> Outcome | None:
    if not isinstance(outcome, ProviderError) or outcome.status is None:
        return None
    return _error(lambda e: setattr(e, "status", float(e.status or 0)))(outcome)


def _other_finish(result: ChatResult) -> ChatResult:
    other = sorted(FINISH_REASONS - {result.finish_reason or ""})[0]
    return attrs.evolve(result, finish_reason=other)


def _other_id(call: ToolCall) -> dict[str, Any]:
    # An id the provider gave, changed; an id the adapter made up, emptied (any other
    # unique id of its own would be as right).
    return {
        "id": ""
        if call.id.startswith("call_0_") or call.id.startswith("call_1_")
        else call.id + "~"
    }


def _other_kind(error: ProviderError) -> None:
    error.kind = "bad_request" if error.kind != "bad_request" else "server"


def _other_retry(error: ProviderError) -> None:
    was = error.retryable
    error.response_started = False
    error.should_retry = not was
    assert error.retryable is not was


def perturbations() -> Iterator[tuple[str, Perturb]]:
    """(the field that must be reported, the perturbation)."""
    yield "text", _answer(lambda r: _message(r, content=r.message.content + "~"))
    yield (
        "reasoning",
        _answer(lambda r: _message(r, reasoning=None) if r.message.reasoning else None),
    )
    yield "reasoning", _answer(lambda r: _message(r, reasoning=(r.message.reasoning or "") + "~"))
    yield (
        "reasoning items",
        _answer(
            lambda r: (
                _message(r, reasoning_items=r.message.reasoning_items[1:])
                if r.message.reasoning_items
                else None
            )
        ),
    )
    yield (
        "reasoning items",
        _answer(lambda r: _message(r, reasoning_items=(*r.message.reasoning_items, {"type": "x"}))),
    )
    for number in (0, 1):
        yield f"reasoning item {number}", _answer(_item_change(number))
    yield (
        "calls",
        _answer(
            lambda r: (
                _message(r, tool_calls=r.message.tool_calls[:-1]) if r.message.tool_calls else None
            )
        ),
    )
    for number in (0, 1):
        yield f"call {number} id", _call_change(number, _other_id)
        yield f"call {number} name", _call_change(number, lambda c: {"name": c.name + "~"})
        yield (
            f"call {number} arguments",
            _call_change(
                number, lambda c: {"arguments": {**c.arguments, "~": 1}, "raw_arguments": None}
            ),
        )
        yield f"call {number} arguments", _call_change(number, _retyped_arguments)
    yield "finish reason", _answer(_other_finish)
    yield (
        "finish reason raw",
        _answer(lambda r: attrs.evolve(r, finish_reason_raw=(r.finish_reason_raw or "") + "~")),
    )
    for name in (
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
    ):
        yield f"usage {name}", _usage(name)
        yield f"usage {name}", _usage_as_float(name)
    yield (
        "usage",
        _answer(lambda r: attrs.evolve(r, usage=None if r.usage is not None else Usage(1, 1))),
    )
    yield "response id", _answer(lambda r: attrs.evolve(r, response_id=(r.response_id or "") + "~"))
    yield "model", _answer(lambda r: attrs.evolve(r, model=(r.model or "") + "~"))
    yield "error kind", _error(_other_kind)
    yield "error status", _error(lambda e: setattr(e, "status", (e.status or 200) + 1))
    yield "error status", _status_as_float
    yield "error retryable", _error(_other_retry)


def _perturbing(factory: Any, perturb: Perturb, applied: list[bool]) -> Any:
    def build(url: str, client: httpx.AsyncClient | None) -> Any:
        real = factory(url, client)

        async def chat(*args: Any, **kwargs: Any) -> ChatResult:
            try:
                outcome: Outcome = await real(*args, **kwargs)
            except ProviderError as error:
                outcome = error
            changed = perturb(outcome)
            applied.append(changed is not None)
            final = outcome if changed is None else changed
            if isinstance(final, ProviderError):
                raise final
            return final

        chat.aclose = real.aclose  # type: ignore[attr-defined]
        return chat

    return build


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rich")
    write(path / "rich.yaml", cassette(asyncio.run(record(rich_scenarios()))))
    return path


async def test_the_real_answers_are_exact(folder: Path) -> None:
    report = await replay_vcr(folder)
    assert [r.outcome for r in report.results] == ["exact"] * len(rich_scenarios())


async def test_every_perturbed_field_is_reported(
    folder: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    originals = dict(_replay_vcr.ADAPTERS)
    caught: list[str] = []
    missed: list[str] = []
    for field, perturb in perturbations():
        applied: list[bool] = []
        for wire, (path, factory) in originals.items():
            monkeypatch.setitem(
                _replay_vcr.ADAPTERS, wire, (path, _perturbing(factory, perturb, applied))
            )
        report = await replay_vcr(folder)
        per_exchange = [applied[i : i + 3] for i in range(0, len(applied), 3)]
        assert len(per_exchange) == len(report.results)
        for result, deliveries in zip(report.results, per_exchange, strict=True):
            if not all(deliveries):
                continue
            where = f"{field} of exchange #{result.index}"
            reported = result.outcome == "differing" and field in result.fields
            (caught if reported else missed).append(where)
    with capsys.disabled():
        print(f"\nreplay-vcr mutations caught: {len(caught)}/{len(caught) + len(missed)}")
    assert not missed
    assert len(caught) >= 140
    fields = {where.split(" of ")[0] for where in caught}
    assert fields == {field for field, _ in perturbations()}


def _thinking_dropped(factory: Any) -> Any:
    """The real adapter, its reasoning deltas never handed on (the answer left whole)."""

    def build(url: str, client: httpx.AsyncClient | None) -> Any:
        real = factory(url, client)

        async def chat(*args: Any, on_delta: Any = None, **kwargs: Any) -> ChatResult:
            def text_only(delta: ChatDelta) -> None:
                if delta.kind != "thinking":
                    on_delta(delta)

            result: ChatResult = await real(
                *args, on_delta=text_only if on_delta else None, **kwargs
            )
            return result

        chat.aclose = real.aclose  # type: ignore[attr-defined]
        return chat

    return build


async def test_reasoning_deltas_that_do_not_add_up_are_reported(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream's reasoning deltas must add up to its reasoning, as its text deltas to its
    text: the three streams that reason (Chat Completions, Messages, Responses) differ on
    that field alone; the others, reasoning streamed by none, stay exact."""
    for wire, (path, factory) in dict(_replay_vcr.ADAPTERS).items():
        monkeypatch.setitem(_replay_vcr.ADAPTERS, wire, (path, _thinking_dropped(factory)))
    report = await replay_vcr(folder)
    outcomes = {r.index: (r.outcome, r.fields) for r in report.results}
    reasoning_streams = {0, 2, 4}  # rich_scenarios: the streams that carry reasoning
    assert {i: o for i, o in outcomes.items() if i in reasoning_streams} == dict.fromkeys(
        reasoning_streams, ("differing", ("streamed reasoning",))
    )
    assert {o for i, o in outcomes.items() if i not in reasoning_streams} == {("exact", ())}
