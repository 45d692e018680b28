"""The run's output as a user reads it: the verifier's verdict, calls that never ran, the
"no check command" note once per workspace, ``sessions list`` newest first."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from agentfsm.adapters.sessions import default_session_dir
from agentfsm.cli import main
from agentfsm.cli._parser import build_parser
from agentfsm.policies._verify import NO_CHECK_COMMAND
from agentfsm.testing import ScriptedChat, tool_reply

from .conftest import sandbox_options


def run(workspace: Path, *options: str, chat: ScriptedChat) -> int:
    return main(["run", *options, "--workspace", str(workspace), *sandbox_options()], chat=chat)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def sessions(workspace: Path) -> list[str]:
    return ["--session-dir", str(default_session_dir(workspace))]


def test_the_verifiers_verdict_is_in_the_output_and_the_trace(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = ScriptedChat(
        [
            tool_reply(("write_file", {"path": "out.txt", "content": "ok\n"})),
            "Wrote out.txt.",
            "It says ok.\nVERDICT: PASS",  # the reviewer, on the run's own model
        ]
    )
    assert run(workspace, "write ok to out.txt", chat=chat) == 0
    out = capsys.readouterr().out
    assert "verifier(max_turns=15): VERDICT: PASS (review 1 of at most 3)" in out
    assert main(["trace", "latest", *sessions(workspace)]) == 0
    assert "VERDICT: PASS (review 1 of at most 3)" in capsys.readouterr().out
    assert main(["trace", "latest", *sessions(workspace), "--json"]) == 0
    [traced] = json.loads(capsys.readouterr().out)["runs"]
    assert "verifier(max_turns=15): VERDICT: PASS (review 1 of at most 3)" in traced["notes"]


def test_a_failing_verdict_is_shown_before_the_refusal(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = ScriptedChat(
        [
            tool_reply(("write_file", {"path": "out.txt", "content": "ko\n"})),
            "Done.",
            "out.txt says ko.\nVERDICT: FAIL",
            tool_reply(("write_file", {"path": "out.txt", "content": "ok\n"})),
            "Fixed.",
            "VERDICT: PASS",
        ]
    )
    assert run(workspace, "write ok to out.txt", chat=chat) == 0
    out = capsys.readouterr().out
    failed = out.index("VERDICT: FAIL (review 1 of at most 3)")
    assert failed < out.index("refused the answer") < out.index("VERDICT: PASS (review 2 of")


def test_a_call_that_never_ran_is_not_counted(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the last turn the model still asks for a tool: it is shown "not run", and neither
    the summary, run_end nor trace counts it as a tool call."""
    chat = ScriptedChat([tool_reply(("list_dir", {})), tool_reply(("read_file", {"path": "x"}))])
    assert run(workspace, "look", "--max-turns", "2", chat=chat) == 3
    out = capsys.readouterr().out
    assert "⊘ read_file not run" in out
    assert "tool calls  1" in out
    chat = ScriptedChat([tool_reply(("list_dir", {})), tool_reply(("read_file", {"path": "x"}))])
    assert run(workspace, "look", "--max-turns", "2", "--json", chat=chat) == 3
    end = json_lines(capsys.readouterr().out)[-1]
    assert (end["stopped_reason"], end["turns"], end["tool_calls"]) == ("budget", 2, 1)
    assert main(["trace", "latest", *sessions(workspace), "--json"]) == 0
    [traced] = json.loads(capsys.readouterr().out)["runs"]
    assert traced["tool_calls"] == {"list_dir": 1}
    assert main(["sessions", "list", *sessions(workspace), "--json"]) == 0
    assert [row["tool_calls"] for row in json.loads(capsys.readouterr().out)] == [1, 1]


def test_no_check_command_is_said_once_per_workspace(
    workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(3):
        assert run(workspace, "hi", chat=ScriptedChat(["hello"])) == 0
    assert capsys.readouterr().out.count(NO_CHECK_COMMAND) == 1
    # Each run still records it, and --json still shows it.
    assert run(workspace, "hi", "--json", chat=ScriptedChat(["hello"])) == 0
    notes = [e for e in json_lines(capsys.readouterr().out) if e["type"] == "policy_note"]
    assert [note["reason"] for note in notes] == [NO_CHECK_COMMAND]
    # Another workspace has its own first time.
    other = tmp_path / "other"
    other.mkdir()
    assert run(other, "hi", chat=ScriptedChat(["hello"])) == 0
    assert capsys.readouterr().out.count(NO_CHECK_COMMAND) == 1
    # Once the workspace has a check, its command is said on every run.
    (workspace / "package.json").write_text('{"scripts": {"check": "true"}}', "utf-8")
    for _ in range(2):
        assert run(workspace, "hi", chat=ScriptedChat(["hello"])) == 0
    assert capsys.readouterr().out.count("verify command: ") == 2


def test_sessions_list_is_newest_first(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for answer in ("one", "two", "three"):
        assert run(workspace, answer, "--quiet", chat=ScriptedChat([answer])) == 0
    capsys.readouterr()
    assert main(["sessions", "list", *sessions(workspace), "--json"]) == 0
    ids = [row["id"] for row in json.loads(capsys.readouterr().out)]
    assert len(ids) == 3
    assert ids == sorted(ids, reverse=True)
    assert main(["trace", "latest", *sessions(workspace), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["session"] == ids[0]
    assert main(["sessions", "list", *sessions(workspace)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ids


def _without_help(parser: argparse.ArgumentParser, path: str) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                missing += _without_help(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction) and not action.help:
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return missing


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["conformance"],
        ["conformance", "corpus"],
        ["conformance", "matrix"],
        ["conformance", "probe"],
        ["conformance", "replay-vcr"],
        ["fake-server"],
    ],
    ids=lambda c: " ".join(c) or "agentfsm",
)
def test_every_option_of_every_command_says_what_it_does(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if not command:
        parsers = [build_parser()]
    else:  # these commands parse their own arguments: catch the parser --help runs
        parsers = []
        parse = argparse.ArgumentParser.parse_known_args

        def spy(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
            parsers.append(self)
            return parse(self, *args, **kwargs)

        monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", spy)
        assert main([*command, "--help"]) == 0
        capsys.readouterr()
    assert parsers
    missing = [m for p in parsers for m in _without_help(p, p.prog)]
    assert missing == []


def test_a_fifo_in_place_of_the_notes_file_blocks_no_run(workspace: Path, tmp_path: Path) -> None:
    """The session folder's ``.notes-shown.json`` is read only if it is a regular file: a
    FIFO there (which no process writes) made ``agentfsm run`` wait for ever. The real
    command, against a real server; the run replaces the FIFO with the file."""
    import os
    import subprocess
    import sys

    from agentfsm.testing import FakeProviderServer, scenario_handler

    folder = tmp_path / "sessions"
    folder.mkdir()
    os.mkfifo(folder / ".notes-shown.json")
    with FakeProviderServer() as server:
        server.handler = scenario_handler("echo")
        argv = ["run", "hi", "--base-url", f"{server.base_url}/v1", "--model", "m"]
        argv += ["--session-dir", str(folder), "--workspace", str(workspace), *sandbox_options()]
        done = subprocess.run(
            [sys.executable, "-m", "agentfsm", *argv],
            capture_output=True,
            text=True,
            timeout=120,  # a hang fails here
            env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")},
        )
    assert done.returncode == 0, done.stderr
    assert NO_CHECK_COMMAND in done.stdout
    assert json.loads((folder / ".notes-shown.json").read_text("utf-8"))
