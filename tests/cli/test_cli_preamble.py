"""The preamble `agentfsm run` sends leaves out the agent's own files."""

from __future__ import annotations

from pathlib import Path

from agentfsm.cli import main
from agentfsm.conformance._frames import DONE, chunk
from agentfsm.testing import FakeProviderServer, Reply


def test_a_session_folder_inside_the_workspace_is_not_in_the_preamble(tmp_path: Path) -> None:
    workspace = tmp_path / "project"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("print('hi')\n", "utf-8")
    (workspace / ".gitignore").write_text("build/\n", "utf-8")
    (workspace / "build").mkdir()
    (workspace / "build" / "out.bin").write_bytes(b"\0")
    sessions = workspace / "agent-sessions"
    answer = Reply.sse([chunk({"content": "ok"}), chunk({}, finish="stop"), DONE])
    with FakeProviderServer() as server:
        for prompt in ("first", "second"):
            server.enqueue(answer)
            argv = ["run", prompt, "--workspace", str(workspace), "--session-dir", str(sessions)]
            argv += ["--provider", "openai-compatible", "--base-url", f"{server.base_url}/v1"]
            assert main([*argv, "--model", "m", "--no-sandbox", "--quiet"]) == 0
        preambles = [
            m["content"]
            for request in server.requests
            for m in request.json()["messages"]
            if m["role"] == "user" and m["content"].startswith("<session-context>")
        ]
    assert len(preambles) == 2
    assert len(list(sessions.glob("*.jsonl"))) == 2
    for preamble in preambles:
        assert "app.py" in preamble
        assert "agent-sessions" not in preamble
        assert ".jsonl" not in preamble
        assert "out.bin" not in preamble
