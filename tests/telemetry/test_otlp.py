"""Over the real wire: ``agentfsm run --otel`` exports by OTLP/HTTP to a receiver on
127.0.0.1 that decodes the protobuf payloads; the model is ``FakeProviderServer``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentfsm.cli import main
from agentfsm.conformance._frames import completion
from agentfsm.testing import FakeProviderServer, RecordedRequest, Reply

from .receiver import OtlpReceiver, attributes_of

USAGE = {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57}


def model(request: RecordedRequest) -> Reply:
    """Lists the workspace once, then answers."""
    messages = request.json()["messages"]
    if not any(m["role"] == "tool" for m in messages):
        function = {"name": "list_dir", "arguments": json.dumps({"path": "."})}
        call = {"id": "call_1", "type": "function", "function": function}
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        return Reply.json(completion(message, finish="tool_calls", usage=USAGE))
    return Reply.json(completion({"role": "assistant", "content": "done"}, usage=USAGE))


def run_cli(
    tmp_path: Path, server: FakeProviderServer, *extra: str, monkeypatch: pytest.MonkeyPatch
) -> int:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    workspace = tmp_path / "project"
    workspace.mkdir(exist_ok=True)
    (workspace / "a.txt").write_text("a\n", "utf-8")
    return main(
        [
            "run",
            "look around",
            "--workspace",
            str(workspace),
            "--no-sandbox",
            "--preset",
            "minimal",
            "--provider",
            "openai-compatible",
            "--base-url",
            f"{server.base_url}/v1",
            "--model",
            "m",
            "--session-dir",
            str(tmp_path / "sessions"),
            "--quiet",
            *extra,
        ]
    )


def test_run_otel_exports_spans_and_metrics_by_otlp_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    with OtlpReceiver() as receiver, FakeProviderServer() as server:
        server.handler = model
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=agentfsm-test")
        code = run_cli(tmp_path, server, "--otel", monkeypatch=monkeypatch)
        assert code == 0, capsys.readouterr()
    assert capsys.readouterr().out.strip() == "done"
    spans = {span.name: span for span in receiver.spans()}
    assert set(spans) == {"invoke_agent agentfsm", "chat m", "execute_tool list_dir"}
    assert len({span.trace_id for span in receiver.spans()}) == 1
    run = attributes_of(spans["invoke_agent agentfsm"])
    assert run["gen_ai.operation.name"] == "invoke_agent"
    assert run["agentfsm.stopped_reason"] == "final"
    assert run["agentfsm.turns"] == 2
    assert run["agentfsm.tool_calls"] == 1
    session = next((tmp_path / "sessions").rglob("*.jsonl"))
    assert run["gen_ai.conversation.id"] == session.stem
    chats = [s for s in receiver.spans() if s.name == "chat m"]
    assert len(chats) == 2
    chat = attributes_of(chats[0])
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.provider.name"] == "openai"
    assert chat["gen_ai.request.model"] == "m"
    assert chat["gen_ai.response.model"] == "fake-model"
    assert chat["gen_ai.usage.input_tokens"] == 50
    assert chat["gen_ai.usage.output_tokens"] == 7
    assert "gen_ai.input.messages" not in chat  # content capture is off by default
    tool = attributes_of(spans["execute_tool list_dir"])
    assert tool["gen_ai.operation.name"] == "execute_tool"
    assert tool["gen_ai.tool.call.id"] == "call_1"
    assert tool["agentfsm.tool.ok"] is True
    assert spans["execute_tool list_dir"].parent_span_id == spans["invoke_agent agentfsm"].span_id
    assert receiver.resource_attributes()[0]["service.name"] == "agentfsm"
    assert all(h.get("x-tenant") == "agentfsm-test" for h in receiver.headers)
    assert {
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.duration",
        "agentfsm.agent.turns",
        "agentfsm.agent.tool_calls",
    } <= receiver.metric_names()
