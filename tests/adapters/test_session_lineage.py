"""Session lineage: a resumed session names its parent, each run counts only its own turns
and tool calls, a failed run keeps its error; files written before these fields still
trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentfsm import Agent
from agentfsm.adapters.providers import ProviderError
from agentfsm.adapters.sessions import trace_session
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply


def run_start(path: Path, index: int = 0) -> dict[str, Any]:
    records = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    starts = [
        r["meta"] for r in records if r["kind"] == "meta" and r["meta"]["event"] == "run_start"
    ]
    start: dict[str, Any] = starts[index]
    return start


def tools() -> ScriptedTools:
    return ScriptedTools({"read_file": lambda **_: "hello", "list_dir": lambda **_: "a b"})


async def test_a_resumed_session_names_its_parent_and_counts_its_own_turns(
    tmp_path: Path,
) -> None:
    chat = ScriptedChat(
        [
            tool_reply(("read_file", {"path": "a"})),
            tool_reply(("list_dir", {})),
            "first answer",
            "second answer",
        ]
    )
    engine = Agent(chat, tools(), session_dir=tmp_path, system_prompt="s")
    first = await engine.run("one")
    assert first.session_path is not None
    parent = Path(first.session_path)
    resumed = await engine.run("two", resume=parent.stem)
    assert resumed.session_path is not None
    child = Path(resumed.session_path)

    start = run_start(child)
    assert start["resumed_from"] == {"id": parent.stem, "path": str(parent)}
    # system, user, 3 assistant messages and 2 tool results came from the parent
    assert start["seeded"] == start["history_size"] == 7
    assert "resumed_from" not in run_start(parent)
    assert run_start(parent)["seeded"] == 1  # the system prompt

    [before] = trace_session(parent)
    assert (before.turns, dict(before.tool_calls)) == (3, {"read_file": 1, "list_dir": 1})
    assert before.resumed_from is None
    [after] = trace_session(child)
    assert after.turns == 1
    assert dict(after.tool_calls) == {}
    assert after.resumed_from == parent.stem
    assert after.seeded == 7
    assert after.as_dict()["resumed_from"] == parent.stem
    assert after.as_dict()["seeded_messages"] == 7
    assert after.error is None


async def test_runs_sharing_a_handle_count_their_own_turns(tmp_path: Path) -> None:
    engine = Agent(
        ScriptedChat([tool_reply(("list_dir", {})), "one", "two"]), tools(), session_dir=tmp_path
    )
    handle = engine.new_session()
    await engine.run("a", session=handle)
    await engine.run("b", session=handle)
    assert run_start(handle.path, 1)["seeded"] == 0
    first, second = trace_session(handle.path)
    assert (first.turns, dict(first.tool_calls)) == (2, {"list_dir": 1})
    assert (second.turns, dict(second.tool_calls)) == (1, {})
    assert first.resumed_from is second.resumed_from is None


async def test_a_failed_run_records_and_traces_its_error(tmp_path: Path) -> None:
    key = "sk-test-0123456789abcdef"
    error = ProviderError("auth", f"invalid key {key}", status=401, provider="api").scrub((key,))
    engine = Agent(ScriptedChat(["fine", error]), session_dir=tmp_path)
    first = await engine.run("one")
    with pytest.raises(ProviderError):
        await engine.run("two", resume="latest")
    # The failed run's own file: the one that is not the first run's (two files written within
    # the same clock tick have equal modification times, so "newest" cannot tell them apart).
    [latest] = [p for p in tmp_path.glob("*.jsonl") if p != Path(first.session_path or "")]
    text = latest.read_text("utf-8")
    assert key not in text
    [run] = trace_session(latest)
    assert run.stopped_reason == "failed"
    assert run.turns == 0
    assert run.resumed_from == Path(first.session_path or "").stem
    assert run.error == {
        "name": "ProviderError",
        "kind": "auth",
        "message": "api: auth 401: invalid key [redacted]",
    }
    assert run.as_dict()["error"] == run.error


def write(path: Path, *metas_and_messages: dict[str, Any]) -> Path:
    lines = []
    for item in metas_and_messages:
        kind = "message" if "role" in item else "meta"
        lines.append(json.dumps({"ts": "2026-01-01T00:00:00.000Z", "kind": kind, kind: item}))
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def test_files_without_the_new_fields_still_trace(tmp_path: Path) -> None:
    """Before ``seeded`` was recorded, a file's first run wrote ``history_size`` earlier
    messages before its own; a later run on the same handle wrote only its own."""
    assistant_with_call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {}}],
    }
    path = write(
        tmp_path / "20260101T000000000000Z-0001.jsonl",
        {"event": "run_start", "input_chars": 3, "history_size": 4},
        {"role": "user", "content": "old"},
        assistant_with_call,
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": "new"},
        {"role": "assistant", "content": "new answer"},
        {"event": "run_end", "stopped_reason": "final", "usage": {}, "error": "not an object"},
        {"event": "run_start", "input_chars": 3, "history_size": 6},
        {"role": "user", "content": "more"},
        assistant_with_call,
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
        {"role": "assistant", "content": "done"},
        {"event": "run_end", "stopped_reason": "final", "usage": {}},
    )
    first, second = trace_session(path)
    assert (first.turns, dict(first.tool_calls), first.seeded) == (1, {}, 4)
    assert (second.turns, dict(second.tool_calls), second.seeded) == (2, {"read_file": 1}, 0)
    assert first.resumed_from is None
    assert first.error is None


def test_wrong_typed_lineage_fields_are_ignored(tmp_path: Path) -> None:
    path = write(
        tmp_path / "20260101T000000000000Z-0001.jsonl",
        {"event": "run_start", "seeded": -2, "history_size": "3", "resumed_from": "x"},
        {"role": "assistant", "content": "a"},
        {"event": "run_end", "stopped_reason": "failed", "error": {"name": 3, "message": "m"}},
    )
    [run] = trace_session(path)
    assert (run.turns, run.seeded, run.resumed_from) == (1, 0, None)
    assert run.error == {"message": "m"}
