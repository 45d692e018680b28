"""A canary API key against the telemetry: with content capture on, servers that echo the
key (in error messages, codes, types) and a run that succeeds after retries; the key must
appear in no span, span event, attribute, resource or metric, in memory or on the wire."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from agentfsm import Agent, UserMessage
from agentfsm.adapters.providers import (
    AnthropicChat,
    OpenAIChat,
    ProviderError,
    RetryPolicy,
    Router,
    Timeouts,
)
from agentfsm.adapters.telemetry import CAPTURE_CONTENT_ENV
from agentfsm.conformance._frames import completion
from agentfsm.testing import FakeProviderServer, Reply
from agentfsm.testing._hostile import echo_key_error

from .conftest import Otel
from .receiver import OtlpReceiver
from .test_otlp import model, run_cli

KEY = f"sk-canary-{uuid.uuid4().hex}"
MARK = KEY.split("-")[-1]
FAST = Timeouts(connect=2, first_byte=5, idle=5, terminal_grace=0.3, total=5)
RETRY = RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=0.02, jitter=0)


def everything(otel: Otel) -> str:
    """Every span's name, attributes, events, status and resource; every metric point."""
    texts: list[str] = []
    for span in otel.spans():
        texts.append(span.to_json())
        texts.extend(repr(event.attributes) for event in span.events)
    data = otel.reader.get_metrics_data()
    if data is not None:
        texts.append(data.to_json())
    return "\n".join(texts)


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic"])
@pytest.mark.parametrize("status", [400, 401, 429, 500, 503])
async def test_spans_and_metrics_never_show_the_key(otel: Otel, wire: str, status: int) -> None:
    instrumentation = otel.instrumentation(capture_content=True)
    with FakeProviderServer() as first, FakeProviderServer() as second:
        first.enqueue(echo_key_error(KEY, 500, wire=wire), echo_key_error(KEY, 500, wire=wire))
        second.enqueue(
            echo_key_error(KEY, status, wire=wire), echo_key_error(KEY, status, wire=wire)
        )
        options: dict[str, Any] = {"api_key": KEY, "stream": False, "timeouts": FAST}
        options["retry"] = RETRY
        adapters: list[OpenAIChat | AnthropicChat] = [
            OpenAIChat("m", base_url=f"{s.base_url}/v1", **options)
            if wire == "openai-chat"
            else AnthropicChat("m", base_url=s.base_url, **options)
            for s in (first, second)
        ]
        agent = Agent(Router(adapters), instrument=instrumentation)
        try:
            with pytest.raises(ProviderError):
                await agent.run([UserMessage("hello")])
        finally:
            for adapter in adapters:
                await adapter.aclose()
    found = everything(otel)
    assert "agentfsm.failover" in found  # the search covers the span events
    assert MARK not in found


async def test_a_successful_run_never_shows_the_key(otel: Otel) -> None:
    with FakeProviderServer() as server:
        server.enqueue(
            echo_key_error(KEY, 429),
            Reply.json(completion({"role": "assistant", "content": "fine"})),
        )
        chat = OpenAIChat(
            "m", base_url=f"{server.base_url}/v1", api_key=KEY, stream=False, retry=RETRY
        )
        agent = Agent(chat, instrument=otel.instrumentation(capture_content=True))
        try:
            await agent.run("hello")
        finally:
            await chat.aclose()
    found = everything(otel)
    assert "agentfsm.retry" in found
    assert '"fine"' in found.replace("\\", "")
    assert MARK not in found


def test_the_cli_never_exports_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANARY_KEY", KEY)
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    with OtlpReceiver() as receiver, FakeProviderServer() as server:
        server.enqueue(echo_key_error(KEY, 503))
        server.handler = model
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        code = run_cli(
            tmp_path, server, "--otel", "--api-key-env", "CANARY_KEY", monkeypatch=monkeypatch
        )
    assert code == 0
    assert any(b"gen_ai.input.messages" in raw for raw in receiver.raw)  # content was on
    assert receiver.metrics
    for raw in receiver.raw:
        assert MARK.encode() not in raw
    for headers in receiver.headers:
        assert MARK not in repr(headers)
