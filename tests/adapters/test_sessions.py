"""Session files: writing, reading back leniently, resolving references."""

from __future__ import annotations

import json
import logging
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from agentfsm import (
    Agent,
    AssistantMessage,
    ChatResult,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from agentfsm.adapters.sessions import (
    SessionNotFound,
    SessionStore,
    read_session_messages,
    resolve_session,
)
from agentfsm.adapters.sessions._reader import answer_open_tool_calls, read_session_policy_state
from agentfsm.engine._cancellation import UNRECORDED_BEFORE_TOOL, UNRECORDED_DURING_TOOL
from agentfsm.engine._serialization import to_jsonable
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply


def kinds(path: Path) -> list[str]:
    """Each record as its kind plus its event (meta) or role (message)."""
    out = []
    for line in path.read_text("utf-8").splitlines():
        record = json.loads(line)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["ts"])
        if record["kind"] == "meta":
            out.append(f"meta:{record['meta']['event']}")
        else:
            out.append(f"message:{record['message']['role']}")
    return out


def metas(path: Path, event: str) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    return [r["meta"] for r in records if r["kind"] == "meta" and r["meta"]["event"] == event]


async def test_multi_run_session_round_trip(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    chat = ScriptedChat(
        [
            ChatResult(tool_reply(("echo", {"text": "a"})), Usage(100, 10, cache_read_tokens=60)),
            ChatResult(AssistantMessage("first answer"), Usage(120, 5)),
            ChatResult(tool_reply(("echo", {"text": "b"}), ("echo", {"text": "c"})), Usage(10, 1)),
        ]
    )
    engine = Agent(
        chat,
        ScriptedTools({"echo": lambda text: text}),
        system_prompt="be brief",
        session_dir=tmp_path,
        max_turns=1,
    )
    handle = engine.new_session(label="demo run")
    engine_two_turns = Agent(chat, engine.tools, system_prompt="be brief", max_turns=2)
    first = await engine_two_turns.run("hello", session=handle)
    second = await engine.run("again", session=handle)

    path = handle.path
    assert re.fullmatch(r"\d{8}T\d{12}Z-0001-demo-run\.jsonl", path.name)
    assert first.stopped_reason == "final"
    assert second.stopped_reason == "budget"
    assert first.session_path == second.session_path == str(path)
    assert kinds(path) == snapshot
    # One file, two runs: run_start/run_end twice, the history written once.
    assert [m["history_size"] for m in metas(path, "run_start")] == [0, 5]
    assert [m["input_chars"] for m in metas(path, "run_start")] == [5, 5]
    ends = metas(path, "run_end")
    assert [e["stopped_reason"] for e in ends] == ["final", "budget"]
    assert ends[0]["usage"] == {
        "input_tokens": 220,
        "output_tokens": 15,
        "cache_read_tokens": 60,
        "cache_write_tokens": 0,
        "reasoning_tokens": 0,
    }
    assert metas(path, "budget_exhausted") == [{"event": "budget_exhausted", "turns_used": 1}]

    messages = read_session_messages(path)
    assert messages == second.messages
    assert messages[0] == SystemMessage("be brief")
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "tool",
    ]
    cancelled = messages[-1]
    assert isinstance(cancelled, ToolMessage)
    assert json.loads(cancelled.content)["error"] == "turn_budget_exhausted"


async def test_reading_its_own_output_changes_nothing(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    handle = store.new_handle()
    handle.write_messages(SystemMessage("s"), UserMessage("u"), AssistantMessage("a"))
    handle.write_messages(UserMessage("dangling 1"), UserMessage("dangling 2"))
    once = read_session_messages(handle.path)
    assert once == [SystemMessage("s"), UserMessage("u"), AssistantMessage("a")]
    again = store.new_handle()
    again.write_messages(*once)
    assert read_session_messages(again.path) == once


def test_corrupt_partial_and_unknown_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good_user = {"ts": "t", "kind": "message", "message": {"role": "user", "content": "hi"}}
    good_reply = {"ts": "t", "kind": "message", "message": {"role": "assistant", "content": "yo"}}
    lines = [
        json.dumps({"ts": "t", "kind": "meta", "meta": {"event": "run_start"}}),
        json.dumps(good_user),
        "{not json",
        json.dumps({"ts": "t", "kind": "message", "message": {"role": "robot", "content": "?"}}),
        json.dumps({"ts": "t", "kind": "message", "message": {"role": "user"}}),  # no content
        json.dumps({"ts": "t", "kind": "message", "message": "just a string"}),
        json.dumps([1, 2, 3]),
        "",
        json.dumps({"ts": "t", "kind": "other", "message": {"role": "user", "content": "x"}}),
        json.dumps(good_reply),
        '{"ts": "t", "kind": "message", "message": {"role": "user", "cont',  # cut short
    ]
    path.write_text("\n".join(lines), "utf-8")
    assert read_session_messages(path) == [UserMessage("hi"), AssistantMessage("yo")]


def test_skipped_lines_are_counted_in_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.jsonl"
    user = json.dumps({"kind": "message", "message": {"role": "user", "content": "hi"}})
    reply = json.dumps({"kind": "message", "message": {"role": "assistant", "content": "yo"}})
    path.write_text("\n".join(["{bad", "[" * 5000 + "]" * 5000, user, "{worse", reply]), "utf-8")
    with caplog.at_level(logging.WARNING, "agentfsm.sessions"):
        assert read_session_messages(path) == [UserMessage("hi"), AssistantMessage("yo")]
    (record,) = caplog.records
    assert "skipped 3 unreadable line(s)" in record.getMessage()


def test_wrong_typed_policy_state_is_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.jsonl"
    states = [{"prune_tool_results": {"k": "marker"}}, {"prune_tool_results": 5, "other": {}}]
    path.write_text(
        "\n".join(
            json.dumps({"kind": "meta", "meta": {"event": "run_end", "policy_state": s}})
            for s in states
        ),
        "utf-8",
    )
    with caplog.at_level(logging.WARNING, "agentfsm.sessions"):
        assert read_session_policy_state(path) == {"other": {}}
    assert "prune_tool_results" in caplog.text


def test_a_session_folder_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("", "utf-8")
    with pytest.raises(NotADirectoryError):
        SessionStore(target).new_handle()
    with pytest.raises(SessionNotFound, match="not a folder"):
        resolve_session(target, "latest")


def test_every_trailing_user_message_is_dropped(tmp_path: Path) -> None:
    handle = SessionStore(tmp_path).new_handle()
    handle.write_messages(
        UserMessage("q"),
        AssistantMessage("a"),
        UserMessage("retry 1"),
        UserMessage("retry 2"),
        UserMessage("retry 3"),
    )
    assert read_session_messages(handle.path) == [UserMessage("q"), AssistantMessage("a")]


def test_missing_file_is_reraised(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_session_messages(tmp_path / "nope.jsonl")


def make_sessions(folder: Path, names: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for age, name in enumerate(reversed(names)):
        path = folder / f"{name}.jsonl"
        path.write_text('{"ts":"","kind":"meta","meta":{"event":"run_start"}}\n', "utf-8")
        stamp = 1_700_000_000 - age * 60
        os.utime(path, (stamp, stamp))


def test_resolve_latest_exact_and_prefix(tmp_path: Path) -> None:
    make_sessions(
        tmp_path, ["20260101T000000Z-0001", "20260102T000000Z-0001-fix", "20260102T000000Z-0002"]
    )
    assert resolve_session(tmp_path, "latest").name == "20260102T000000Z-0002.jsonl"
    assert resolve_session(tmp_path, "20260101T000000Z-0001").name == "20260101T000000Z-0001.jsonl"
    assert resolve_session(tmp_path, "20260101T000000Z-0001.jsonl").parent == tmp_path
    assert resolve_session(tmp_path, "20260101").name == "20260101T000000Z-0001.jsonl"
    assert resolve_session(tmp_path, "20260102T000000Z-0001").name == (
        "20260102T000000Z-0001-fix.jsonl"
    )
    # an empty file (a session whose start was never recorded) is never latest
    newer = tmp_path / "20260103T000000Z-0001.jsonl"
    newer.write_bytes(b"")
    assert resolve_session(tmp_path, "latest").name == "20260102T000000Z-0002.jsonl"
    assert resolve_session(tmp_path, "20260103").name == newer.name  # by its id, it is there


def test_resolve_errors_name_the_ref_but_no_path(tmp_path: Path) -> None:
    make_sessions(tmp_path, ["20260102T000000Z-0001", "20260102T000000Z-0002"])
    with pytest.raises(SessionNotFound, match="ambiguous") as ambiguous:
        resolve_session(tmp_path, "20260102")
    with pytest.raises(SessionNotFound) as missing:
        resolve_session(tmp_path, "2030")
    with pytest.raises(SessionNotFound, match="not a session id"):
        resolve_session(tmp_path, "../20260102T000000Z-0001")
    with pytest.raises(SessionNotFound, match="no sessions"):
        resolve_session(tmp_path / "empty", "latest")
    for error in (ambiguous.value, missing.value):
        assert str(tmp_path) not in str(error)
        assert "'20260102'" in str(error) or "'2030'" in str(error)


async def test_resume_latest_goes_to_a_fresh_file(tmp_path: Path) -> None:
    engine = Agent(ScriptedChat(["first", "second"]), session_dir=tmp_path, system_prompt="s")
    first = await engine.run("one")
    resumed = await engine.run("two", resume="latest")
    assert resumed.session_path != first.session_path
    assert resumed.session_path is not None
    # The fresh file is seeded with the resumed history on its first write.
    assert read_session_messages(resumed.session_path) == [
        SystemMessage("s"),
        UserMessage("one"),
        AssistantMessage("first"),
        UserMessage("two"),
        AssistantMessage("second"),
    ]
    assert metas(Path(resumed.session_path), "run_start")[0]["history_size"] == 3
    a, b = Path(first.session_path or "").stem, Path(resumed.session_path).stem
    prefix = a[: next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)]
    assert prefix
    with pytest.raises(SessionNotFound, match="ambiguous"):
        engine.load_session(prefix)


async def test_a_session_that_cannot_be_started_refuses_the_run(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the session folder should be", "utf-8")
    chat = ScriptedChat(["fine"])
    engine = Agent(chat, session_dir=blocker / "sessions")
    with pytest.raises(OSError, match="could not be recorded"):
        await engine.run("hi")
    assert chat.calls == 0  # nothing is paid for that could not be recorded


async def test_a_session_that_fails_mid_run_is_reported_on_the_outcome(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def answer(request: object) -> str:
        handle.close()
        handle.path.unlink()
        handle.path.mkdir()  # the file can no longer be opened for writing (root too)
        return "fine"

    engine = Agent(ScriptedChat(answer), session_dir=tmp_path)
    handle = engine.new_session()
    with caplog.at_level(logging.WARNING, logger="agentfsm"):
        outcome = await engine.run("hi", session=handle)
    assert outcome.stopped_reason == "final"
    assert outcome.final == AssistantMessage("fine")
    assert outcome.session_error is not None
    assert "Is a directory" in outcome.session_error
    assert caplog.text.count("is incomplete") == 1


def test_file_names_use_timestamp_counter_and_label(tmp_path: Path) -> None:
    moment = datetime(2026, 9, 14, 5, 0, 0, 123000, tzinfo=UTC)
    store = SessionStore(tmp_path, clock=lambda: moment)
    a, b = store.new_handle(), store.new_handle("My Label!")
    assert a.path.name == "20260914T050000123000Z-0001.jsonl"
    assert b.path.name == "20260914T050000123000Z-0002-My-Label.jsonl"
    a.write_meta({"event": "x"})
    assert json.loads(a.path.read_text("utf-8"))["ts"] == "2026-09-14T05:00:00.123Z"


def test_lone_surrogates_are_written_and_read_back_exactly(tmp_path: Path) -> None:
    odd = "a\udcffb\ud800"
    handle = SessionStore(tmp_path).new_handle()
    written: list[Message] = [
        SystemMessage(f"sys {odd}"),
        UserMessage(f"user {odd}"),
        AssistantMessage(odd, tool_calls=(ToolCall("c1", "ls", {odd: odd}),)),
        ToolMessage("c1", f"out {odd}"),
        AssistantMessage("done"),
    ]
    handle.write_messages(*written[:2])
    handle.write_meta({"event": "note", "text": odd})
    handle.write_messages(*written[2:])
    raw = handle.path.read_bytes()
    raw.decode("ascii")  # escaped, so valid in any encoding
    assert len(raw.splitlines()) == 6
    assert read_session_messages(handle.path) == written


def _line(record: dict[str, Any]) -> str:
    return json.dumps({"ts": "t", **record})


def test_unanswered_tool_calls_read_back_answered(tmp_path: Path) -> None:
    calls = (ToolCall("c1", "edit", {}), ToolCall("c2", "ls", {}), ToolCall("c3", "ls", {}))
    asked = AssistantMessage("", tool_calls=calls)
    done = ToolMessage("c2", "listed")
    path = tmp_path / "s.jsonl"
    lines = [
        _line({"kind": "message", "message": to_jsonable(UserMessage("go"))}),
        _line({"kind": "message", "message": to_jsonable(ToolMessage("zz", "orphan"))}),
        _line({"kind": "message", "message": to_jsonable(asked)}),
        _line({"kind": "meta", "meta": {"event": "tool_call_start", "call_id": "c2"}}),
        _line({"kind": "message", "message": to_jsonable(done)}),
        _line({"kind": "message", "message": to_jsonable(done)}),  # a second answer
        _line({"kind": "meta", "meta": {"event": "tool_call_start", "call_id": "c1"}}),
    ]
    path.write_text("\n".join(lines) + "\n", "utf-8")
    messages = read_session_messages(path)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "tool"]
    answers = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    assert answers["c2"] == done
    assert answers["c1"].is_error
    assert json.loads(answers["c1"].content)["error"] == UNRECORDED_DURING_TOOL
    assert "may have acted" in answers["c1"].content
    assert json.loads(answers["c3"].content)["error"] == UNRECORDED_BEFORE_TOOL
    # Reading the result back in changes nothing.
    again = SessionStore(tmp_path / "again").new_handle()
    again.write_messages(*messages)
    assert read_session_messages(again.path) == messages
    assert answer_open_tool_calls(messages) == messages


def test_a_call_answered_after_a_later_user_message_is_closed_before_it() -> None:
    asked = AssistantMessage("", tool_calls=(ToolCall("c1", "ls", {}),))
    history: list[Message] = [
        UserMessage("go"),
        asked,
        UserMessage("next"),
        ToolMessage("c1", "late"),
    ]
    fixed = answer_open_tool_calls(history)
    assert [m.role for m in fixed] == ["user", "assistant", "tool", "user"]
    assert json.loads(fixed[2].content)["error"] == UNRECORDED_BEFORE_TOOL


async def test_a_session_file_removed_mid_run_is_reported(tmp_path: Path) -> None:
    def answer(request: object) -> str:
        handle.path.unlink()  # the open file is gone from the folder
        return "fine"

    engine = Agent(ScriptedChat(answer), session_dir=tmp_path)
    handle = engine.new_session()
    outcome = await engine.run("hi", session=handle)
    assert outcome.stopped_reason == "final"
    assert outcome.session_error is not None
    assert "removed" in outcome.session_error


async def test_a_record_that_cannot_be_serialized_ends_the_recording(tmp_path: Path) -> None:
    handle = SessionStore(tmp_path).new_handle()
    handle.write_meta({"event": "a"})
    with pytest.raises(OSError, match="could not be serialized"):
        handle.write_meta({"event": "b", "value": complex(1, 2)})
    with pytest.raises(OSError, match="no longer recorded"):
        handle.write_meta({"event": "c"})  # no record after a lost one: no gap
    assert [json.loads(line)["meta"]["event"] for line in handle.path.read_text().splitlines()] == [
        "a"
    ]
