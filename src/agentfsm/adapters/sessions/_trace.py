"""Per-run summaries of a session file (what ``agentfsm trace`` prints)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from attrs import define, field

from ._lines import iter_session_records

__all__ = ["RunTrace", "trace_session"]


def _parse(timestamp: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _text(value: Any, limit: int = 200) -> str | None:
    """A recorded string field, or ``None`` when it is missing or not a string."""
    return value[:limit] if isinstance(value, str) else None


@define
class RunTrace:
    """One run of a session, counted from its records."""

    index: int
    """1-based position of the run in the session."""
    stopped_reason: str | None = None
    """How it ended (``None`` if the file ends before ``run_end``)."""
    turns: int = 0
    """LLM calls (assistant messages recorded)."""
    tool_calls: Counter[str] = field(factory=Counter)
    """Tool calls that started (their ``tool_call_start`` records), by name: a call the
    model asked for but that never ran (no turn left to read it, an interrupt) is not
    counted. A run recorded without such records (an older file) counts every call asked."""
    usage: dict[str, int] = field(factory=dict)
    """The run's usage as recorded in ``run_end``."""
    compressions: int = 0
    """Compressions that rewrote history."""
    health_warnings: Counter[str] = field(factory=Counter)
    """Policy warnings by code."""
    redirections: int = 0
    """Redirections fired."""
    redirections_skipped: Counter[str] = field(factory=Counter)
    """Redirections skipped, by reason."""
    gate_refusals: Counter[str] = field(factory=Counter)
    """Final answers refused, by gate."""
    policy_stop: str | None = None
    """The policy and reason that stopped the run, if one did."""
    sandbox: dict[str, Any] | None = None
    """The OS sandbox the run's commands used, as recorded in ``run_start``."""
    resumed_from: str | None = None
    """The id of the session whose history this run continued (``--resume``), if any."""
    seeded: int = 0
    """Messages recorded at the start before the run's input (system prompt, earlier
    history of a resumed session): not counted in ``turns`` or ``tool_calls``."""
    error: dict[str, str] | None = None
    """A failed run's error from ``run_end``: ``name``, ``message`` and ``kind`` (when the
    error has one)."""
    notes: list[str] = field(factory=list)
    """What policies reported (``policy_note``), e.g. the verify gate's command."""
    started: str | None = None
    """Timestamp of ``run_start``."""
    ended: str | None = None
    """Timestamp of ``run_end``."""

    @property
    def duration_s(self) -> float | None:
        """Seconds between ``run_start`` and ``run_end``."""
        if not self.started or not self.ended:
            return None
        started, ended = _parse(self.started), _parse(self.ended)
        if started is None or ended is None:
            return None
        return (ended - started).total_seconds()

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "run": self.index,
            "stopped_reason": self.stopped_reason,
            "turns": self.turns,
            "tool_calls": dict(self.tool_calls),
            "usage": self.usage,
            "compressions": self.compressions,
            "health_warnings": dict(self.health_warnings),
            "redirections": self.redirections,
            "redirections_skipped": dict(self.redirections_skipped),
            "gate_refusals": dict(self.gate_refusals),
            "policy_stop": self.policy_stop,
            "sandbox": self.sandbox,
            "resumed_from": self.resumed_from,
            "seeded_messages": self.seeded,
            "error": self.error,
            "notes": list(self.notes),
            "duration_s": self.duration_s,
        }


def _count(value: Any) -> int | None:
    """A recorded non-negative integer, else ``None``."""
    return value if type(value) is int and value >= 0 else None


def _start(run: RunTrace, meta: dict[str, Any]) -> None:
    """What ``run_start`` says: the sandbox, the resumed session, the seeded messages.

    A file written before ``seeded`` was recorded: its first run wrote the whole prior
    history (``history_size`` messages) before its own; later runs on a shared handle
    wrote only their own.
    """
    sandbox = meta.get("sandbox")
    run.sandbox = sandbox if isinstance(sandbox, dict) else None
    parent = meta.get("resumed_from")
    run.resumed_from = _text(parent.get("id")) if isinstance(parent, dict) else None
    seeded = _count(meta.get("seeded"))
    if seeded is None and run.index == 1:
        seeded = _count(meta.get("history_size"))
    run.seeded = seeded or 0


def _error(value: Any) -> dict[str, str] | None:
    """The recorded error of ``run_end`` (its string fields), else ``None``."""
    if not isinstance(value, dict):
        return None
    fields = {key: _text(value.get(key), 2000) for key in ("name", "kind", "message")}
    kept = {key: text for key, text in fields.items() if text is not None}
    return kept or None


def trace_session(path: str | Path) -> list[RunTrace]:
    """The runs of a session file, in order (lenient about corrupt lines and wrong-typed
    fields; raises like :func:`~agentfsm.adapters.sessions.read_session_messages`).

    Each run counts only its own turns and tool calls: the history a run was seeded with
    (a resumed session's earlier messages) is skipped.
    """
    runs: list[RunTrace] = []
    current: RunTrace | None = None
    skip = 0
    asked: dict[str, str] = {}  # call id -> tool name, from the latest assistant message
    asked_all: dict[int, Counter[str]] = {}  # run index -> every call asked for, by name
    started: set[int] = set()  # the runs with tool_call_start records
    for record in iter_session_records(path):
        if not isinstance(record, dict):
            continue
        if record.get("kind") == "meta" and isinstance(record.get("meta"), dict):
            meta = record["meta"]
            event = meta.get("event")
            if event == "run_start" or current is None:
                current = RunTrace(len(runs) + 1, started=_text(record.get("ts")))
                runs.append(current)
                skip = 0
                asked = {}
                if event == "run_start":
                    _start(current, meta)
                    skip = current.seeded
                    continue
            if event == "run_end":
                current.stopped_reason = _text(meta.get("stopped_reason"))
                usage = meta.get("usage")
                current.usage = (
                    {str(k): v for k, v in usage.items() if type(v) is int}
                    if isinstance(usage, dict)
                    else {}
                )
                current.error = _error(meta.get("error"))
                current.ended = _text(record.get("ts"))
            elif event == "compress_end" and meta.get("summary_chars"):
                current.compressions += 1
            elif event == "policy_warn":
                current.health_warnings[
                    str(_text(meta.get("code")) or _text(meta.get("policy")))
                ] += 1
            elif event == "tool_call_start":
                started.add(current.index)
                name = asked.get(str(meta.get("call_id")))
                if name is not None:
                    current.tool_calls[name] += 1
            elif event == "redirect":
                current.redirections += 1
            elif event == "redirect_skipped":
                current.redirections_skipped[str(_text(meta.get("reason")))] += 1
            elif event == "gate":
                current.gate_refusals[str(_text(meta.get("policy")))] += 1
            elif event == "policy_note":
                current.notes.append(
                    f"{_text(meta.get('policy'))}: {_text(meta.get('reason'), 2000)}"
                )
            elif event == "policy_stop":
                current.policy_stop = (
                    f"{_text(meta.get('policy'))}: {_text(meta.get('reason'), 2000)}"
                )
        elif record.get("kind") == "message" and current is not None:
            if skip:
                skip -= 1
                continue
            message = record.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant":
                current.turns += 1
                calls = message.get("tool_calls")
                for call in calls if isinstance(calls, list) else []:
                    if isinstance(call, dict):
                        name = str(_text(call.get("name"), 100))
                        asked[str(call.get("id"))] = name
                        asked_all.setdefault(current.index, Counter())[name] += 1
    for run in runs:
        if run.index not in started:
            run.tool_calls = asked_all.get(run.index, Counter())
    return runs
