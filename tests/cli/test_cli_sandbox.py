"""``agentfsm run`` and the OS sandbox: checked at start, recorded, opted out of loudly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentfsm.adapters.sessions import default_session_dir
from agentfsm.cli import main
from agentfsm.sandbox import _bubblewrap as bubblewrap_module
from agentfsm.testing import ScriptedChat, tool_reply

from ..security.sandboxing import require_bubblewrap


def run_start(workspace: Path) -> dict[str, object]:
    (path,) = default_session_dir(workspace).glob("*.jsonl")
    for line in path.read_text("utf-8").splitlines():
        record = json.loads(line)
        if record.get("kind") == "meta" and record["meta"].get("event") == "run_start":
            meta: dict[str, object] = record["meta"]
            return meta
    raise AssertionError("no run_start record")


def test_without_a_sandbox_the_run_does_not_start(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bubblewrap_module, "SYSTEM_PATH", str(workspace))  # no bwrap there
    chat = ScriptedChat(["never asked"])
    assert main(["run", "hi", "--workspace", str(workspace)], chat=chat) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "No OS sandbox for the agent's commands" in err
    assert "apt-get install bubblewrap" in err
    assert "--no-sandbox" in err
    assert chat.calls == 0


def test_no_sandbox_is_loud_and_recorded(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = ScriptedChat([tool_reply(("shell", {"command": "echo hi"})), "done"])
    assert main(["run", "hi", "--workspace", str(workspace), "--no-sandbox"], chat=chat) == 0
    err = capsys.readouterr().err
    assert "WARNING: --no-sandbox" in err
    assert "full access to this machine" in err
    sandbox = run_start(workspace)["sandbox"]
    assert isinstance(sandbox, dict)
    assert sandbox["mechanism"] == "none"


def test_the_session_records_the_sandbox(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_bubblewrap(workspace)
    chat = ScriptedChat([tool_reply(("shell", {"command": "cat /etc/hostname; ls ~"})), "done"])
    # The workspace's file widens the sandbox (an env name): applied only with consent.
    trust = "--trust-workspace-settings"
    assert main(["run", "hi", "--workspace", str(workspace), trust], chat=chat) == 0
    sandbox = run_start(workspace)["sandbox"]
    assert isinstance(sandbox, dict)
    assert sandbox["mechanism"] == "bubblewrap"
    assert sandbox["network"] is False
    capsys.readouterr()
    assert main(["trace", "latest", "--workspace", str(workspace)]) == 0
    out = capsys.readouterr().out
    assert "sandbox: bubblewrap" in out
    assert "no network" in out


def test_allow_network_reaches_the_sandbox(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_bubblewrap(workspace)
    chat = ScriptedChat(["done"])
    options = ["--workspace", str(workspace), "--allow-network"]
    assert main(["run", "hi", *options], chat=chat) == 0
    sandbox = run_start(workspace)["sandbox"]
    assert isinstance(sandbox, dict)
    assert sandbox["network"] is True


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ('{"deny": "shell"}', "deny: unknown key"),
        ('{"permissions": {"deny": "shell"}}', "permissions.deny: Input should be a valid list"),
        ('{"permissions": {"Deny": []}}', "permissions.Deny: unknown key"),
        ("{", "not valid JSON"),
    ],
)
def test_malformed_settings_stop_the_run_with_one_line(
    workspace: Path, capsys: pytest.CaptureFixture[str], settings: str, message: str
) -> None:
    (workspace / ".agentfsm").mkdir()
    (workspace / ".agentfsm" / "settings.json").write_text(settings, "utf-8")
    chat = ScriptedChat(["never asked"])
    code = main(["run", "hi", "--workspace", str(workspace), "--no-sandbox"], chat=chat)
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("agentfsm run: .agentfsm/settings.json: ")
    assert message in err
    assert "Traceback" not in err
    assert chat.calls == 0


def test_session_dir_must_be_a_folder_outside_the_workspace(
    workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x", "utf-8")
    base = ["run", "hi", "--workspace", str(workspace), "--no-sandbox", "--session-dir"]
    assert main([*base, str(a_file)], chat=ScriptedChat(["x"])) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert main([*base, str(tmp_path)], chat=ScriptedChat(["x"])) == 2
    assert "must not contain the workspace" in capsys.readouterr().err


def test_verify_command_option(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chat = ScriptedChat([tool_reply(("write_file", {"path": "a.txt", "content": "x"})), "done"])
    options = ["--no-sandbox", "--verify-command", "test -f a.txt"]
    assert main(["run", "hi", "--workspace", str(workspace), *options], chat=chat) == 0
    capsys.readouterr()
    assert main(["trace", "latest", "--workspace", str(workspace)]) == 0
    assert "verify command: test -f a.txt (given explicitly)" in capsys.readouterr().out


def test_settings_env_and_limits_reach_the_sandbox(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    require_bubblewrap(workspace)
    monkeypatch.setenv("MY_TOOL_HOME", "wanted")
    monkeypatch.setenv("LLM_CREDS", "sk-not-for-the-model")
    (workspace / ".agentfsm").mkdir(exist_ok=True)
    (workspace / ".agentfsm" / "settings.json").write_text(
        json.dumps({"sandbox": {"env": ["MY_TOOL_HOME"], "limits": {"file_size_mb": 1}}}),
        "utf-8",
    )
    command = "printenv MY_TOOL_HOME LLM_CREDS; head -c 2M /dev/zero > big"
    chat = ScriptedChat([tool_reply(("shell", {"command": command})), "done"])
    # The workspace's file widens the sandbox (an env name): applied only with consent.
    trust = "--trust-workspace-settings"
    assert main(["run", "hi", "--workspace", str(workspace), trust], chat=chat) == 0
    sandbox = run_start(workspace)["sandbox"]
    assert isinstance(sandbox, dict)
    assert sandbox["limits"]["file_size_mb"] == 1
    assert "MY_TOOL_HOME" in sandbox["environment"]
    (request,) = [r for r in chat.requests if any(m.role == "tool" for m in r.messages)]
    (result,) = [m.content for m in request.messages if m.role == "tool"]
    assert "wanted" in result
    assert "sk-not-for-the-model" not in result
    assert '"file_size_mb"' in json.loads(result)["error"]
    assert (workspace / "big").stat().st_size == 1 << 20
