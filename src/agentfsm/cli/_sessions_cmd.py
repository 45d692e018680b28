"""``agentfsm sessions list|show`` and ``agentfsm trace``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agentfsm.adapters.sessions import (
    RunTrace,
    SessionNotFound,
    read_session,
    resolve_session,
    session_files,
    tool_outcome,
    trace_session,
)
from agentfsm.agent import is_preamble_message
from agentfsm.engine import (
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
    encodable,
    printable,
)

from ._terminal import cells, fit, sanitize

__all__ = ["describe", "list_sessions", "show_session", "trace", "trace_html"]


def _say(text: str) -> None:
    """One line on stdout, sanitized for a terminal (a session holds model and tool text),
    with what its encoding cannot take (lone surrogates read back from a session) as
    backslash escapes."""
    sys.stdout.write(printable(sanitize(text), sys.stdout) + "\n")


def describe(error: BaseException) -> str:
    """One line for a session problem."""
    if isinstance(error, OSError) and error.strerror:
        where = f": {str(error.filename)[:200]!r}" if error.filename else ""
        return f"{error.strerror}{where}"
    return str(error)[:500]


def _cell(text: str) -> str:
    """``text`` as one line of the terminal's text: sanitized, runs of white space (line
    breaks included) as one space, what stdout cannot encode escaped."""
    return printable(" ".join(sanitize(text).split()), sys.stdout)


def _reason(run: RunTrace) -> str | None:
    """Why the run ended, when it did not end with a final answer."""
    if run.error:
        return _error_line(run.error)
    if run.policy_stop:
        return f"stopped by {run.policy_stop}"
    return None


LIST_READ_BYTES = 64 * 1024 * 1024
"""How much of each session file ``sessions list`` reads (``trace`` reads it whole)."""
_WIDTHS = (60, 20, 20, 20, 24, 40)
"""The widest each column of ``sessions list`` is shown; the last column, why the last
run ended, is not padded."""


def list_sessions(session_dir: Path, as_json: bool) -> int:
    """``sessions list``: one row per session, the newest first (as ``latest`` picks): its
    counts, how its last run ended, what it was asked first and why it stopped."""
    rows: list[dict[str, Any]] = []
    for path in reversed(session_files(session_dir)):
        try:
            log = read_session(path, max_bytes=LIST_READ_BYTES)
        except (SessionNotFound, OSError) as error:
            rows.append({"id": path.stem, "error": describe(error)})
            continue
        runs = log.runs
        last = runs[-1] if runs and log.complete else None
        rows.append(
            {
                "id": path.stem,
                "runs": len(runs),
                "turns": sum(r.turns for r in runs),
                "tool_calls": sum(sum(r.tool_calls.values()) for r in runs),
                "last_stop": last.stopped_reason if last else None,
                "last_ending": last.ending if last else None,
                "resumed_from": runs[0].resumed_from if runs else None,
                "prompt": next((r.prompt[:500] for r in runs if r.prompt is not None), None),
                "reason": _reason(last) if last else None,
                "complete": log.complete,
            }
        )
    if as_json:
        _say(json.dumps(rows))
    elif not rows:
        _say(f"no sessions in {session_dir}")
    else:
        table = [_columns(row) for row in rows]
        widths = [  # a row's last cell is not padded, nor counted here
            min(max((cells(line[i]) for line in table if len(line) > i + 1), default=0), limit)
            for i, limit in enumerate(_WIDTHS)
        ]
        more = "…" if encodable("…", sys.stdout) else "..."
        for line in table:
            cut = [fit(text, width, more) for text, width in zip(line[:-1], widths, strict=False)]
            sys.stdout.write("  ".join([*cut, line[-1]]).rstrip() + "\n")
    return 0


def _columns(row: dict[str, Any]) -> list[str]:
    """The cells of a ``sessions list`` row, each one printable line."""
    if "error" in row:
        return [_cell(row["id"]), _cell(f"unreadable: {row['error']}")]
    why = [
        row["reason"] or "",
        f"resumed from {row['resumed_from']}" if row["resumed_from"] else "",
        "" if row["complete"] else f"only its first {LIST_READ_BYTES >> 20} MiB read: see trace",
    ]
    return [
        _cell(row["id"]),
        f"runs={row['runs']}",
        f"turns={row['turns']}",
        f"tool_calls={row['tool_calls']}",
        _cell(
            f"last={(row['last_ending'] or 'unfinished').split(' (')[0]}"
            if row["complete"]
            else "last=?"
        ),
        _cell(row["prompt"] or "-"),
        _cell("; ".join(filter(None, why))),
    ]


def show_session(session_dir: Path, ref: str) -> int:
    """``sessions show``: the transcript a resume sends (after a compression, the history it
    left, marked), one message a paragraph;
    a failed tool result shows its error (and what the tool printed), marked with how it
    failed."""
    path = resolve_session(session_dir, ref)
    names: dict[str, str] = {}
    log = read_session(path)
    messages = log.transcript(keep=is_preamble_message, compressed=True)
    if log.compacted != log.messages:
        _say("(the history was compressed: a resume sends the summary below, not what it replaced)")
    first_system = next((m for m in messages if isinstance(m, SystemMessage)), None)
    for message in messages:
        if message is first_system:  # the resuming run's own system prompt takes its place
            _say(f"[system, replaced by the resuming run's own] {_cut(message.content, 2000)}")
        elif isinstance(message, AssistantMessage):
            _say(f"[assistant] {message.content}")
            for call in message.tool_calls:
                names[call.id] = call.name
                _say(f"  -> {call.name}({json.dumps(call.arguments, ensure_ascii=False)})")
        elif isinstance(message, ToolMessage):
            status, error, output = tool_outcome(message)
            tool = f"tool {names.get(message.tool_call_id, '?')} {message.tool_call_id}"
            if status == "ok":
                _say(f"[{tool}] {_cut(output, 500)}")
            else:
                _say(f"[{tool} {status.upper()}] {_cut(error, 2000) or '(no error text)'}")
                if output:
                    _say("  output: " + _cut(output, 500))
        else:
            images = len(message.images) if isinstance(message, UserMessage) else 0
            more = f" [+{images} image(s)]" if images else ""
            _say(f"[{message.role}] {_cut(message.content, 2000)}{more}")
    return 0


def _cut(text: str, limit: int) -> str:
    """``text`` up to ``limit`` characters, saying how many more a resume sends."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more characters not shown]"


def _sandbox_line(sandbox: dict[str, Any] | None) -> str:
    if not sandbox:
        return "not recorded"
    mechanism = str(sandbox.get("mechanism", "?"))
    if mechanism == "none":
        return "none (--no-sandbox)"
    version = f" {sandbox['version']}" if sandbox.get("version") else ""
    network = "network allowed" if sandbox.get("network") else "no network"
    return f"{mechanism}{version}, {network}"


def _error_line(error: dict[str, str]) -> str:
    """``ProviderError (auth): message`` from a recorded ``run_end`` error."""
    name = error.get("name") or "error"
    kind = f" ({error['kind']})" if error.get("kind") and error.get("kind") != name else ""
    return f"{name}{kind}: {' '.join(error.get('message', '').split())[:2000]}"


def trace_html(session_dir: Path, ref: str, out: str) -> int:
    """``agentfsm trace REF --html FILE``: write the session's picture; says where on stderr."""
    from ._run_html import render_run

    path = resolve_session(session_dir, ref)
    target = Path(out)
    render_run(path, target)
    print(f"wrote {sanitize(str(target.resolve()))}", file=sys.stderr)
    return 0


def trace(session_dir: Path, ref: str, as_json: bool) -> int:
    path = resolve_session(session_dir, ref)
    runs = trace_session(path)
    if as_json:
        _say(json.dumps({"session": path.stem, "runs": [r.as_dict() for r in runs]}))
        return 0
    _say(f"session {path.stem}: {len(runs)} run(s)")
    for run in runs:
        data = run.as_dict()
        usage = data["usage"] or {}
        _say(
            f"run {run.index}: {run.ending} after "
            f"{data['turns']} turn(s)"
            + (f" in {data['duration_s']:.1f} s" if data["duration_s"] is not None else "")
        )
        if run.resumed_from:
            _say(
                f"  resumed from {run.resumed_from} "
                f"({run.seeded} earlier message(s), not counted here)"
            )
        if run.error:
            _say(f"  error: {_error_line(run.error)}")
        _say(f"  sandbox: {_sandbox_line(run.sandbox)}")
        for note in run.notes:
            _say(f"  {note}")
        calls = ", ".join(f"{k} x{v}" for k, v in sorted(data["tool_calls"].items())) or "none"
        _say(f"  tool calls: {calls}")
        _say(
            f"  tokens: {usage.get('input_tokens', 0)} in, {usage.get('output_tokens', 0)} out, "
            f"cache read {usage.get('cache_read_tokens', 0)}"
        )
        warnings = data["health_warnings"] or "none"
        _say(f"  compressions: {data['compressions']}; health warnings: {warnings}")
        skipped = data["redirections_skipped"] or "none"
        _say(f"  redirections: {data['redirections']} fired, skipped {skipped}")
        if data["gate_refusals"]:
            _say(f"  gate refusals: {data['gate_refusals']}")
        if data["policy_stop"]:
            _say(f"  stopped by {data['policy_stop']}")
    return 0
