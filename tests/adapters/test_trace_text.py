"""trace counts records by "\\n" lines only: U+2028, U+0085 and other characters that
str.splitlines() breaks on stay inside their record."""

from __future__ import annotations

import json
from pathlib import Path

from agentfsm.adapters.sessions import trace_session


def test_trace_counts_a_reply_with_line_separators(tmp_path: Path) -> None:
    odd = "one\u2028two\u2029three\x85four\x1cfive\x0bsix\x0cseven\rend"
    records = [
        {"ts": "2026-01-01T00:00:00Z", "kind": "meta", "meta": {"event": "run_start"}},
        {
            "ts": "2026-01-01T00:00:01Z",
            "kind": "message",
            "message": {"role": "user", "content": odd},
        },
        {
            "ts": "2026-01-01T00:00:02Z",
            "kind": "message",
            "message": {
                "role": "assistant",
                "content": odd,
                "tool_calls": [{"id": "c\u2028", "name": "ls", "arguments": {"p": odd}}],
            },
        },
        {
            "ts": "2026-01-01T00:00:03Z",
            "kind": "message",
            "message": {"role": "assistant", "content": odd},
        },
        {
            "ts": "2026-01-01T00:00:04Z",
            "kind": "meta",
            "meta": {"event": "run_end", "stopped_reason": "final", "usage": {"input_tokens": 3}},
        },
    ]
    path = tmp_path / "20260101T000000-1.jsonl"
    path.write_bytes(
        b"".join((json.dumps(r, ensure_ascii=False) + "\n").encode("utf-8") for r in records)
    )
    [run] = trace_session(path)
    assert run.turns == 2
    assert dict(run.tool_calls) == {"ls": 1}
    assert run.stopped_reason == "final"
    assert run.usage == {"input_tokens": 3}
