"""Hostile session files and folders: FIFOs, devices, huge and deep lines, junk, wrong types.

Each case runs the real reader, store and CLI on real files and must end quickly, in
bounded memory, with the damage skipped or refused in one clear line.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agentfsm import Agent
from agentfsm.adapters.sessions import (
    SessionNotFound,
    SessionStore,
    read_session,
    read_session_messages,
    resolve_session,
    trace_session,
)
from agentfsm.adapters.sessions._lines import MAX_LINE_BYTES, MAX_SESSION_BYTES
from agentfsm.cli import main
from agentfsm.testing import ScriptedChat

from .table import measure

GOOD_START = json.dumps(
    {"ts": "2026-01-01T00:00:00.000Z", "kind": "meta", "meta": {"event": "run_start"}}
)
GOOD_USER = json.dumps({"kind": "message", "message": {"role": "user", "content": "hi"}})
GOOD_REPLY = json.dumps(
    {"kind": "message", "message": {"role": "assistant", "content": "hello", "tool_calls": []}}
)
GOOD = [GOOD_START, GOOD_USER, GOOD_REPLY]
HANG_GUARD = 30.0


def _bounded(action: Callable[[], object]) -> object:
    """Run ``action`` in a thread; fail (instead of hanging the suite) past the guard."""
    box: dict[str, object] = {}

    def work() -> None:
        try:
            box["value"] = action()
        except BaseException as error:
            box["error"] = error

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(HANG_GUARD)
    assert not worker.is_alive(), "hung"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = _bounded(lambda: main(argv))
    captured = capsys.readouterr()
    assert isinstance(code, int)
    return code, captured.out, captured.err


def _one_line_error(code: int, out: str, err: str, command: str) -> None:
    assert code == 2
    assert "Traceback" not in err + out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"agentfsm {command}: ")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    root.mkdir()
    return root


def test_fifo_named_like_a_session(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = folder / "20990101T000000000000Z-0001.jsonl"
    os.mkfifo(fifo)
    with measure("sessions", "FIFO as latest: resume/trace/list/show") as row:
        with pytest.raises(SessionNotFound, match="no sessions"):
            _bounded(lambda: resolve_session(folder, "latest"))
        with pytest.raises(SessionNotFound, match="not a regular file"):
            _bounded(lambda: read_session_messages(fifo))
        with pytest.raises(SessionNotFound, match="not a regular file"):
            _bounded(lambda: resolve_session(folder, fifo.stem))
        for argv, command in (
            (["trace", "latest"], "trace"),
            (["trace", fifo.stem, "--html", str(folder.parent / "run.html")], "trace"),
            (["sessions", "show", fifo.stem], "sessions show"),
        ):
            _one_line_error(*_cli([*argv, "--session-dir", str(folder)], capsys), command)
        code, out, _ = _cli(["sessions", "list", "--json", "--session-dir", str(folder)], capsys)
        assert (code, json.loads(out)) == (0, [])
        engine = Agent(ScriptedChat(["x"]), session_dir=folder)
        with pytest.raises(SessionNotFound):
            _bounded(lambda: __import__("asyncio").run(engine.run("go", resume="latest")))
        row.outcome = "refused: not a regular file / no sessions"
    assert row.seconds < 10


def test_special_files_and_odd_entries(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (folder / "a-zero.jsonl").symlink_to("/dev/zero")
    (folder / "b-loop.jsonl").symlink_to(folder / "b-loop.jsonl")
    (folder / "c-dangling.jsonl").symlink_to(folder / "missing")
    (folder / "d-dir.jsonl").mkdir()
    good = folder / "e-good.jsonl"
    good.write_text("\n".join(GOOD) + "\n", "utf-8")
    with measure("sessions", "/dev/zero, symlink loop, dangling link, folder") as row:
        assert resolve_session(folder, "latest") == good
        for name in ("a-zero", "b-loop", "d-dir"):
            with pytest.raises(SessionNotFound):
                resolve_session(folder, name)
        with pytest.raises(SessionNotFound, match="not a regular file"):
            _bounded(lambda: read_session_messages(folder / "a-zero.jsonl"))
        code, out, _ = _cli(["sessions", "list", "--json", "--session-dir", str(folder)], capsys)
        assert code == 0
        assert [r["id"] for r in json.loads(out)] == ["e-good"]
        row.outcome = "only the regular file is listed; others refused"
    assert row.growth_mb < 100


def _write_lines(path: Path, *chunks: bytes) -> None:
    with path.open("wb") as file:
        for chunk in chunks:
            file.write(chunk)


@pytest.mark.parametrize(
    ("case", "junk"),
    [
        ("64 MiB line", lambda: b"x" * (64 * 1024 * 1024) + b"\n"),
        ("64 MiB JSON string line", lambda: b'{"a":"' + b"y" * (64 * 1024 * 1024) + b'"}\n'),
        ("line just over the bound", lambda: b"[" + b"0," * (MAX_LINE_BYTES // 2) + b"0]\n"),
        ("10,000-deep nesting", lambda: b"[" * 10_000 + b"]" * 10_000 + b"\n"),
        ("1,000,000-deep nesting", lambda: b'{"a":' * 1_000_000 + b"1" + b"}" * 1_000_000 + b"\n"),
        ("200-deep message", lambda: json.dumps(_deep_message(200)).encode() + b"\n"),
        ("binary junk", lambda: os.urandom(1024 * 1024) + b"\n"),
        ("NUL bytes", lambda: b"\0" * 100_000 + b"\n"),
        ("lone surrogates", lambda: _surrogate_message().encode() + b"\n"),
        (
            "invalid UTF-8 in a message",
            lambda: b'{"kind":"message","message":{"role":"user","content":"\xff\xfe"}}\n',
        ),
        ("wrong-typed fields", lambda: "\n".join(_wrong_types()).encode() + b"\n"),
    ],
)
def test_damaged_lines_are_skipped(
    folder: Path,
    case: str,
    junk: Callable[[], bytes],
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = folder / "20260101T000000000000Z-0001.jsonl"
    _write_lines(
        path, GOOD_START.encode() + b"\n", junk(), b"\n".join(g.encode() for g in GOOD[1:])
    )
    with measure("sessions", f"damaged line: {case}") as row:
        with caplog.at_level(logging.WARNING, "agentfsm.sessions"):
            messages = _bounded(lambda: read_session_messages(path))
            runs = _bounded(lambda: trace_session(path))
        assert isinstance(messages, list)
        assert [m.content for m in messages][-2:] == ["hi", "hello"]
        assert isinstance(runs, list)
        assert runs
        assert all(isinstance(r.as_dict(), dict) for r in runs)
        for argv in (
            ["trace", "latest"],
            ["trace", "latest", "--json"],
            ["trace", "latest", "--html", str(folder.parent / "run.html")],
            ["sessions", "show", "latest"],
            ["sessions", "list"],
        ):
            code, out, err = _cli([*argv, "--session-dir", str(folder)], capsys)
            assert code == 0, err
            assert "Traceback" not in err
            if "--json" in argv:
                json.loads(out)
        skipped = [r for r in caplog.records if "skipped" in r.getMessage()]
        row.outcome = f"kept {len(messages)} messages; {len(skipped)} skip warning(s)"
    assert row.seconds < HANG_GUARD
    assert row.growth_mb < 200


def _deep_message(depth: int) -> dict[str, object]:
    arguments: object = 1
    for _ in range(depth):
        arguments = {"a": arguments}
    return {
        "kind": "message",
        "message": {
            "role": "assistant",
            "content": "deep",
            "tool_calls": [{"id": "c1", "name": "t", "arguments": arguments}],
        },
    }


def _surrogate_message() -> str:
    return '{"kind":"message","message":{"role":"user","content":"a\\ud800b\\udfffc"}}'


def _wrong_types() -> list[str]:
    return [
        json.dumps({"ts": 5, "kind": "meta", "meta": {"event": "run_start", "sandbox": [1]}}),
        json.dumps({"kind": "meta", "meta": {"event": "run_end", "usage": [1, 2], "ts": None}}),
        json.dumps({"ts": "nonsense", "kind": "meta", "meta": {"event": "run_end", "usage": 7}}),
        json.dumps({"kind": "message", "message": "assistant"}),
        json.dumps({"kind": "message", "message": {"role": "assistant", "tool_calls": 5}}),
        json.dumps({"kind": "message", "message": {"role": ["assistant"]}}),
        json.dumps({"kind": "meta", "meta": {"event": ["x"], "code": {"a": 1}}}),
        json.dumps([1, 2, 3]),
        json.dumps("string"),
        json.dumps({"kind": "meta", "meta": {"event": "policy_warn", "code": [1], "policy": 3}}),
    ]


def test_oversized_sparse_file_is_refused(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = folder / "20260101T000000000000Z-0001.jsonl"
    with path.open("wb") as file:
        file.truncate(MAX_SESSION_BYTES + 1)
    with measure("sessions", "sparse file over the size bound") as row:
        with pytest.raises(SessionNotFound, match="larger than"):
            _bounded(lambda: read_session_messages(path))
        _one_line_error(*_cli(["trace", "latest", "--session-dir", str(folder)], capsys), "trace")
        code, out, _ = _cli(["sessions", "list", "--json", "--session-dir", str(folder)], capsys)
        assert code == 0
        assert "larger than" in json.loads(out)[0]["error"]
        row.outcome = "refused: larger than the bound"
    assert row.seconds < 5
    assert row.growth_mb < 50


def test_sparse_file_of_zeros_within_the_bound(folder: Path) -> None:
    path = folder / "20260101T000000000000Z-0001.jsonl"
    with path.open("wb") as file:
        file.truncate(256 * 1024 * 1024)
    with measure("sessions", "256 MiB of NUL bytes, no newline") as row:
        assert _bounded(lambda: read_session_messages(path)) == []
        row.outcome = "no messages"
    assert row.seconds < HANG_GUARD
    assert row.growth_mb < 100


@pytest.mark.parametrize(
    "policy_state",
    [
        "a string",
        [1, 2],
        7,
        None,
        {"prune_tool_results": 5},
        {"prune_tool_results": {"key": 5}},
        {"prune_tool_results": ["x"]},
        {"other_policy": "text"},
    ],
    ids=repr,
)
async def test_wrong_typed_policy_state_is_ignored(
    folder: Path, policy_state: object, caplog: pytest.LogCaptureFixture
) -> None:
    path = folder / "20260101T000000000000Z-0001.jsonl"
    end = {"kind": "meta", "meta": {"event": "run_end", "policy_state": policy_state}}
    path.write_text("\n".join([*GOOD, json.dumps(end)]) + "\n", "utf-8")
    with measure("sessions", f"policy_state {policy_state!r}") as row:
        with caplog.at_level(logging.WARNING, "agentfsm.sessions"):
            state = read_session(path).policy_state
            from agentfsm.policies import presets

            engine = Agent(
                ScriptedChat(["done"]),
                policies=presets.coding_agent(),
                max_turns=5,
                session_dir=folder,
            )
            outcome = await __import__("asyncio").wait_for(
                engine.run("again", resume="latest"), HANG_GUARD
            )
        assert outcome.stopped_reason == "final"
        assert all(isinstance(v, dict) for v in state.values())
        warned = any("policy" in r.getMessage() for r in caplog.records)
        assert warned or policy_state is None
        row.outcome = f"resumed; kept {sorted(state)}; warned={warned}"


def test_session_dir_naming_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "not-a-folder"
    target.write_text("x", "utf-8")
    with measure("sessions", "--session-dir naming a file") as row:
        with pytest.raises(NotADirectoryError):
            _bounded(lambda: SessionStore(target).new_handle())
        assert SessionStore(target).list() == []
        for argv, command in (
            (["sessions", "list"], "sessions list"),
            (["sessions", "show", "latest"], "sessions show"),
            (["trace", "latest"], "trace"),
            (["trace", "latest", "--json"], "trace"),
        ):
            code, out, err = _cli([*argv, "--session-dir", str(target)], capsys)
            _one_line_error(code, out, err, command)
            assert out == ""
        row.outcome = "NotADirectoryError; CLI exit 2, one line"
    assert row.seconds < 5
