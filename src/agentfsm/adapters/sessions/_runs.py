"""A session's runs, typed: each run (:class:`RunTrace`) with its turns
(:class:`TurnTrace`), their tool calls (:class:`CallTrace`) and policy records
(:class:`MetaRecord`), as :mod:`._reader` folds them from a session file."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from attrs import define, field, frozen

from agentfsm.engine import (
    TURN_BUDGET_EXHAUSTED,
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
)

__all__ = [
    "CallTrace",
    "MetaRecord",
    "RunTrace",
    "TurnTrace",
    "parse_moment",
    "text_of",
    "tool_outcome",
]


def text_of(mapping: Mapping[str, Any], name: str) -> str | None:
    """The string field ``name`` of a recorded object, else ``None``."""
    value = mapping.get(name)
    return value if isinstance(value, str) else None


@frozen
class MetaRecord:
    """A ``meta`` record that names its event."""

    event: str
    """``run_start``, ``run_end``, ``compress_end``, ``policy_warn``, ``provider`` …"""
    fields: Mapping[str, Any]
    """The record's ``meta`` object (its ``event`` included)."""
    ts: str | None = None
    """When it was written, if the record says."""

    def text(self, name: str) -> str | None:
        """The string field ``name``, else ``None``."""
        return text_of(self.fields, name)

    def count(self, name: str) -> int | None:
        """The non-negative integer field ``name``, else ``None``."""
        value = self.fields.get(name)
        return value if type(value) is int and value >= 0 else None


def tool_outcome(message: ToolMessage) -> tuple[str, str, str]:
    """``(status, error, output)`` of a tool result. ``status`` is ``ok`` (``error`` empty,
    ``output`` the content), ``failed``, ``cancelled`` (an interrupt or a cancellation closed
    the call) or ``skipped`` (closed by the turn budget). A failed result's content is
    ``{"ok": false, "output": …, "error": …}``; other content is the error itself."""
    if not message.is_error:
        return "ok", "", message.content
    try:
        data = json.loads(message.content)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        return "failed", message.content, ""
    error, output = data.get("error"), text_of(data, "output") or ""
    error = error if isinstance(error, str) else "" if error is None else json.dumps(error)
    if error.startswith("cancelled:") or error == "interrupted":
        return "cancelled", error, output
    return "skipped" if error == TURN_BUDGET_EXHAUSTED else "failed", error, output


@define
class CallTrace:
    """A tool call a turn's reply asked for, and what became of it."""

    call: ToolCall
    started: bool = False
    """Its tool began (a ``tool_call_start`` record names it)."""
    result: ToolMessage | None = None
    """The tool message answering it, if one was recorded (:func:`tool_outcome` reads it)."""


@define
class TurnTrace:
    """One turn of a run: its reply, tool calls and the policy records it got."""

    number: int
    """The turn's number in its run (1-based)."""
    reply: AssistantMessage | None = None
    """The model's reply (``None`` when the run stopped before one)."""
    usage: dict[str, int] | None = None
    """The reply's usage, when the provider reported one."""
    calls: list[CallTrace] = field(factory=list)
    """The calls the reply asked for, in order."""
    events: list[MetaRecord] = field(factory=list)
    """Its compression, budget and policy records, in order."""
    after: list[Message] = field(factory=list)
    """Messages recorded after the turn's results (a gate's retry turn, tool images)."""
    ms: int | None = None
    """Time between the run's previous record and the turn's last one."""
    compressed: bool = False
    """A compression ran at its start."""


@define
class RunTrace:
    """One run of a session file: how it started and ended, its turns. Its counts leave out
    the history it was seeded with (a resumed session's earlier messages)."""

    index: int
    """1-based position of the run in its session file."""
    session: str = ""
    """The id of the session file."""
    stopped_reason: str | None = None
    """How it ended (``None`` if the file ends before ``run_end``, or its ``run_end`` gives
    no readable reason: :attr:`finished` tells them apart)."""
    finished: bool = False
    """A ``run_end`` record closed it."""
    usage: dict[str, int] = field(factory=dict)
    """The run's usage as recorded in ``run_end``."""
    error: dict[str, str] | None = None
    """A failed run's error from ``run_end``: ``name``, ``message``, ``kind`` (if any)."""
    last_state: str | None = None
    """The machine state an aborted or failed run was in, from ``run_end``."""
    sandbox: dict[str, Any] | None = None
    """The OS sandbox the run's commands used, as recorded in ``run_start``."""
    resumed_from: str | None = None
    """The id of the session whose history this run continued (``--resume``), if any."""
    seeded: int = 0
    """Messages recorded before the run's input (system prompt, a resumed history)."""
    context: list[Message] = field(factory=list)
    """Those seeded messages."""
    input: list[Message] = field(factory=list)
    """The messages of the run's input (before its first turn)."""
    timeline: list[TurnTrace] = field(factory=list)
    """Its turns, in order (a turn stopped before its reply included)."""
    started: str | None = None
    """Timestamp of ``run_start``."""
    ended: str | None = None
    """Timestamp of ``run_end``."""

    def _events(self, event: str) -> list[MetaRecord]:
        return [meta for turn in self.timeline for meta in turn.events if meta.event == event]

    def _by(self, event: str, *keys: str) -> dict[str, int]:
        """How many ``event`` records the run has, by the first of their ``keys`` given."""
        found = (next(filter(None, map(meta.text, keys)), None) for meta in self._events(event))
        return dict(Counter((key or "unnamed")[:200] for key in found))

    def _said(self, meta: MetaRecord) -> str:
        policy = (meta.text("policy") or "an unnamed policy")[:200]
        return f"{policy}: {(meta.text('reason') or 'no reason recorded')[:2000]}"

    @property
    def turns(self) -> int:
        """LLM calls (the replies recorded)."""
        return sum(1 for turn in self.timeline if turn.reply is not None)

    @property
    def tool_calls(self) -> Counter[str]:
        """Tool calls that started (a ``tool_call_start`` record), by name: one asked for but
        never run (no turn left, an interrupt) is not counted; in a file without such
        records (an older one), every call asked is."""
        calls = [call for turn in self.timeline for call in turn.calls]
        if any(call.started for call in calls):
            calls = [call for call in calls if call.started]
        return Counter(call.call.name for call in calls)

    @property
    def ending(self) -> str:
        """How it ended, for people: the stop reason, else ``ended (no reason recorded)`` or
        ``unfinished (no run_end)``."""
        if self.stopped_reason is not None:
            return self.stopped_reason
        return "ended (no reason recorded)" if self.finished else "unfinished (no run_end)"

    @property
    def policy_stop(self) -> str | None:
        """The policy and reason that stopped the run, if one did."""
        stops = self._events("policy_stop")
        return self._said(stops[-1]) if stops else None

    @property
    def notes(self) -> list[str]:
        """What policies reported (``policy_note``), e.g. the verify gate's command."""
        return [self._said(meta) for meta in self._events("policy_note")]

    @property
    def prompt(self) -> str | None:
        """The run's first user message: what it was asked."""
        return next((m.content for m in self.input if isinstance(m, UserMessage)), None)

    def as_dict(self) -> dict[str, Any]:
        """Its counts, JSON-ready (``agentfsm trace --json``): with compressions that rewrote
        the history, warnings by code, redirections fired and skipped (by reason), answers
        refused (by gate) and its duration."""
        started, ended = parse_moment(self.started), parse_moment(self.ended)
        return {
            "run": self.index,
            "stopped_reason": self.stopped_reason,
            "turns": self.turns,
            "tool_calls": dict(self.tool_calls),
            "usage": self.usage,
            "compressions": sum(
                1 for meta in self._events("compress_end") if meta.fields.get("summary_chars")
            ),
            "health_warnings": self._by("policy_warn", "code", "policy"),
            "redirections": len(self._events("redirect")),
            "redirections_skipped": self._by("redirect_skipped", "reason"),
            "gate_refusals": self._by("gate", "policy"),
            "policy_stop": self.policy_stop,
            "sandbox": self.sandbox,
            "resumed_from": self.resumed_from,
            "seeded_messages": self.seeded,
            "error": self.error,
            "notes": self.notes,
            "duration_s": (ended - started).total_seconds()
            if started and ended and ended >= started
            else None,  # a clock set back (or a crafted stamp) gives no duration
        }


def parse_moment(stamp: str | None) -> datetime | None:
    """The time a record's ``ts`` names, if it is an ISO timestamp with a zone."""
    if stamp is None:
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None
