"""The ``provider`` record ``agentfsm run`` writes for ``--resume``: never a key, wherever
the key was put on the command line, and a resumed run reads it again from the variable the
command line names."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentfsm.adapters.sessions import default_session_dir
from agentfsm.cli import main
from agentfsm.sandbox import detect_sandbox
from agentfsm.sandbox._process import SandboxUnavailable
from agentfsm.testing import FakeProviderServer, scenario_handler

from .tally import AttackTally

KIND = "key in the session's provider record"
KEY = "sk-provider-record-5f4e3d2c1b0a9988"


def sandbox_options() -> list[str]:
    try:
        detect_sandbox(Path.cwd())
    except SandboxUnavailable:
        return ["--no-sandbox"]
    return []


def test_no_key_reaches_the_provider_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attacks: AttackTally
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("RECORD_TEST_KEY", KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    workspace = tmp_path / "project"
    workspace.mkdir()
    with FakeProviderServer() as server:
        server.handler = scenario_handler("echo")
        host = server.base_url.removeprefix("http://")
        placements = {
            "user and password": f"http://user:{KEY}@{host}/v1",
            "user alone": f"http://{KEY}@{host}/v1",
            "query": f"http://{host}/v1?api_key={KEY}",
            "fragment": f"http://{host}/v1#{KEY}",
            "key variable": f"http://{host}/v1",
        }
        for name, url in placements.items():
            options = ["--base-url", url, "--model", "m", "--api-key-env", "RECORD_TEST_KEY"]
            base = ["--workspace", str(workspace), "--quiet", *sandbox_options()]
            assert main(["run", name, *base, *options]) == 0
            again = ["--api-key-env", "RECORD_TEST_KEY"]  # a key variable is named again
            resumed = main(["run", "again", *base, "--resume", "latest", *again])
            sessions = sorted(default_session_dir(workspace).glob("*.jsonl"))
            leaked = [s.name for s in sessions if KEY in s.read_text("utf-8")]
            attacks.record(KIND, bool(leaked), f"{name}: {leaked}")
            if name == "key variable":  # recorded in full: the resumed run reached the server
                assert resumed == 0
                assert server.requests[-1].headers["authorization"] == f"Bearer {KEY}"
            else:  # not recorded: the resumed run asks for the URL, never another model
                assert resumed == 2
