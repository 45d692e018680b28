"""The usage, errors and control checks: the project's adapters pass, broken adapters fail.

Every recorded check runs against ``OpenAIChat`` and ``AnthropicChat`` and must pass (or pass
normalized); then against a deliberately broken adapter built for it, and must fail, so no
check is vacuous.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest
from attrs import evolve

from agentfsm.adapters.providers import (
    AnthropicChat,
    OpenAIChat,
    OpenAIQuirks,
    ProviderError,
    RetryPolicy,
    Timeouts,
)
from agentfsm.adapters.providers._errors import classify_status
from agentfsm.conformance._checks import control, errors, usage
from agentfsm.conformance._context import RecordedTarget, Wire
from agentfsm.conformance._model import Check
from agentfsm.conformance._runner import run_check
from agentfsm.engine._messages import AssistantMessage, ChatResult, Message, ToolSpec, Usage
from agentfsm.engine._protocols import ChatDelta, ChatFn, DeltaHandler, SupportsAbort

from .wrappers import Wrapper

CHECKS = [*usage.CHECKS, *errors.CHECKS, *control.CHECKS]
RECORDED = [check for check in CHECKS if check.recorded is not None]
WIRES: tuple[Wire, ...] = ("openai-chat", "anthropic")
FAST = Timeouts(connect=2, first_byte=5, idle=5, terminal_grace=0.3)
Factory = Callable[[str], ChatFn]


def adapter(wire: Wire, *, attempts: int = 3, **options: Any) -> Factory:
    """The project's adapter for ``wire``, the way the kit's users build it."""
    retry = RetryPolicy(max_attempts=attempts, initial_delay=0.01, max_delay=0.05, jitter=0)

    def build(url: str) -> ChatFn:
        if wire == "anthropic":
            return AnthropicChat("m", base_url=url, retry=retry, timeouts=FAST, **options)
        return OpenAIChat("m", base_url=url, retry=retry, timeouts=FAST, **options)

    return build


def by_id(check_id: str) -> Check:
    return next(check for check in CHECKS if check.id == check_id)


def test_ids_names_and_modes() -> None:
    modes = {check.id: (check.name, check.modes) for check in CHECKS}
    assert modes == {
        "U1": ("usage.present", ("recorded", "live")),
        "U2": ("usage.stream_final", ("recorded", "live")),
        "U3": ("usage.no_double_count", ("recorded",)),
        "U4": ("usage.inclusive_cache", ("recorded", "live")),
        "U5": ("usage.reasoning_inside_output", ("recorded", "live")),
        "U6": ("usage.stream_vs_nonstream", ("live",)),
        "E1": ("errors.auth", ("recorded", "live")),
        "E2": ("errors.bad_request", ("recorded", "live")),
        "E3": ("errors.rate_limit", ("recorded",)),
        "E4": ("errors.quota", ("recorded",)),
        "E5": ("errors.overloaded", ("recorded",)),
        "E6": ("errors.transient_5xx", ("recorded",)),
        "E7": ("errors.overflow_classified", ("recorded", "live")),
        "E8": ("errors.overflow_silent", ("live",)),
        "C1": ("control.abort", ("recorded", "live")),
        "C2": ("control.timeout_phases", ("recorded",)),
        "C3": ("control.no_blind_replay", ("recorded",)),
    }
    for module in (usage, errors, control):
        assert module.__all__ == ["CHECKS"]
    assert all(check.sends and check.asserts for check in CHECKS)


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("check", RECORDED, ids=lambda check: check.id)
async def test_project_adapters_pass(check: Check, wire: Wire) -> None:
    result = await run_check(check, RecordedTarget(adapter(wire), wire=wire))
    if (check.id, wire) == ("U5", "anthropic"):
        assert result.outcome == "skip", result
        assert "not applicable to the anthropic wire" in result.message
        return
    assert result.outcome in ("pass", "pass-normalized"), result


# -- broken adapters -------------------------------------------------------------------------


class DropsUsage(Wrapper):
    async def __call__(self, *args: Any, **kwargs: Any) -> ChatResult:
        return evolve(await super().__call__(*args, **kwargs), usage=None)


class RetriesEverything(Wrapper):
    """Retries any failure, even after output reached ``on_delta``."""

    async def __call__(self, *args: Any, **kwargs: Any) -> ChatResult:
        for _ in range(2):
            try:
                return await super().__call__(*args, **kwargs)
            except Exception:
                pass
        return await super().__call__(*args, **kwargs)


class ClassifiesByStatus(Wrapper):
    """Reads only the HTTP status: every 400 is a bad request."""

    async def __call__(self, *args: Any, **kwargs: Any) -> ChatResult:
        try:
            return await super().__call__(*args, **kwargs)
        except ProviderError as error:
            if error.status is None:
                raise
            raise ProviderError(classify_status(error.status), error.message) from None


class IgnoresAbort(Wrapper):
    async def __call__(self, *args: Any, **kwargs: Any) -> ChatResult:
        return await super().__call__(*args, **{**kwargs, "signal": None})


class IgnoresTimeouts(Wrapper):
    """Offers ``timeouts`` but never hands them to the adapter underneath."""

    timeouts = Timeouts()


class SwallowsStreamErrors(Wrapper):
    """Returns what was streamed so far when a stream breaks: a false success."""

    async def __call__(self, *args: Any, **kwargs: Any) -> ChatResult:
        given = kwargs.get("on_delta")
        seen: list[str] = []

        def on_delta(delta: ChatDelta) -> None:
            seen.append(delta.text)
            if given is not None:
                given(delta)

        try:
            return await super().__call__(*args, **{**kwargs, "on_delta": on_delta})
        except ProviderError as error:
            if not error.in_stream:
                raise
            return ChatResult(AssistantMessage("".join(seen)), finish_reason="stop")


UsageRule = Callable[[Wire, list[Any]], Usage | None]


class NaiveUsage:
    """A hand-rolled adapter that reads usage with a naive ``rule`` (no retries either)."""

    def __init__(self, url: str, wire: Wire, rule: UsageRule) -> None:
        self.url, self.wire, self.rule = url, wire, rule

    async def __call__(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        signal: SupportsAbort | None = None,
        on_delta: DeltaHandler | None = None,
    ) -> ChatResult:
        path = "/chat/completions" if self.wire == "openai-chat" else "/v1/messages"
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}
        async with httpx.AsyncClient(timeout=5) as client:
            response = await client.post(self.url + path, json=body)
        if "event-stream" in response.headers.get("content-type", ""):
            lines = [line[5:].strip() for line in response.text.splitlines() if line[:5] == "data:"]
            payloads = [json.loads(line) for line in lines if line and line != "[DONE]"]
        else:
            payloads = [response.json()]
        text, usages = "", []
        for payload in payloads:
            for choice in payload.get("choices") or []:
                text += (choice.get("delta") or choice.get("message") or {}).get("content") or ""
            if "usage" in payload:
                usages.append(payload["usage"])
            if payload.get("type") == "message_start":
                usages.append(payload["message"].get("usage"))
            text += (payload.get("delta") or {}).get("text") or ""
            text += "".join(block.get("text", "") for block in payload.get("content") or [])
        return ChatResult(AssistantMessage(text), self.rule(self.wire, usages), "stop")


def _last(usages: list[Any]) -> dict[str, Any]:
    """The usage records merged, later fields winning (what a careful adapter starts from)."""
    merged: dict[str, Any] = {}
    for record in usages:
        merged.update(record or {})
    return merged


def summed(wire: Wire, usages: list[Any]) -> Usage:
    """Adds every usage record of a stream together (Q19)."""
    records = [u for u in usages if u]
    inside = sum(u.get("prompt_tokens", u.get("input_tokens", 0)) for u in records)
    outside = sum(u.get("completion_tokens", u.get("output_tokens", 0)) for u in records)
    return Usage(input_tokens=inside, output_tokens=outside)


def cache_naive(wire: Wire, usages: list[Any]) -> Usage:
    """Takes Anthropic's input_tokens as the whole prompt; adds OpenAI's cache on top."""
    last = _last(usages)
    if wire == "anthropic":
        read = last.get("cache_read_input_tokens", 0)
        return Usage(last.get("input_tokens", 0), last.get("output_tokens", 0), read)
    details = last.get("prompt_tokens_details") or {}
    read = details.get("cached_tokens", last.get("prompt_cache_hit_tokens", 0))
    return Usage(last["prompt_tokens"] + read, last["completion_tokens"], read)


def completion_only(wire: Wire, usages: list[Any]) -> Usage:
    """Takes completion_tokens as the output, whatever the reasoning."""
    last = _last(usages)
    reasoning = (last.get("completion_tokens_details") or {}).get("reasoning_tokens", 0)
    return Usage(last["prompt_tokens"], last["completion_tokens"], reasoning_tokens=reasoning)


def naive(wire: Wire, rule: UsageRule) -> Factory:
    return lambda url: NaiveUsage(url, wire, rule)


def wrapped(wire: Wire, kind: type[Wrapper], **options: Any) -> Factory:
    build = adapter(wire, **options)
    return lambda url: kind(build(url))


def no_stream_options(wire: Wire) -> Factory:
    return adapter(wire, quirks=OpenAIQuirks(stream_options=False))


def never_retries(wire: Wire) -> Factory:
    return adapter(wire, attempts=1)


BROKEN: dict[str, Callable[[Wire], Factory]] = {
    "drops usage": lambda wire: wrapped(wire, DropsUsage),
    "no stream_options": no_stream_options,
    "sums usage": lambda wire: naive(wire, summed),
    "ignores or re-adds cache": lambda wire: naive(wire, cache_naive),
    "output without reasoning": lambda wire: naive(wire, completion_only),
    "retries everything": lambda wire: wrapped(wire, RetriesEverything),
    "never retries": never_retries,
    "classifies by status": lambda wire: wrapped(wire, ClassifiesByStatus),
    "swallows stream errors": lambda wire: wrapped(wire, SwallowsStreamErrors),
    "ignores abort": lambda wire: wrapped(wire, IgnoresAbort),
    "ignores timeouts": lambda wire: wrapped(wire, IgnoresTimeouts),
    "retries after output": lambda wire: wrapped(wire, RetriesEverything, attempts=1),
}

CASES = [
    ("U1", "drops usage", WIRES),
    ("U2", "no stream_options", ("openai-chat",)),
    ("U2", "drops usage", WIRES),
    ("U3", "sums usage", WIRES),
    ("U4", "ignores or re-adds cache", WIRES),
    ("U5", "output without reasoning", ("openai-chat",)),
    ("E1", "retries everything", WIRES),
    ("E2", "retries everything", WIRES),
    ("E3", "never retries", WIRES),
    ("E4", "retries everything", WIRES),
    ("E5", "never retries", WIRES),
    ("E5", "swallows stream errors", WIRES),
    ("E6", "never retries", WIRES),
    ("E7", "classifies by status", WIRES),
    ("C1", "ignores abort", WIRES),
    ("C2", "ignores timeouts", WIRES),
    ("C3", "retries after output", WIRES),
    ("C3", "swallows stream errors", WIRES),
]


@pytest.mark.parametrize(
    ("check_id", "broken", "wire"),
    [(check_id, broken, wire) for check_id, broken, wires in CASES for wire in wires],
)
async def test_broken_adapters_fail(check_id: str, broken: str, wire: Wire) -> None:
    result = await run_check(by_id(check_id), RecordedTarget(BROKEN[broken](wire), wire=wire))
    assert result.outcome == "fail", result
    assert result.expected is not None, result  # a CheckFailed, not an adapter crash


def test_every_recorded_check_has_a_broken_adapter() -> None:
    covered = {(check_id, wire) for check_id, _, wires in CASES for wire in wires}
    for check in RECORDED:
        for wire in WIRES:
            if (check.id, wire) != ("U5", "anthropic"):
                assert (check.id, wire) in covered


async def test_c2_skips_an_adapter_without_timeouts() -> None:
    target = RecordedTarget(wrapped("openai-chat", Wrapper), wire="openai-chat")
    result = await run_check(by_id("C2"), target)
    assert (result.outcome, result.message) == ("skip", "the adapter's timeouts cannot be set")
