"""Hypothesis strategies for fuzzed runs: scenarios of model replies, tools, budgets,
sessions and disturbances (aborts, interrupts, outside cancellation).

Every text field is drawn from :data:`HOSTILE_TEXT`, which favours lone surrogates (what
Python makes of a non-UTF-8 file name), U+2028/U+2029, NUL and other line breaks.
"""

from __future__ import annotations

import json
from typing import Any, Literal, get_args

from attrs import frozen
from hypothesis import strategies as st

from agentfsm import AssistantMessage, Message, SystemMessage, ToolCall, ToolMessage, UserMessage
from agentfsm import Usage as Usage
from agentfsm.adapters.providers._errors import ErrorKind

__all__ = [
    "ERROR_KINDS",
    "HOSTILE_TEXT",
    "TOOL_NAMES",
    "CallPlan",
    "Disturbance",
    "Reply",
    "Scenario",
    "hostile_text",
    "scenarios",
]

SPECIAL_CHARS = (
    "\udcff",  # a lone low surrogate: os.fsdecode of byte 0xff
    "\ud800",  # a lone high surrogate
    "\u2028",  # LINE SEPARATOR: str.splitlines() breaks there, JSON does not
    "\u2029",
    "\x00",
    "\x85",
    "\r",
    "\n",
    "\x1b",
    "\ufeff",
    "\U0001f600",
    '"',
    "\\",
)

_CHARS = st.one_of(
    st.sampled_from(SPECIAL_CHARS),
    st.characters(codec=None, categories=("L", "N", "P", "Z", "S", "Cs", "Cc")),
)

HOSTILE_TEXT = st.text(_CHARS, max_size=24)
"""Short text with surrogates, U+2028, NUL and friends."""


def hostile_text(max_size: int = 24) -> st.SearchStrategy[str]:
    """Text drawn from the hostile alphabet."""
    return st.text(_CHARS, max_size=max_size)


ERROR_KINDS: tuple[str, ...] = get_args(ErrorKind)

TOOL_NAMES = ("echo", "nap", "look", "boom", "fail", "write", "block", "self_cancel")
"""The fuzz tools (see :mod:`tests.fuzz.harness`); other names are unknown tools."""

Driver = Literal["loop", "engine"]
DisturbanceKind = Literal["none", "abort", "interrupt", "cancel"]


@frozen
class CallPlan:
    """One tool call the model asks for."""

    name: str
    arguments: dict[str, Any]
    raw_arguments: str | None = None
    id_suffix: str = ""


@frozen
class Reply:
    """One answer of the model (or the error its call raises)."""

    kind: Literal["text", "calls", "error", "text_calls"]
    text: str = ""
    reasoning: str | None = None
    calls: tuple[CallPlan, ...] = ()
    error_kind: str = "server"
    usage: Usage | None = None
    delay: float = 0.0


@frozen
class Disturbance:
    """Something from outside: fired when the ``at_event``-th event is emitted (0: before
    the run), or ``after`` seconds into the run; ``deferred`` fires it on the next loop
    iteration instead of inside the event handler."""

    kind: DisturbanceKind = "none"
    at_event: int | None = None
    after: float | None = None
    deferred: bool = False


@frozen
class Scenario:
    """One fuzzed run."""

    driver: Driver
    toolbox: bool
    max_turns: int
    preset: bool
    prune_chars: int
    spend_tokens: int | None
    sessions: bool
    context_budget: int | None
    system_prompt: str | None
    history: tuple[Message, ...]
    prompt: str
    prompt_as_messages: bool
    replies: tuple[Reply, ...]
    summary: str
    summary_fails: bool
    disturbance: Disturbance
    resume_prompt: str


def _usage() -> st.SearchStrategy[Usage | None]:
    small = st.integers(0, 500)
    return st.one_of(
        st.none(),
        st.builds(Usage, small, small, st.integers(0, 50), st.integers(0, 50), st.integers(0, 50)),
    )


def _arguments() -> st.SearchStrategy[dict[str, Any]]:
    value: st.SearchStrategy[Any] = st.one_of(
        hostile_text(), st.integers(-5, 2000), st.floats(0, 0.02), st.none(), st.booleans()
    )
    keys = st.sampled_from(["text", "times", "seconds", "path", "other"]) | hostile_text(6)
    return st.dictionaries(keys, value, max_size=3)


def _call() -> st.SearchStrategy[CallPlan]:
    names = st.sampled_from(TOOL_NAMES) | hostile_text(8)
    raw = st.none() | st.none() | hostile_text(12)
    return st.builds(CallPlan, names, _arguments(), raw, st.just("") | hostile_text(4))


@st.composite
def _text_calls(draw: st.DrawFn) -> str:
    """A reply writing its tool calls as a ``[TOOL_CALLS]`` block (well-formed or not)."""
    items = [
        {"name": draw(st.sampled_from(TOOL_NAMES)), "arguments": {"text": draw(hostile_text(8))}}
        for _ in range(draw(st.integers(1, 3)))
    ]
    body = json.dumps(items, ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()):
        body = body[: draw(st.integers(0, len(body)))]
    close = draw(st.sampled_from(["[/TOOL_CALLS]", ""]))
    return f"{draw(hostile_text(8))}[TOOL_CALLS]{body}{close}"


def _reply() -> st.SearchStrategy[Reply]:
    reasoning = st.none() | hostile_text(12)
    delay = st.just(0.0) | st.floats(0, 0.01)
    return st.one_of(
        st.builds(
            Reply,
            st.just("text"),
            hostile_text(40),
            reasoning,
            usage=_usage(),
            delay=delay,
        ),
        st.builds(
            Reply,
            st.just("calls"),
            hostile_text(12),
            reasoning,
            st.lists(_call(), min_size=1, max_size=4).map(tuple),
            usage=_usage(),
            delay=delay,
        ),
        st.builds(
            Reply,
            st.just("calls"),
            st.just(""),
            calls=st.lists(_call(), min_size=1, max_size=3).map(tuple),
            usage=_usage(),
        ),
        st.builds(
            Reply,
            st.just("error"),
            hostile_text(16),
            error_kind=st.sampled_from(ERROR_KINDS),
            delay=delay,
        ),
        st.builds(Reply, st.just("text_calls"), _text_calls(), usage=_usage()),
    )


@st.composite
def _history(draw: st.DrawFn) -> tuple[Message, ...]:
    """A valid prior conversation (what a caller passes in)."""
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(SystemMessage(draw(hostile_text())))
    for index in range(draw(st.integers(0, 3))):
        messages.append(UserMessage(draw(hostile_text())))
        if draw(st.booleans()):
            call = ToolCall(f"prior_{index}{draw(hostile_text(3))}", "echo", {"text": "x"})
            messages.append(AssistantMessage(draw(hostile_text()), (call,)))
            messages.append(ToolMessage(call.id, draw(hostile_text()), draw(st.booleans())))
        messages.append(AssistantMessage(draw(hostile_text())))
    return tuple(messages)


def _disturbance(driver: Driver) -> st.SearchStrategy[Disturbance]:
    kinds: list[DisturbanceKind] = ["abort", "cancel"]
    if driver == "engine":
        kinds.append("interrupt")
    return st.one_of(
        st.just(Disturbance()),
        st.just(Disturbance()),
        st.builds(
            Disturbance,
            st.sampled_from(kinds),
            at_event=st.integers(0, 30),
            deferred=st.booleans(),
        ),
        st.builds(Disturbance, st.sampled_from(kinds), after=st.floats(0, 0.03)),
    )


@st.composite
def scenarios(draw: st.DrawFn, driver: Driver) -> Scenario:
    """A whole run: configuration, script and disturbance."""
    max_turns = draw(st.integers(1, 6))
    preset = driver == "engine" and draw(st.booleans())
    return Scenario(
        driver=driver,
        toolbox=draw(st.booleans()),
        max_turns=max_turns,
        preset=preset,
        prune_chars=draw(st.sampled_from([20, 200, 2000, 60_000])),
        spend_tokens=draw(st.none() | st.none() | st.integers(1, 1500)) if preset else None,
        sessions=driver == "engine" and draw(st.booleans() | st.just(True)),
        context_budget=draw(st.none() | st.integers(5, 400)),
        system_prompt=draw(st.none() | hostile_text()),
        history=draw(_history()),
        prompt=draw(hostile_text()),
        prompt_as_messages=draw(st.booleans()),
        replies=tuple(draw(st.lists(_reply(), max_size=8))),
        summary=draw(hostile_text()),
        summary_fails=draw(st.booleans()),
        disturbance=draw(_disturbance(driver)),
        resume_prompt=draw(hostile_text()),
    )
