"""Session lineage on the command line: a resumed run names its parent in its session,
its ``run_end`` and its summary; ``trace`` and ``sessions list`` count each run's own turns
and tool calls; a failed run's trace shows its error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentfsm.adapters.providers import ProviderError
from agentfsm.adapters.sessions import default_session_dir
from agentfsm.cli import main
from agentfsm.conformance._frames import DONE, chunk, openai_url, tool_delta
from agentfsm.engine._protocols import ChatFn
from agentfsm.testing import FakeProviderServer, Reply, ScriptedChat, tool_reply

from .conftest import sandbox_options

SANDBOX = sandbox_options()


def run(workspace: Path, prompt: str, *extra: str, chat: ChatFn | None = None) -> int:
    return main(["run", prompt, "--workspace", str(workspace), *SANDBOX, *extra], chat=chat)


def sessions(workspace: Path) -> list[str]:
    return ["--session-dir", str(default_session_dir(workspace))]


def run_start(path: Path) -> dict[str, Any]:
    for line in path.read_text("utf-8").splitlines():
        record = json.loads(line)
        if record["kind"] == "meta" and record["meta"]["event"] == "run_start":
            meta: dict[str, Any] = record["meta"]
            return meta
    raise AssertionError("no run_start")


def sse_text(text: str) -> Reply:
    return Reply.sse([chunk({"content": text}), chunk({}, finish="stop"), DONE])


def sse_call(call_id: str, name: str) -> Reply:
    frames = [chunk(tool_delta(index=0, id=call_id, name=name, arguments="{}"))]
    return Reply.sse([*frames, chunk({}, finish="tool_calls"), DONE])


def test_a_resumed_run_counts_its_own_turns_and_names_its_parent(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeProviderServer() as server:
        server.enqueue(sse_call("c1", "list_dir"), sse_call("c2", "list_dir"), sse_text("done"))
        server.enqueue(sse_text("still done"))
        options = ["--base-url", openai_url(server), "--model", "m", "--json"]
        assert run(workspace, "look around", *options) == 0
        first = json.loads(capsys.readouterr().out.splitlines()[-1])
        assert run(workspace, "and now?", *options, "--resume", "latest") == 0
        second = json.loads(capsys.readouterr().out.splitlines()[-1])
    parent = first["session_id"]
    assert (first["turns"], first["tool_calls"], first["resumed_from"]) == (3, 2, None)
    assert (second["turns"], second["tool_calls"]) == (1, 0)
    assert second["resumed_from"] == parent
    assert second["session_id"] != parent

    child = Path(second["session_path"])
    start = run_start(child)
    assert start["resumed_from"] == {"id": parent, "path": first["session_path"]}
    assert start["seeded"] == start["history_size"] > 0

    assert main(["trace", child.stem, *sessions(workspace)]) == 0
    text = capsys.readouterr().out
    assert "run 1: final after 1 turn(s)" in text
    assert f"  resumed from {parent} (" in text
    assert "  tool calls: none" in text
    assert main(["trace", child.stem, *sessions(workspace), "--json"]) == 0
    [traced] = json.loads(capsys.readouterr().out)["runs"]
    assert (traced["turns"], traced["tool_calls"], traced["resumed_from"]) == (1, {}, parent)

    assert main(["trace", parent, *sessions(workspace)]) == 0
    text = capsys.readouterr().out
    assert "run 1: final after 3 turn(s)" in text
    assert "resumed from" not in text

    assert main(["sessions", "list", *sessions(workspace), "--json"]) == 0
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
    assert (rows[parent]["turns"], rows[parent]["tool_calls"]) == (3, 2)
    assert rows[parent]["resumed_from"] is None
    assert (rows[child.stem]["turns"], rows[child.stem]["tool_calls"]) == (1, 0)
    assert rows[child.stem]["resumed_from"] == parent
    assert main(["sessions", "list", *sessions(workspace)]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert rows[parent].split()[1:5] == ["runs=1", "turns=3", "tool_calls=2", "last=final"]
    assert rows[child.stem].split()[1:5] == ["runs=1", "turns=1", "tool_calls=0", "last=final"]
    assert rows[child.stem].endswith(f"  resumed from {parent}")
    assert "resumed from" not in rows[parent]


def test_the_summary_names_the_parent(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(workspace, "one", chat=ScriptedChat(["first"])) == 0
    capsys.readouterr()
    parent = next(default_session_dir(workspace).glob("*.jsonl")).stem
    assert run(workspace, "two", "--resume", parent[:12], chat=ScriptedChat(["second"])) == 0
    rows = [[w.rstrip(":") for w in line.split()] for line in capsys.readouterr().out.splitlines()]
    assert ["resumed", "from", parent] in rows  # rich's table, or "   resumed: …" without it
    assert ["tool", "calls", "0"] in rows


def test_resume_latest_is_the_newest_session_before_the_run(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(workspace, "one", "--json", chat=ScriptedChat(["first"])) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert run(workspace, "two", "--json", "--resume", "latest", chat=ScriptedChat(["x"])) == 0
    second = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert second["resumed_from"] == first["session_id"]
    assert run(workspace, "3", "--json", "--resume", "latest", chat=ScriptedChat(["y"])) == 0
    third = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert third["resumed_from"] == second["session_id"]


def test_a_failed_run_traces_its_error(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    error = ProviderError("auth", "invalid key [redacted]", status=401, provider="api")
    assert run(workspace, "one", "--quiet", chat=ScriptedChat([error])) == 1
    capsys.readouterr()
    assert main(["trace", "latest", *sessions(workspace)]) == 0
    text = capsys.readouterr().out
    assert "run 1: failed after 0 turn(s)" in text
    assert "  error: ProviderError (auth): api: auth 401: invalid key [redacted]" in text
    assert main(["trace", "latest", *sessions(workspace), "--json"]) == 0
    [traced] = json.loads(capsys.readouterr().out)["runs"]
    assert traced["error"] == {
        "name": "ProviderError",
        "kind": "auth",
        "message": "api: auth 401: invalid key [redacted]",
    }


def test_a_run_without_run_end_traces_as_unfinished(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = default_session_dir(workspace)
    folder.mkdir(parents=True)
    record = {"ts": "2026-01-01T00:00:00.000Z", "kind": "meta", "meta": {"event": "run_start"}}
    (folder / "20260101T000000000000Z-0001.jsonl").write_text(json.dumps(record) + "\n")
    assert main(["trace", "latest", *sessions(workspace)]) == 0
    assert "run 1: unfinished (no run_end) after 0 turn(s)" in capsys.readouterr().out


def test_a_scripted_tool_run_counts_in_the_trace(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = ScriptedChat([tool_reply(("list_dir", {})), "done"])
    assert run(workspace, "go", "--quiet", chat=chat) == 0
    assert run(workspace, "more", "--quiet", "--resume", "latest", chat=ScriptedChat(["ok"])) == 0
    capsys.readouterr()
    assert main(["sessions", "list", *sessions(workspace), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["turns"], r["tool_calls"]) for r in rows] == [(1, 0), (2, 1)]  # newest first
    assert rows[0]["resumed_from"] == rows[1]["id"]
