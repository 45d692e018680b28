"""What one session shows in its HTML picture: the runs (across resumes), their turns, the
machine path each turn took, and the messages, as one JSON-ready dict.

The session records do not list the machine's transitions; each turn's path is read from
what the turn recorded (see :func:`_turn_path`): a compression, the reply, its tool calls,
the budget record, a gate refusal, a policy stop, and the run's end (with the state an
aborted or failed run was in, ``last_state``, where the file has it).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from agentfsm.adapters.sessions import SessionNotFound, is_session_file, iter_session_records
from agentfsm.engine import TURN_BUDGET_EXHAUSTED

__all__ = ["MAX_CHAIN", "MAX_TEXT_CHARS", "END_STATES", "read_run_view", "session_chain"]

MAX_CHAIN = 64
"""Most session files followed back through ``resumed_from``."""
MAX_TEXT_CHARS = 200_000
"""Longest text kept per message field; the rest is cut with a note."""
END_STATES = {
    "final": "final",
    "budget": "budget",
    "aborted": "aborted",
    "policy": "stopped",
    "failed": "failed",
}
"""The machine's final state for each recorded ``stopped_reason``."""


def _text(value: Any, limit: int = MAX_TEXT_CHARS) -> str:
    if not isinstance(value, str):
        return "" if value is None else json.dumps(value, ensure_ascii=True)[:limit]
    if len(value) <= limit:
        return value
    return value[:limit] + f"\n[… {len(value) - limit} more characters not shown]"


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _moment(stamp: Any) -> datetime | None:
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _parent(path: Path) -> Path | None:
    """The session file the first run of ``path`` resumed, if it names one that exists."""
    for record in iter_session_records(path, contains=b'"run_start"'):
        meta = record.get("meta") if isinstance(record, dict) else None
        if not isinstance(meta, dict) or meta.get("event") != "run_start":
            continue
        parent = meta.get("resumed_from")
        if not isinstance(parent, dict):
            return None
        named = parent.get("path")
        if isinstance(named, str) and named.endswith(".jsonl") and is_session_file(Path(named)):
            return Path(named)
        ident = parent.get("id")
        if isinstance(ident, str) and "/" not in ident and ident not in ("", ".", ".."):
            sibling = path.parent / f"{ident}.jsonl"
            if is_session_file(sibling):
                return sibling
        return None
    return None


def session_chain(path: str | Path) -> list[Path]:
    """``path`` and the session files it was resumed from, oldest first (at most
    :data:`MAX_CHAIN`; a file seen twice, or one that cannot be read, ends the chain). A
    parent is the ``.jsonl`` file its ``run_start`` names, else the file of that id beside
    the child."""
    chain = [Path(path)]
    seen = {Path(path).resolve()}
    while len(chain) < MAX_CHAIN:
        try:
            parent = _parent(chain[0])
        except (OSError, SessionNotFound):
            if len(chain) == 1:
                raise
            break  # an earlier session that cannot be read ends the chain
        if parent is None or parent.resolve() in seen:
            break
        seen.add(parent.resolve())
        chain.insert(0, parent)
    return chain


def _tool_status(message: dict[str, Any]) -> str:
    """``ok``, ``failed``, ``cancelled`` (an interrupt or a cancellation closed it) or
    ``skipped`` (closed by the turn budget)."""
    if not message.get("is_error"):
        return "ok"
    try:
        error = json.loads(message.get("content") or "").get("error")
    except (ValueError, AttributeError):
        return "failed"
    if isinstance(error, str) and (error.startswith("cancelled:") or error == "interrupted"):
        return "cancelled"
    return "skipped" if error == TURN_BUDGET_EXHAUSTED else "failed"


def _message_view(message: dict[str, Any]) -> dict[str, Any]:
    role = str(message.get("role"))
    view: dict[str, Any] = {"role": role, "text": _text(message.get("content"))}
    if message.get("reasoning"):
        view["reasoning"] = _text(message.get("reasoning"))
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        view["calls"] = [
            {
                "id": _text(c.get("id"), 200),
                "name": _text(c.get("name"), 200),
                "args": _text(json.dumps(c.get("arguments"), ensure_ascii=True)),
            }
            for c in calls
            if isinstance(c, dict)
        ]
    if role == "tool":
        view["call_id"] = _text(message.get("tool_call_id"), 200)
        view["status"] = _tool_status(message)
    images = message.get("images")
    if isinstance(images, list) and images:
        view["images"] = len(images)
    return view


class _Reader:
    """Builds the view while the records of each file stream past."""

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []
        self.turns: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        self.run: dict[str, Any] | None = None
        self.skip = 0
        self.by_number: dict[int, dict[str, Any]] = {}
        self.last_stamp: datetime | None = None

    def start_run(self, session: str, meta: dict[str, Any], stamp: Any) -> None:
        seeded = _int(meta.get("seeded"))
        if seeded is None:
            seeded = _int(meta.get("history_size")) if not self.runs else 0
        parent = meta.get("resumed_from")
        run: dict[str, Any] = {
            "index": len(self.runs) + 1,
            "session": session,
            "started": _text(stamp, 40),
            "resumed_from": _text(parent.get("id"), 300) if isinstance(parent, dict) else None,
            "seeded": seeded or 0,
            "input": [],
            "context": [],
            "turns": [],
            "stopped_reason": None,
            "end_state": None,
        }
        self.runs.append(run)
        self.run = run
        self.skip = run["seeded"]
        self.by_number = {}
        self.last_stamp = _moment(stamp)

    def turn(self, number: int | None = None) -> dict[str, Any]:
        """The run's turn ``number``, or with ``None`` the turn now open (made if needed)."""
        assert self.run is not None
        run_turns = self.run["turns"]
        if number is None:
            latest: dict[str, Any] | None = self.turns[run_turns[-1]] if run_turns else None
            if latest is not None and latest["reply"] is None:
                return latest
            number = int(latest["turn"]) + 1 if latest is not None else 1
        found = self.by_number.get(number)
        if found is not None:
            return found
        turn: dict[str, Any] = {
            "run": self.run["index"],
            "turn": number,
            "reply": None,
            "tool_calls": [],
            "events": [],
            "usage": None,
            "ms": None,
            "path": [],
        }
        self.by_number[number] = turn
        self.turns.append(turn)
        run_turns.append(len(self.turns) - 1)
        return turn

    def stamp(self, turn: dict[str, Any], stamp: Any) -> None:
        """Count the time since the previous record of the run towards ``turn``."""
        moment = _moment(stamp)
        if moment is not None and self.last_stamp is not None:
            elapsed = int((moment - self.last_stamp).total_seconds() * 1000)
            turn["ms"] = (turn["ms"] or 0) + max(elapsed, 0)
        if moment is not None:
            self.last_stamp = moment

    def meta(self, session: str, meta: dict[str, Any], stamp: Any) -> None:
        event = meta.get("event")
        if event == "run_start" or self.run is None:
            self.start_run(session, meta if event == "run_start" else {}, stamp)
            if event == "run_start":
                return
        assert self.run is not None
        if event == "run_end":
            reason = _text(meta.get("stopped_reason"), 100)
            self.run["stopped_reason"] = reason
            self.run["end_state"] = END_STATES.get(reason)
            self.run["last_state"] = _text(meta.get("last_state"), 100) or None
            self.run["ended"] = _text(stamp, 40)
            usage = meta.get("usage")
            self.run["usage"] = (
                {str(k): v for k, v in usage.items() if type(v) is int}
                if isinstance(usage, dict)
                else {}
            )
            state = self.run["last_state"]
            if state in ("turn_start", "compress", "llm_start"):  # a turn without records
                turn = self.turn()
                turn["compressed"] = turn.get("compressed") or state == "compress"
            error = meta.get("error")
            if isinstance(error, dict):
                self.run["error"] = " ".join(
                    _text(error.get(k), 2000) for k in ("name", "kind", "message") if error.get(k)
                )
            return
        number = _int(meta.get("turn"))
        if event in ("budget_exhausted", "tool_call_start") and number is None:
            run_turns = self.run["turns"]
            turn = self.turns[run_turns[-1]] if run_turns else self.turn()
        else:
            turn = self.turn(number)
        if event == "compress_end":
            chars = _int(meta.get("summary_chars")) or 0
            turn["events"].append(
                {
                    "kind": "compression",
                    "text": f"history compressed: summary of {chars} characters"
                    if chars
                    else "compression left the history as it was",
                }
            )
            turn["compressed"] = True
        elif event == "budget_exhausted":
            turn["events"].append({"kind": "stop", "text": "turn budget exhausted"})
            turn["budget"] = True
        elif event in _POLICY_EVENTS:
            kind, verb = _POLICY_EVENTS[event]
            who = _text(meta.get("policy") or meta.get("trigger"), 200)
            why = _text(meta.get("reason") or meta.get("code"), 2000)
            turn["events"].append({"kind": kind, "text": f"{verb} {who}: {why}".strip(": ")})
            if event == "policy_stop":
                turn["policy_stop"] = who
            elif event == "gate":
                turn["gate"] = who
            elif event == "policy_warn":
                turn.setdefault("warnings", []).append(_text(meta.get("code") or who, 200))
        if event != "tool_call_start":
            self.stamp(turn, stamp)

    def message(self, record: dict[str, Any]) -> None:
        message = record.get("message")
        if self.run is None or not isinstance(message, dict):
            return
        if self.skip:  # seeded: the system prompt, or history shown with an earlier run
            self.skip -= 1
            if self.run["index"] == 1:
                self.messages.append(_message_view(message))
                self.run["context"].append(len(self.messages) - 1)
            return
        view = _message_view(message)
        self.messages.append(view)
        index = len(self.messages) - 1
        role = view["role"]
        stamp = record.get("ts")
        if role == "assistant":
            turn = self.turn(_int(record.get("turn")))
            if turn["reply"] is not None:  # a second reply without turn numbers
                turn = self.turn(turn["turn"] + 1)
            turn["reply"] = index
            usage = record.get("usage")
            if isinstance(usage, dict):
                turn["usage"] = {k: v for k, v in usage.items() if type(v) is int}
            turn["tool_calls"] = [
                {"name": call["name"], "id": call["id"], "status": None, "result": None}
                for call in view.get("calls", [])
            ]
            self.stamp(turn, stamp)
        elif role == "tool" and self.run["turns"]:
            turn = self.turns[self.run["turns"][-1]]
            for call in turn["tool_calls"]:
                if call["id"] == view["call_id"] and call["result"] is None:
                    call["status"], call["result"] = view["status"], index
                    break
            self.stamp(turn, stamp)
        elif not self.run["turns"]:
            self.run["input"].append(index)
        else:
            turn = self.turns[self.run["turns"][-1]]
            turn.setdefault("after", []).append(index)


_POLICY_EVENTS = {
    "policy_warn": ("warning", "warning from"),
    "policy_note": ("note", ""),
    "policy_stop": ("stop", "stopped by"),
    "gate": ("gate", "final answer refused by"),
    "redirect": ("redirect", "redirected after"),
    "redirect_skipped": ("note", "redirection skipped"),
    "reminder": ("reminder", "reminder from"),
}
"""Meta events shown in a turn's timeline: their kind and how the line starts."""


def _turn_path(turn: dict[str, Any], run: dict[str, Any], last: bool, more: bool) -> list[str]:
    """The edges (``"source>target"``) the turn took, read from what it recorded.

    ``last``: the run's last turn; ``more``: another turn of the run follows."""
    end = run.get("end_state")
    if turn.get("policy_stop"):
        return ["turn_start>stopped"]
    if last and end == "aborted" and run.get("last_state") == "turn_start":
        return ["turn_start>aborted"]
    path = ["turn_start>compress_check"]
    if turn.get("compressed"):
        path += ["compress_check>compress", "compress>llm_start"]
    else:
        path.append("compress_check>llm_start")
    if turn["reply"] is None:
        if last and end in ("aborted", "failed"):
            path.append(f"llm_start>{end}")
        return path
    path.append("llm_start>llm_end")
    if turn["tool_calls"]:
        if turn.get("budget"):
            return [*path, "llm_end>budget"]
        path.append("llm_end>run_tools")
        if more:
            path.append("run_tools>turn_start")
        elif last and end == "aborted":
            path.append("run_tools>aborted")
        return path
    path.append("llm_end>final_check")
    if turn.get("gate"):
        path += ["final_check>retry", "retry>turn_start"]
    elif last and end in ("final", "aborted"):
        path.append(f"final_check>{end}")
    return path


def _verdicts(turn: dict[str, Any]) -> list[tuple[str, str]]:
    """The policy verdicts of a turn, each on the edge it sent the run along."""
    found = []
    if turn.get("policy_stop"):
        found.append(("turn_start>stopped", f"stop: {turn['policy_stop']}"))
    elif "turn_start>compress_check" in turn["path"]:
        found += [("turn_start>compress_check", f"warn: {w}") for w in turn.get("warnings", ())]
    if turn.get("gate"):
        found.append(("final_check>retry", f"refused: {turn['gate']}"))
    return found


def read_run_view(path: str | Path) -> dict[str, Any]:
    """The picture's data for the session file ``path`` and those it resumed.

    Raises like :func:`~agentfsm.adapters.sessions.iter_session_records` for ``path``; a
    file of the chain that cannot be read is skipped."""
    reader = _Reader()
    chain = session_chain(path)
    for file in chain:
        try:
            records = list(iter_session_records(file, exact=True))
        except (OSError, SessionNotFound):
            if file == chain[-1]:
                raise
            continue
        reader.run = None
        for record in records:
            if not isinstance(record, dict):
                continue
            if record.get("kind") == "meta" and isinstance(record.get("meta"), dict):
                reader.meta(file.stem, record["meta"], record.get("ts"))
            elif record.get("kind") == "message":
                reader.message(record)
    edges: dict[str, int] = {}
    verdicts: dict[str, dict[str, int]] = {}
    for run in reader.runs:
        numbers = run["turns"]
        if numbers and run["stopped_reason"] in ("aborted", "failed", "cancelled"):
            why = f": {run['error']}" if run.get("error") else ""
            reader.turns[numbers[-1]]["events"].append(
                {"kind": "stop", "text": f"run {run['stopped_reason']}{why}"}
            )
        for position, index in enumerate(numbers):
            turn = reader.turns[index]
            last = position == len(numbers) - 1
            turn["path"] = _turn_path(turn, run, last, more=not last)
            for edge in turn["path"]:
                edges[edge] = edges.get(edge, 0) + 1
            for edge, label in _verdicts(turn):
                counts = verdicts.setdefault(edge, {})
                counts[label] = counts.get(label, 0) + 1
    ended = next((r["end_state"] for r in reversed(reader.runs) if r["end_state"]), None)
    last_run = reader.runs[-1] if reader.runs else None
    return {
        "session": Path(path).stem,
        "files": [file.stem for file in chain],
        "runs": reader.runs,
        "turns": reader.turns,
        "messages": reader.messages,
        "edges": edges,
        "verdicts": verdicts,
        "end_state": last_run["end_state"] if last_run else ended,
    }
