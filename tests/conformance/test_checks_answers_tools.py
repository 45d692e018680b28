"""The answer and tool checks: the project's adapters pass them, and each one catches the
adapter bug it is about (a deliberately broken wrapper around the correct adapter)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import attrs
import httpx
import pytest
from attrs import evolve

from agentfsm.adapters.providers import (
    AnthropicChat,
    OpenAIChat,
    ProviderError,
    RetryPolicy,
    Timeouts,
)
from agentfsm.conformance._checks.answers import CHECKS as ANSWER_CHECKS
from agentfsm.conformance._checks.tools import CHECKS as TOOL_CHECKS
from agentfsm.conformance._context import RecordedTarget, Wire
from agentfsm.conformance._model import Capabilities, Check
from agentfsm.conformance._runner import run_check
from agentfsm.engine._messages import ChatResult, ToolCall
from agentfsm.engine._protocols import ChatDelta, ChatFn

from .wrappers import Wrapper

CHECKS = [*ANSWER_CHECKS, *TOOL_CHECKS]
RECORDED = [c for c in CHECKS if c.recorded is not None]
OPENAI_ONLY = {"T3", "T13"}
WIRES: tuple[Wire, ...] = ("openai-chat", "anthropic")
CAPABILITIES = Capabilities(parallel_tools=True, tool_choice=True)
CASES = [
    pytest.param(check, wire, id=f"{check.id}-{wire}")
    for check in RECORDED
    for wire in WIRES
    if not (wire == "anthropic" and check.id in OPENAI_ONLY)
]

EXPECTED = {
    "A1": ("answer.basic", "answers", "RL"),
    "A2": ("answer.text_conservation", "answers", "RL"),
    "A3": ("answer.length", "answers", "RL"),
    "A4": ("history.content_shapes", "answers", "L"),
    "T1": ("tools.single_forced", "tools", "RL"),
    "T2": ("tools.stop_reason_inferred", "tools", "R"),
    "T3": ("tools.no_index", "tools", "R"),
    "T4": ("tools.repeated_id_name", "tools", "R"),
    "T5": ("tools.args_shapes", "tools", "R"),
    "T6": ("tools.no_args", "tools", "RL"),
    "T7": ("tools.stream_equals_nonstream", "tools", "L"),
    "T8": ("tools.parallel", "tools", "RL"),
    "T9": ("tools.parallel_results", "tools", "L"),
    "T10": ("tools.parallel_flag", "tools", "L"),
    "T11": ("tools.none", "tools", "L"),
    "T12": ("tools.unicode_args", "tools", "L"),
    "T13": ("tools.trailing_empty_delta", "tools", "R"),
    "T14": ("tools.foreign_ids", "tools", "L"),
    "T15": ("tools.agent_loop", "tools", "L"),
    "T16": ("tools.stream_auto", "tools", "L"),
}


def _adapter(wire: Wire, url: str) -> OpenAIChat | AnthropicChat:
    retry = RetryPolicy(max_attempts=1)
    timeouts = Timeouts(connect=2, first_byte=5, idle=5, terminal_grace=0.3)
    if wire == "anthropic":
        return AnthropicChat("m", base_url=url, retry=retry, timeouts=timeouts)
    return OpenAIChat("m", base_url=url, retry=retry, timeouts=timeouts)


# -- broken adapters -----------------------------------------------------------------------


class Broken(Wrapper):
    """The correct adapter with one property corrupted: its results, or its text deltas."""

    def __init__(
        self,
        inner: OpenAIChat | AnthropicChat,
        result: Callable[[ChatResult], ChatResult] = lambda r: r,
        *,
        double_deltas: bool = False,
    ) -> None:
        super().__init__(inner)
        self.result = result
        self.double_deltas = double_deltas

    async def __call__(self, *args: Any, **options: Any) -> ChatResult:
        forward = options.get("on_delta")
        if self.double_deltas and forward is not None:

            def twice(delta: ChatDelta) -> None:
                forward(delta)
                if delta.text.strip():
                    forward(delta)  # a replayed delta: the text is no longer conserved

            options["on_delta"] = twice
        return self.result(await super().__call__(*args, **options))


CallsFix = Callable[[tuple[ToolCall, ...]], tuple[ToolCall, ...]]


def _calls(change: CallsFix) -> Callable[[ChatResult], ChatResult]:
    def apply(result: ChatResult) -> ChatResult:
        calls = result.message.tool_calls
        if not calls:
            return result
        return evolve(result, message=evolve(result.message, tool_calls=change(calls)))

    return apply


def _overflow_on_length(result: ChatResult) -> ChatResult:
    if result.finish_reason == "length":
        raise ProviderError("context_overflow", "the answer was cut: read as an overflow")
    return result


def _raw_stop(result: ChatResult) -> ChatResult:
    return evolve(result, finish_reason="stop") if result.message.tool_calls else result


BROKEN: dict[str, tuple[str, Callable[[OpenAIChat | AnthropicChat], ChatFn]]] = {
    "A1": ("drops the model name", lambda c: Broken(c, lambda r: evolve(r, model=None))),
    "A2": ("replays text deltas", lambda c: Broken(c, double_deltas=True)),
    "A3": ("reads a length finish as an overflow", lambda c: Broken(c, _overflow_on_length)),
    "T1": (
        "loses the call ids",
        lambda c: Broken(c, _calls(lambda cs: tuple(evolve(x, id="") for x in cs))),
    ),
    "T2": ("keeps the wire's 'stop' finish", lambda c: Broken(c, _raw_stop)),
    "T3": (
        "keeps only the first call (no index → slot 0)",
        lambda c: Broken(c, _calls(lambda cs: cs[:1])),
    ),
    "T4": (
        "concatenates the repeated id and name",
        lambda c: Broken(
            c, _calls(lambda cs: tuple(evolve(x, id=x.id * 2, name=x.name * 2) for x in cs))
        ),
    ),
    "T5": (
        "loses the arguments",
        lambda c: Broken(c, _calls(lambda cs: tuple(evolve(x, arguments={}) for x in cs))),
    ),
    "T6": (
        "marks empty arguments malformed",
        lambda c: Broken(c, _calls(lambda cs: tuple(evolve(x, raw_arguments="") for x in cs))),
    ),
    "T8": (
        "reuses the first id for every call",
        lambda c: Broken(c, _calls(lambda cs: tuple(evolve(x, id=cs[0].id) for x in cs))),
    ),
    "T13": (
        "adds a phantom call for the trailing delta",
        lambda c: Broken(c, _calls(lambda cs: (*cs, ToolCall("call_phantom", cs[-1].name, {})))),
    ),
}


class ObjectArgumentsSentBack(OpenAIChat):
    """Sends tool-call arguments back as objects (rejected by Ollama Cloud, OpenRouter: Q4)."""

    def _request(self, body: dict[str, Any]) -> httpx.Request:
        for message in body["messages"]:
            for call in message.get("tool_calls") or []:
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
        return super()._request(body)


class ResultsInSeparateTurns(AnthropicChat):
    """Sends each tool_result in a user turn of its own (Anthropic wants them together: Q34)."""

    def _request(self, body: dict[str, Any]) -> httpx.Request:
        turns: list[dict[str, Any]] = []
        for turn in body["messages"]:
            blocks = turn["content"]
            if turn["role"] == "user" and len(blocks) > 1:
                turns += [{"role": "user", "content": [block]} for block in blocks]
            else:
                turns.append(turn)
        return super()._request({**body, "messages": turns})


def _target(
    wire: Wire, wrap: Callable[[OpenAIChat | AnthropicChat], ChatFn] | None = None
) -> RecordedTarget:
    def factory(url: str) -> ChatFn:
        adapter = _adapter(wire, url)
        return wrap(adapter) if wrap is not None else adapter

    return RecordedTarget(factory, wire=wire, capabilities=CAPABILITIES)


# -- tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("check", "wire"), CASES)
async def test_the_project_adapter_passes(check: Check, wire: Wire) -> None:
    result = await run_check(check, _target(wire))
    assert result.outcome in ("pass", "pass-normalized"), result.message
    assert result.mode == "recorded"


@pytest.mark.parametrize(("check", "wire"), CASES)
async def test_a_broken_adapter_fails(check: Check, wire: Wire) -> None:
    flaw, wrap = BROKEN[check.id]
    result = await run_check(check, _target(wire, wrap))
    assert result.outcome == "fail", f"{check.id} missed an adapter that {flaw}: {result}"
    assert result.expected or result.message


@pytest.mark.parametrize("check_id", sorted(OPENAI_ONLY))
async def test_openai_only_checks_skip_on_the_anthropic_wire(check_id: str) -> None:
    check = next(c for c in CHECKS if c.id == check_id)
    result = await run_check(check, _target("anthropic"))
    assert result.outcome == "skip"
    assert result.message == "not applicable to the anthropic wire"


def test_every_recorded_check_has_a_broken_adapter() -> None:
    assert {c.id for c in RECORDED} == set(BROKEN)


def test_ids_names_groups_and_modes() -> None:
    got = {
        c.id: (c.name, c.group, ("R" if c.recorded else "") + ("L" if c.live else ""))
        for c in CHECKS
    }
    assert got == EXPECTED


def test_every_check_declares_what_it_sends_asserts_needs_and_is_about() -> None:
    fields = {f.name for f in attrs.fields(Capabilities)}
    for check in CHECKS:
        assert check.sends, check.id
        assert check.asserts, check.id
        assert set(check.needs) <= fields, check.id
        assert all(re.fullmatch(r"Q\d+", q) for q in check.quirks), check.id


def test_capability_gates() -> None:
    by_id = {c.id: c for c in CHECKS}
    assert set(by_id["T8"].needs) >= {"tools", "parallel_tools"}
    assert set(by_id["T9"].needs) >= {"tools", "parallel_tools"}
    assert "max_tokens" in by_id["A3"].needs
    assert "streaming" in by_id["A2"].needs


async def test_a_check_whose_capability_is_absent_is_skipped() -> None:
    parallel = next(c for c in CHECKS if c.id == "T8")
    target = RecordedTarget(lambda url: _adapter("openai-chat", url))
    result = await run_check(parallel, target)
    assert result.outcome == "skip"
    assert "parallel_tools" in result.message


@pytest.mark.parametrize(
    ("check_id", "adapter", "quirk"),
    [("T5", ObjectArgumentsSentBack, "Q4"), ("T8", ResultsInSeparateTurns, "Q34")],
)
async def test_what_is_sent_back_is_checked_too(
    check_id: str, adapter: type[OpenAIChat | AnthropicChat], quirk: str
) -> None:
    check = next(c for c in CHECKS if c.id == check_id)
    wire: Wire = "anthropic" if adapter is ResultsInSeparateTurns else "openai-chat"
    retry = RetryPolicy(max_attempts=1)
    timeouts = Timeouts(connect=2, first_byte=5, idle=5, terminal_grace=0.3)
    target = RecordedTarget(
        lambda url: adapter("m", base_url=url, retry=retry, timeouts=timeouts),
        wire=wire,
        capabilities=CAPABILITIES,
    )
    result = await run_check(check, target)
    assert result.outcome == "fail", result
    assert quirk in result.quirks
