"""Metrics, content capture (off by default; the parameter and the conventions' variable),
the global providers, and an instrumented agent with no provider configured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from agentfsm import Agent, ToolSpec, Usage
from agentfsm.adapters.telemetry import CAPTURE_CONTENT_ENV, Instrumentation
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from .conftest import Otel


def agent(instrument: Instrumentation | bool, *, system_prompt: str | None = None) -> Agent:
    chat = ScriptedChat(
        [tool_reply(("echo", {"text": "secret-looking words"})), "the final words"],
        usage=Usage(input_tokens=11, output_tokens=3, cache_read_tokens=2, reasoning_tokens=1),
    )
    tools = ScriptedTools(
        {"echo": lambda text: f"echoed {text}"}, specs=[ToolSpec("echo", "Echo text.")]
    )
    return Agent(chat, tools, system_prompt=system_prompt, instrument=instrument)


CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


def test_the_content_variable_is_the_conventions_one() -> None:
    assert CAPTURE_CONTENT_ENV == "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


async def test_metrics(otel: Otel) -> None:
    await agent(otel.instrumentation()).run("go")
    metrics = otel.metrics()
    tokens = {
        attrs["gen_ai.token.type"]: (attrs, p) for attrs, p in metrics["gen_ai.client.token.usage"]
    }
    attrs, point = tokens["input"]
    assert attrs == {
        "gen_ai.operation.name": "chat",
        "gen_ai.response.model": "scripted",
        "gen_ai.token.type": "input",
    }
    assert (point.count, point.sum) == (2, 22)
    assert (tokens["output"][1].count, tokens["output"][1].sum) == (2, 6)
    ((attrs, point),) = metrics["gen_ai.client.operation.duration"]
    assert attrs["gen_ai.operation.name"] == "chat"
    assert point.count == 2
    ((attrs, point),) = metrics["agentfsm.agent.turns"]
    assert attrs == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "agentfsm",
        "agentfsm.stopped_reason": "final",
    }
    assert (point.count, point.sum) == (1, 2)
    ((attrs, point),) = metrics["agentfsm.agent.tool_calls"]
    assert (point.count, point.sum) == (1, 1)
    chat = next(s for s in otel.spans() if s.name == "chat")
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 2
    assert chat.attributes["gen_ai.usage.reasoning.output_tokens"] == 1


async def test_content_is_off_by_default(otel: Otel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    instrumentation = otel.instrumentation(capture_content=None)
    assert not instrumentation.capture_content
    await agent(instrumentation, system_prompt="be brief").run("the prompt words")
    for span in otel.spans():
        assert not CONTENT_KEYS & set(span.attributes or {}), span.name
        text = json.dumps({k: str(v) for k, v in (span.attributes or {}).items()})
        for words in ("the prompt words", "secret-looking", "final words", "be brief"):
            assert words not in text


@pytest.mark.parametrize("how", ["parameter", "environment"])
async def test_content_capture_on(otel: Otel, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    if how == "environment":
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
        instrumentation = otel.instrumentation(capture_content=None)
    else:
        monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
        instrumentation = otel.instrumentation(capture_content=True)
    await agent(instrumentation, system_prompt="be brief").run("the prompt words")
    spans = {span.name: span.attributes or {} for span in otel.spans()}
    first_chat = next(s.attributes or {} for s in otel.spans() if s.name == "chat")
    assert json.loads(str(first_chat["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "the prompt words"}]}
    ]
    assert json.loads(str(first_chat["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "be brief"}
    ]
    assert "echo" in str(first_chat["gen_ai.tool.definitions"])
    tool = spans["execute_tool echo"]
    assert json.loads(str(tool["gen_ai.tool.call.arguments"])) == {"text": "secret-looking words"}
    assert tool["gen_ai.tool.call.result"] == "echoed secret-looking words"
    output = json.loads(str(spans["invoke_agent agentfsm"]["gen_ai.output.messages"]))
    assert output == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "the final words"}],
            "finish_reason": "stop",
        }
    ]


async def test_no_provider_configured_records_nothing() -> None:
    instrumentation = Instrumentation()  # the API's global no-op providers (none is set here)
    engine = agent(instrumentation)
    events: list[str] = []
    engine.events.on("*", lambda event: events.append(event.type))
    outcome = await engine.run("go")
    assert outcome.stopped_reason == "final"
    assert instrumentation.start_run(engine.chat, engine.events) is None


def test_instrument_true_uses_the_global_providers() -> None:
    """In a process of its own: a global provider cannot be unset."""
    script = textwrap.dedent(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from agentfsm import Agent
        from agentfsm.testing import ScriptedChat

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        Agent(ScriptedChat(["hi"]), instrument=True).run_sync("go")
        print(sorted(span.name for span in exporter.get_finished_spans()))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['chat', 'invoke_agent agentfsm']"
