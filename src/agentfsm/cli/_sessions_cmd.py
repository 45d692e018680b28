"""``agentfsm sessions list|show`` and ``agentfsm trace``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agentfsm.adapters.sessions import (
    SessionNotFound,
    read_session_messages,
    resolve_session,
    session_files,
    trace_session,
)
from agentfsm.engine import AssistantMessage, ToolMessage, printable

from ._terminal import sanitize

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


def list_sessions(session_dir: Path, as_json: bool) -> int:
    """``sessions list``: one row per session, the newest first (as ``latest`` picks)."""
    rows: list[dict[str, Any]] = []
    for path in reversed(session_files(session_dir)):
        try:
            runs = trace_session(path)
        except (SessionNotFound, OSError) as error:
            rows.append({"id": path.stem, "error": describe(error)})
            continue
        last = runs[-1] if runs else None
        rows.append(
            {
                "id": path.stem,
                "runs": len(runs),
                "turns": sum(r.turns for r in runs),
                "tool_calls": sum(sum(r.tool_calls.values()) for r in runs),
                "last_stop": last.stopped_reason if last else None,
                "resumed_from": runs[0].resumed_from if runs else None,
            }
        )
    if as_json:
        _say(json.dumps(rows))
    elif not rows:
        _say(f"no sessions in {session_dir}")
    else:
        for row in rows:
            if "error" in row:
                _say(f"{row['id']}  unreadable: {row['error']}")
            else:
                parent = f"  resumed from {row['resumed_from']}" if row["resumed_from"] else ""
                _say(
                    f"{row['id']}  runs={row['runs']}  turns={row['turns']}  "
                    f"tool_calls={row['tool_calls']}  last={row['last_stop']}{parent}"
                )
    return 0


def show_session(session_dir: Path, ref: str) -> int:
    path = resolve_session(session_dir, ref)
    for message in read_session_messages(path):
        if isinstance(message, AssistantMessage):
            _say(f"[assistant] {message.content}")
            for call in message.tool_calls:
                _say(f"  -> {call.name}({json.dumps(call.arguments, ensure_ascii=False)})")
        elif isinstance(message, ToolMessage):
            flag = " (error)" if message.is_error else ""
            _say(f"[tool {message.tool_call_id}{flag}] {message.content[:500]}")
        else:
            _say(f"[{message.role}] {message.content[:2000]}")
    return 0


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
            f"run {run.index}: {data['stopped_reason'] or 'unfinished (no run_end)'} after "
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
