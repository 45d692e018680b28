"""The ten invariants every fuzzed run must keep, and the session-wide tally of how often
each was checked and violated (printed at the end of the test session)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from agentfsm import (
    AbortError,
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
    converter,
    seed_system_prompt,
)
from agentfsm.adapters.providers import ProviderError
from agentfsm.adapters.sessions._reader import drop_trailing_user_messages
from agentfsm.engine._errors import MAX_OVERFLOW_COMPACTIONS, ContextOverflowUnresolved
from agentfsm.engine._events import (
    ErrorEvent,
    LlmEndEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from agentfsm.engine._history import tool_message_from_result
from agentfsm.engine._serialization import dumps, loads

from .harness import Observation

__all__ = ["INVARIANTS", "ORACLE", "TALLY", "check_all", "history_problems"]

INVARIANTS = (
    "1 termination",
    "2 tool_call pairing",
    "3 valid provider history",
    "4 turn and call budgets",
    "5 caller's list untouched",
    "6 documented exceptions",
    "7 event grammar",
    "8 session read-back and resume",
    "9 usage totals",
    "10 same states as python-statemachine",
)

TALLY: dict[str, list[int]] = {name: [0, 0] for name in INVARIANTS}
"""Invariant → [checked, violated], over the whole test session."""

RUNS: Counter[str] = Counter()
"""Runs per configuration (driver, preset, sessions, disturbance)."""

ORACLE: Counter[str] = Counter()
"""Events sent to both the compiled table and python-statemachine's engine, and the
drivers (runs, resumes included) they were sent through, over the whole test session."""


def history_problems(messages: Sequence[Message], *, request: bool = True) -> list[str]:
    """Why ``messages`` is not a history both shipped adapters can send as is.

    System messages only first; tool call ids unique; every assistant tool call answered by
    a tool message before any other message; no tool message without its call (orphans);
    a request is not empty and ends with a user or tool message.
    """
    problems: list[str] = []
    if request and not any(not isinstance(m, SystemMessage) for m in messages):
        problems.append("request without a user turn")
    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage) and index > 0:
            problems.append(f"system message at index {index}")
    seen: set[str] = set()
    open_calls: set[str] | None = None
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            if open_calls is None or message.tool_call_id not in open_calls:
                problems.append(f"orphan tool message {message.tool_call_id!r} at index {index}")
            else:
                open_calls.discard(message.tool_call_id)
            continue
        if open_calls:
            problems.append(f"unanswered calls {sorted(open_calls)!r} before index {index}")
        open_calls = None
        if isinstance(message, AssistantMessage) and message.tool_calls:
            ids = [c.id for c in message.tool_calls]
            duplicated = {i for i in ids if i in seen or ids.count(i) > 1}
            if duplicated:
                problems.append(f"duplicate tool call ids {sorted(duplicated)!r} at {index}")
            seen.update(ids)
            open_calls = set(ids)
    if open_calls:
        problems.append(f"unanswered calls {sorted(open_calls)!r} at the end")
    if request and messages and isinstance(messages[-1], AssistantMessage):
        problems.append("request ends with an assistant message")
    return problems


def _termination(obs: Observation) -> list[str]:
    problems = ["hung past the guard"] if obs.hung else []
    problems += [f"stray warning: {w}" for w in obs.stray_warnings]
    return problems


def _pairing(obs: Observation) -> list[str]:
    problems: list[str] = []
    open_calls: Counter[tuple[int, str]] = Counter()
    for event in obs.events:
        if isinstance(event, ToolCallStartEvent):
            open_calls[event.turn, event.call.id] += 1
        elif isinstance(event, ToolCallEndEvent):
            key = (event.turn, event.call.id)
            if open_calls[key] > 0:
                open_calls[key] -= 1
            elif not event.cancelled:
                problems.append(f"tool_call_end {event.call.id!r} without a start")
    problems += [f"tool_call_start {k[1]!r} never ended" for k, n in open_calls.items() if n]
    return problems


def _requests(obs: Observation) -> list[str]:
    problems: list[str] = []
    for number, request in enumerate(obs.requests, start=1):
        problems += [f"request {number}: {p}" for p in history_problems(request)]
    for number, request in enumerate(obs.summarizer_requests, start=1):
        problems += [f"summarizer request {number}: {p}" for p in history_problems(request)]
    for number, request in enumerate(obs.resume_requests, start=1):
        problems += [f"resumed request {number}: {p}" for p in history_problems(request)]
    return problems


def _budgets(obs: Observation) -> list[str]:
    scenario = obs.scenario
    budget = scenario.max_turns
    problems: list[str] = []
    replies = sum(isinstance(e, LlmEndEvent) for e in obs.events)
    turns = sum(e.type == "turn_start" for e in obs.events)
    if replies > budget:
        problems.append(f"{replies} replies with a budget of {budget}")
    if obs.main_calls > budget * (1 + MAX_OVERFLOW_COMPACTIONS):
        problems.append(f"{obs.main_calls} model calls with a budget of {budget}")
    if turns > budget + 1:  # the turn that sees the abort or the cap starts, then stops
        problems.append(f"{turns} turns started with a budget of {budget}")
    outcome = obs.outcome
    if outcome is not None:
        if outcome.turns_used != replies:
            problems.append(f"turns_used {outcome.turns_used} but {replies} replies")
        if outcome.turns_used > budget:
            problems.append(f"turns_used {outcome.turns_used} over the budget {budget}")
        if outcome.stopped_reason == "budget" and outcome.turns_used != budget:
            problems.append(f"budget stop after {outcome.turns_used} of {budget} turns")
    return problems


def _caller(obs: Observation) -> list[str]:
    problems = [
        f"caller's {label} changed" for label, before, after in obs.caller if before != after
    ]
    if obs.outcome is not None and any(after is obs.outcome.messages for _, _, after in obs.caller):
        problems.append("outcome.messages is the caller's list")
    return problems


def _documented(obs: Observation) -> list[str]:
    error = obs.error
    if error is None or obs.hung:
        return []
    scenario = obs.scenario
    kinds = {r.error_kind for r in scenario.replies if r.kind == "error"}
    if isinstance(error, asyncio.CancelledError):
        if obs.fired == "cancel":
            return []
        return [f"CancelledError escaped without an outside cancel: {error!r}"]
    if isinstance(error, ProviderError) and (
        error.kind in kinds or (error.kind == "aborted" and obs.fired)
    ):
        return []
    if isinstance(error, ContextOverflowUnresolved) and "context_overflow" in kinds:
        return []
    if isinstance(error, AbortError) and obs.fired in ("abort", "interrupt"):
        return []
    return [f"undocumented exception {type(error).__name__}: {error!r}"[:500]]


_TERMINAL_OF = {"final": "final", "budget": "budget_exhausted", "policy": "policy_stop"}
_ANYWHERE = frozenset({"policy_warn", "policy_note", "reminder", "redirect", "redirect_skipped"})


def _grammar(obs: Observation) -> list[str]:
    events: list[Any] = list(obs.events)  # dispatched on ``type``
    problems: list[str] = []
    if not events:
        if obs.outcome is not None:
            problems.append("a run returned without events")
        return problems
    if events[0].type != "turn_start":
        problems.append(f"first event is {events[0].type}")
    turn = 0
    phase = "start"
    calls: list[str] = []
    for index, event in enumerate(events):
        kind = event.type
        where = f"{kind} at {index} (phase {phase})"
        if phase == "ended":
            problems.append(f"{where}: after the terminal event")
            break
        if kind in _ANYWHERE:
            continue
        if kind == "turn_start":
            turn += 1
            if event.turn != turn or phase not in ("start", "tools", "gate"):
                problems.append(f"{where}: turn {event.turn}, expected {turn}")
            phase = "top"
        elif kind == "compress_start":
            if phase not in ("top", "llm"):  # after llm_start: a context overflow
                problems.append(where)
            phase = "compress"
        elif kind == "compress_end":
            if phase != "compress":
                problems.append(where)
            phase = "compressed"
        elif kind == "llm_start":
            if phase not in ("top", "compressed"):
                problems.append(where)
            phase = "llm"
        elif kind in ("text_delta", "thinking_delta"):
            if phase != "llm":
                problems.append(where)
        elif kind == "llm_end":
            if phase != "llm" or event.turn != turn:
                problems.append(where)
            calls = [c.id for c in event.result.message.tool_calls]
            phase = "replied"
        elif kind in ("tool_call_start", "tool_call_end"):
            if phase not in ("replied", "tools") or event.call.id not in calls:
                problems.append(f"{where}: call {event.call.id!r} not asked for")
            phase = "tools"
        elif kind == "gate":
            if phase != "replied" or calls:
                problems.append(where)
            phase = "gate"
        elif kind == "final":
            if phase != "replied" or calls:
                problems.append(where)
            phase = "closing"
        elif kind == "budget_exhausted":
            if phase not in ("replied", "tools") or not calls:
                problems.append(where)
            phase = "closing"
        elif kind == "policy_stop":
            if phase != "top":
                problems.append(where)
            phase = "closing"
        elif kind == "turn_end":
            if phase != "closing" or events[index - 1].type not in _TERMINAL_OF.values():
                problems.append(where)
            phase = "ended"
        elif kind == "error":
            phase = "ended"
        else:
            problems.append(f"{where}: unknown event")
    if phase != "ended" and not obs.hung:
        problems.append(f"no terminal event: the events end with {events[-1].type}")
    problems += _outcome_matches(obs)
    return problems


def _outcome_matches(obs: Observation) -> list[str]:
    events, outcome, error = obs.events, obs.outcome, obs.error
    last = events[-1]
    problems: list[str] = []
    if outcome is not None:
        if outcome.stopped_reason == "aborted":
            if not isinstance(last, ErrorEvent) or not isinstance(last.error, AbortError):
                problems.append(f"aborted run ends with {last.type}")
        elif len(events) < 2 or events[-2].type != _TERMINAL_OF[outcome.stopped_reason]:
            problems.append(f"{outcome.stopped_reason} run ends {[e.type for e in events[-2:]]}")
        if outcome.stopped_reason != "final" and outcome.final is not None:
            problems.append(f"final is not None on a {outcome.stopped_reason} stop")
        if outcome.stopped_reason == "final" and outcome.final is None:
            problems.append("final is None on a final stop")
    elif error is not None and not isinstance(error, asyncio.CancelledError):
        if not isinstance(last, ErrorEvent):
            problems.append(f"{type(error).__name__} raised but the events end with {last.type}")
        elif last.error is not error:
            problems.append(f"error event carries {last.error!r}, raised {error!r}")
    return problems


def _expected_transcript(obs: Observation) -> list[Message]:
    messages = list(obs.seed)
    for event in obs.events:
        if isinstance(event, LlmEndEvent):
            messages.append(event.result.message)
        elif isinstance(event, ToolCallEndEvent):
            messages.append(tool_message_from_result(event.call, event.result))
    return drop_trailing_user_messages(messages)


def _sessions(obs: Observation) -> list[str]:
    if not obs.scenario.sessions or obs.hung:
        return []
    if obs.session_path is None:
        return ["no session file"] if obs.events else []
    if obs.session_error is not None:
        return [f"session unreadable: {obs.session_error!r}"]
    problems: list[str] = []
    read = obs.session_messages or []
    expected = [_through_json(m) for m in _expected_transcript(obs)]
    if read != expected:
        problems.append(_first_difference("session read-back", read, expected))
    if obs.outcome is not None and not any(e.type == "compress_end" for e in obs.events):
        kept = [_through_json(m) for m in drop_trailing_user_messages(list(obs.outcome.messages))]
        if read != kept:
            problems.append(_first_difference("session vs outcome.messages", read, kept))
    problems += [f"read-back: {p}" for p in history_problems(read, request=False)]
    if obs.resume_error is not None:
        problems.append(f"resume raised {obs.resume_error!r}"[:300])
    elif not obs.resume_requests:
        problems.append("resume sent no request")
    elif not obs.scenario.preset and obs.scenario.context_budget is None:
        resumed = [*read, UserMessage(obs.scenario.resume_prompt)]
        want = seed_system_prompt(resumed, obs.scenario.system_prompt)
        if list(obs.resume_requests[0]) != want:
            got = list(obs.resume_requests[0])
            problems.append(_first_difference("resumed request vs read-back", got, want))
    return problems


def _through_json(message: Message) -> Message:
    """``message`` as a session file gives it back: the one documented difference is that a
    high surrogate directly followed by a low one reads back as the character they encode
    (JSON cannot keep the two halves apart)."""
    restored: Message = loads(dumps(message), Message)
    return restored


def _first_difference(label: str, got: list[Message], want: list[Message]) -> str:
    for index, (a, b) in enumerate(zip(got, want, strict=False)):
        if a != b:
            return f"{label}: message {index} is {a!r:.160}, expected {b!r:.160}"
    return f"{label}: {len(got)} messages, expected {len(want)}"


def _usage(obs: Observation) -> list[str]:
    problems: list[str] = []
    if obs.outcome is not None and obs.outcome.usage != obs.returned_usage:
        problems.append(f"outcome.usage {obs.outcome.usage} != sum of replies {obs.returned_usage}")
    if obs.session_run_end_usage is not None:
        recorded = converter.structure(obs.session_run_end_usage, Usage)
        allowed = [obs.returned_usage]
        if isinstance(obs.error, asyncio.CancelledError):  # the last reply may be cut off
            allowed.append(_minus(obs.returned_usage, obs.last_usage))
        if recorded not in allowed:
            problems.append(f"run_end usage {recorded} != sum of replies {obs.returned_usage}")
    return problems


def _oracle(obs: Observation) -> list[str]:
    """Every event of the run (and of its resume) took the compiled table and
    python-statemachine's engine, given the same guards, to the same state."""
    ORACLE["events"] += obs.oracle.events
    ORACLE["runs"] += obs.oracle.runs
    return [f"the table and the engine differ: {d}" for d in obs.oracle.disagreements]


def _minus(total: Usage, part: Usage) -> Usage:
    return Usage(
        total.input_tokens - part.input_tokens,
        total.output_tokens - part.output_tokens,
        total.cache_read_tokens - part.cache_read_tokens,
        total.cache_write_tokens - part.cache_write_tokens,
        total.reasoning_tokens - part.reasoning_tokens,
    )


CHECKS: tuple[tuple[str, Callable[[Observation], list[str]]], ...] = tuple(
    zip(
        INVARIANTS,
        (
            _termination,
            _pairing,
            _requests,
            _budgets,
            _caller,
            _documented,
            _grammar,
            _sessions,
            _usage,
            _oracle,
        ),
        strict=True,
    )
)


def check_all(obs: Observation) -> dict[str, list[str]]:
    """Check every invariant on ``obs``, count it in :data:`TALLY`; the violations found."""
    scenario = obs.scenario
    RUNS[
        f"{scenario.driver}"
        f"{'+preset' if scenario.preset else ''}"
        f"{'+sessions' if scenario.sessions else ''}"
        f" / {scenario.disturbance.kind}"
    ] += 1
    found: dict[str, list[str]] = {}
    for name, check in CHECKS:
        try:
            problems = check(obs)
        except Exception as exc:  # a checker crash is a finding too, never a silent pass
            problems = [f"checker raised {exc!r}"]
        row = TALLY[name]
        row[0] += 1
        if problems:
            row[1] += 1
            found[name] = problems
    return found


def describe(found: dict[str, list[str]]) -> str:
    """The violations, one line each (the first few per invariant)."""
    lines: list[str] = []
    for name, problems in found.items():
        lines += [f"[{name}] {p}" for p in problems[:5]]
    return "\n".join(lines)
