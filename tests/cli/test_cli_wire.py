"""``agentfsm run --wire``: the API the calls speak, whatever the provider."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentfsm.cli import main
from agentfsm.engine._messages import AssistantMessage, ChatResult, ToolCall, Usage
from agentfsm.testing import FakeProviderServer, responses_reply

from .conftest import sandbox_options
from .test_cli_quirks import anthropic_answer

SANDBOX = sandbox_options()
ENCRYPTED = "gAAAA-encrypted-by-the-provider=="


def run(workspace: Path, server: FakeProviderServer, *extra: str, prompt: str = "go") -> int:
    return main(
        [
            "run",
            prompt,
            "--workspace",
            str(workspace),
            *SANDBOX,
            "--provider",
            "openai-compatible",
            "--base-url",
            f"{server.base_url}/v1",
            "--model",
            "m",
            "--quiet",
            *extra,
        ]
    )


def body(server: FakeProviderServer, index: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(server.requests[index].body)
    return data


def test_responses_wire_runs_tools_and_resumes_with_the_reasoning_items(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    read = ToolCall("call_r1", "read_file", {"path": "notes.txt"})
    thought = AssistantMessage(
        "",
        tool_calls=[read],
        reasoning="Read the notes first.",
        reasoning_items=[{"encrypted_content": ENCRYPTED}],
    )
    with FakeProviderServer(strict=True) as server:
        server.enqueue(
            responses_reply(ChatResult(thought, Usage(30, 8, reasoning_tokens=5))),
            responses_reply("2 words.", stream=False),
            responses_reply("Still 2."),
        )
        assert run(workspace, server, "--wire", "responses") == 0
        assert capsys.readouterr().out.strip() == "2 words."
        assert run(workspace, server, "--wire", "responses", "--resume", "latest") == 0
        assert capsys.readouterr().out.strip() == "Still 2."
        paths = [request.path for request in server.requests]
    assert paths == ["/v1/responses"] * 3
    first, second, resumed = body(server, 0), body(server, 1), body(server, 2)
    assert first["store"] is False
    assert first["include"] == ["reasoning.encrypted_content"]
    assert {tool["name"] for tool in first["tools"]} >= {"read_file"}
    sent_back = {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Read the notes first."}],
        "encrypted_content": ENCRYPTED,
    }
    kinds = [item.get("type") for item in second["input"]]
    assert kinds[-3:] == ["reasoning", "function_call", "function_call_output"]
    assert second["input"][-3] == sent_back
    assert "hello world" in second["input"][-1]["output"]
    # The session kept the items: the resumed run sends them back from the file.
    assert sent_back in resumed["input"]
    assert resumed["input"][-1] == {"role": "user", "content": "go"}


def test_responses_quirks(workspace: Path) -> None:
    with FakeProviderServer() as server:
        server.enqueue(responses_reply("ok"))
        options = ["--wire", "responses", "--quirk", "encrypted_reasoning=false"]
        assert run(workspace, server, *options) == 0
    assert "include" not in body(server, 0)


def test_anthropic_wire_at_any_base_url(workspace: Path) -> None:
    with FakeProviderServer() as server:
        server.enqueue(anthropic_answer())
        assert run(workspace, server, "--wire", "anthropic") == 0
        assert [request.path for request in server.requests] == ["/v1/messages"]


def test_chat_wire_is_the_default(workspace: Path) -> None:
    with FakeProviderServer() as server:
        server.enqueue(responses_reply("unused"))
        run(workspace, server)
        assert [request.path for request in server.requests] == ["/v1/chat/completions"]


def test_wire_usage_errors(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    options = ["--workspace", str(workspace), *SANDBOX, "--provider", "local"]
    assert main(["run", "go", *options, "--wire", "responses"]) == 2
    assert "the local model speaks the chat wire only" in capsys.readouterr().err
    with FakeProviderServer() as server:
        assert run(workspace, server, "--wire", "responses", "--quirk", "nope=1") == 2
        assert server.requests == []
    assert "not a quirk of the openai-responses wire" in capsys.readouterr().err
