"""What one session shows in its HTML picture: the runs (across resumes), their turns, the
machine path each turn took, and the messages, as one JSON-ready dict.

The session records do not list the machine's transitions; each turn's path is read from
what the turn recorded (see :func:`_turn_path`): a compression, the reply, its tool calls,
the budget record, a gate refusal, a policy stop, and the run's end (with the state an
aborted or failed run was in, ``last_state``, where the file has it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentfsm.adapters.sessions import RunTrace, TurnTrace, read_session_chain, tool_outcome
from agentfsm.engine import AssistantMessage, Message, ToolMessage, UserMessage

__all__ = ["MAX_TEXT_CHARS", "read_run_view"]

MAX_TEXT_CHARS = 200_000
"""Longest text kept per message field; the rest is cut with a note."""
_END_STATES = {
    **{end: end for end in ("final", "budget", "aborted", "failed")},
    "policy": "stopped",
}
"""The machine's final state for each recorded ``stopped_reason``."""

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


def _text(value: str | None, limit: int = MAX_TEXT_CHARS) -> str:
    if value is None or len(value) <= limit:
        return value or ""
    return value[:limit] + f"\n[… {len(value) - limit} more characters not shown]"


class _View:
    """The picture's lists: messages are shown by their index in :attr:`messages`."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.turns: list[dict[str, Any]] = []

    def message(self, message: Message) -> int:
        view: dict[str, Any] = {"role": message.role, "text": _text(message.content)}
        if isinstance(message, AssistantMessage):
            if message.reasoning:
                view["reasoning"] = _text(message.reasoning)
            if message.tool_calls:
                view["calls"] = [
                    {
                        "id": _text(call.id, 200),
                        "name": _text(call.name, 200),
                        "args": _text(json.dumps(call.arguments, ensure_ascii=True)),
                    }
                    for call in message.tool_calls
                ]
        elif isinstance(message, ToolMessage):
            view["call_id"] = _text(message.tool_call_id, 200)
            view["status"] = tool_outcome(message)[0]
        elif isinstance(message, UserMessage) and message.images:
            view["images"] = len(message.images)
        self.messages.append(view)
        return len(self.messages) - 1

    def run(self, run: RunTrace, index: int) -> dict[str, Any]:
        data: dict[str, Any] = {
            "index": index,
            "session": run.session,
            "started": run.started,
            "resumed_from": run.resumed_from,
            "seeded": run.seeded,
            "context": [self.message(m) for m in run.context] if index == 1 else [],
            "input": [self.message(m) for m in run.input],
            "turns": [],
            "stopped_reason": run.stopped_reason,
            "end_state": _END_STATES.get(run.stopped_reason or ""),
            "last_state": run.last_state,
            "ended": run.ended,
            "usage": run.usage,
            # counted as trace and sessions list count them: replies, and calls that ran
            "counts": {"turns": run.turns, "tool_calls": sum(run.tool_calls.values())},
        }
        if run.error is not None:
            data["error"] = " ".join(
                run.error[key][:2000] for key in ("name", "kind", "message") if run.error.get(key)
            )
        for position, turn in enumerate(run.timeline):
            data["turns"].append(len(self.turns))
            self.turns.append(self.turn(turn, data, last=position == len(run.timeline) - 1))
        if run.timeline and run.stopped_reason in ("aborted", "failed", "cancelled"):
            why = f": {data['error']}" if data.get("error") else ""
            self.turns[-1]["events"].append(
                {"kind": "stop", "text": f"run {run.stopped_reason}{why}"}
            )
        return data

    def turn(self, turn: TurnTrace, run: dict[str, Any], last: bool) -> dict[str, Any]:
        data: dict[str, Any] = {
            "run": run["index"],
            "turn": turn.number,
            "reply": self.message(turn.reply) if turn.reply is not None else None,
            "tool_calls": [
                {
                    "name": _text(call.call.name, 200),
                    "id": _text(call.call.id, 200),
                    "status": tool_outcome(call.result)[0] if call.result else None,
                    "result": self.message(call.result) if call.result else None,
                }
                for call in turn.calls
            ],
            "events": [],
            "usage": turn.usage,
            "ms": turn.ms,
        }
        for meta in turn.events:
            if meta.event == "compress_end":
                chars = meta.count("summary_chars") or 0
                text = (
                    f"history compressed: summary of {chars} characters"
                    if chars
                    else "compression left the history as it was"
                )
                data["events"].append({"kind": "compression", "text": text})
            elif meta.event == "budget_exhausted":
                data["events"].append({"kind": "stop", "text": "turn budget exhausted"})
                data["budget"] = True
            elif meta.event in _POLICY_EVENTS:
                kind, verb = _POLICY_EVENTS[meta.event]
                who = _text(meta.text("policy") or meta.text("trigger"), 200)
                why = _text(meta.text("reason") or meta.text("code"), 2000)
                data["events"].append({"kind": kind, "text": f"{verb} {who}: {why}".strip(": ")})
                if meta.event == "policy_stop":
                    data["policy_stop"] = who
                elif meta.event == "gate":
                    data["gate"] = who
                elif meta.event == "policy_warn":
                    data.setdefault("warnings", []).append(_text(meta.text("code") or who, 200))
        if turn.compressed:
            data["compressed"] = True
        if turn.after:
            data["after"] = [self.message(m) for m in turn.after]
        data["path"] = _turn_path(data, run, last, more=not last)
        return data


def _turn_path(turn: dict[str, Any], run: dict[str, Any], last: bool, more: bool) -> list[str]:
    """The edges (``"source>target"``) the turn took, read from what it recorded.

    ``last``: the run's last turn; ``more``: another turn of the run follows."""
    end = run.get("end_state")
    if turn.get("policy_stop"):
        return ["turn_start>stopped"]
    aborted_before_reply = end == "aborted" and run.get("last_state") == "turn_start"
    if last and aborted_before_reply and turn["reply"] is None:  # a reply is drawn as one
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

    Raises like :func:`~agentfsm.adapters.sessions.read_session` for ``path``; an earlier
    file of the chain that cannot be read ends the chain there."""
    chain = read_session_chain(path)
    view = _View()
    runs = [run for log in chain for run in log.runs]
    runs_data = [view.run(run, index) for index, run in enumerate(runs, 1)]
    edges: dict[str, int] = {}
    verdicts: dict[str, dict[str, int]] = {}
    for turn in view.turns:
        for edge in turn["path"]:
            edges[edge] = edges.get(edge, 0) + 1
        for edge, label in _verdicts(turn):
            counts = verdicts.setdefault(edge, {})
            counts[label] = counts.get(label, 0) + 1
    return {
        "session": Path(path).stem,
        "files": [log.id for log in chain],
        "runs": runs_data,
        "turns": view.turns,
        "messages": view.messages,
        "edges": edges,
        "verdicts": verdicts,
        "end_state": runs_data[-1]["end_state"] if runs_data else None,
    }
