"""A durable run's session makes the same picture as any run's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from agentfsm import Agent, AssistantMessage, ChatResult, ToolCall, Usage, render_run
from agentfsm.adapters.durable import DurableRuntime, RunSpec, register_agent_factory
from agentfsm.conformance._frames import DONE, chunk, tool_delta
from agentfsm.testing import FakeProviderServer, RecordedRequest, Reply, ScriptedChat, ScriptedTools


def build(spec: RunSpec) -> Agent:
    replies = [
        ChatResult(AssistantMessage("", (ToolCall("c1", "add", {"a": 2, "b": 3}),)), Usage(50, 5)),
        ChatResult(AssistantMessage("5"), Usage(70, 1)),
    ]
    return Agent(
        ScriptedChat(replies),
        ScriptedTools({"add": lambda a, b: str(a + b)}),
        session_dir=Path(spec.session_path).parent,
        durable_factory="tests.run_picture.adder",
    )


register_agent_factory("tests.run_picture.adder", build)


async def test_a_durable_run_is_pictured(runtime: DurableRuntime, tmp_path: Path) -> None:
    agent = build(RunSpec(prompt="", factory="", session_path=str(tmp_path / "s" / "x.jsonl")))
    (outcome,) = await agent.gather([await agent.submit("2 + 3?")])
    assert outcome.session_path is not None
    page = render_run(outcome.session_path)
    block = re.search(r'id="run-data">(.*?)</script>', page, re.S)
    assert block is not None
    data = json.loads(block.group(1))
    assert data["end_state"] == "final"
    assert [t["path"][-1] for t in data["turns"]] == ["run_tools>turn_start", "final_check>final"]
    assert [t["usage"]["input_tokens"] for t in data["turns"]] == [50, 70]
    assert [(c["name"], c["status"]) for c in data["turns"][0]["tool_calls"]] == [("add", "ok")]


def test_run_durable_html_writes_the_picture_and_names_it(tmp_path: Path) -> None:
    def reply(request: RecordedRequest) -> Reply:
        if any(m.get("role") == "assistant" for m in request.json()["messages"]):
            return Reply.sse([chunk({"content": "done"}), chunk({}, finish="stop"), DONE])
        call = tool_delta(index=0, id="c0", name="list_dir", arguments="{}")
        return Reply.sse([chunk(call), chunk({}, finish="tool_calls"), DONE])

    (tmp_path / "work").mkdir()
    out = tmp_path / "run.html"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    with FakeProviderServer() as server:
        server.handler = reply
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "agentfsm",
                "run",
                "go",
                "--durable",
                "--provider",
                "openai-compatible",
                "--base-url",
                f"{server.base_url}/v1",
                "--model",
                "m",
                "--workspace",
                str(tmp_path / "work"),
                "--session-dir",
                str(tmp_path / "sessions"),
                "--no-sandbox",
                "--html",
                str(out),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert f"picture: {out}" in done.stdout
    block = re.search(r'id="run-data">(.*?)</script>', out.read_text("utf-8"), re.S)
    assert block is not None
    data = json.loads(block.group(1))
    assert [c["name"] for c in data["turns"][0]["tool_calls"]] == ["list_dir"]
    assert data["end_state"] == "final"
