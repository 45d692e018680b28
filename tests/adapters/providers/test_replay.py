"""Every recorded exchange of the bundled corpus, replayed through the adapters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from syrupy.assertion import SnapshotAssertion

from agentfsm import UserMessage
from agentfsm.adapters.providers import (
    AnthropicChat,
    OpenAIChat,
    OpenAIResponses,
    ProviderError,
    ReplayTransport,
    RetryPolicy,
    load_wire_fixture,
)
from agentfsm.adapters.providers._errors import classify_error_body
from agentfsm.adapters.providers._replay import fixture_wire
from agentfsm.conformance._bundled import bundled_corpus, corpus_index

CORPUS = bundled_corpus()  # a missing corpus fails the collection; it is never skipped
FILES = [CORPUS / entry["file"] for entry in corpus_index(CORPUS)["exchanges"]]


def recorded_name(path: Path) -> str:
    """The name of the recorded file a fixture was imported from (the snapshots' key)."""
    return str(json.loads(path.read_text("utf-8"))["imported_from"]["file"])


def wire_kind(fixture: Any) -> str:
    kinds = {
        "anthropic": "anthropic",
        "openai-chat": "openai",
        "openai-responses": "responses",
        None: "unsupported",
    }
    return kinds[fixture_wire(fixture)]


def summary(result: Any) -> dict[str, Any]:
    message = result.message
    return {
        "text": message.content,
        "reasoning_chars": len(message.reasoning or ""),
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments, "raw": c.raw_arguments}
            for c in message.tool_calls
        ],
        "finish_reason": result.finish_reason,
        "usage": None
        if result.usage is None
        else [
            result.usage.input_tokens,
            result.usage.output_tokens,
            result.usage.cache_read_tokens,
            result.usage.cache_write_tokens,
            result.usage.reasoning_tokens,
        ],
        "model": result.model,
    }


def error_summary(error: ProviderError) -> dict[str, Any]:
    return {
        "error": error.kind,
        "status": error.status,
        "code": error.provider_code,
        "type": error.provider_type,
        "in_stream": error.in_stream,
        "retry_after": error.retry_after,
    }


async def replay(path: Path) -> list[dict[str, Any]]:
    fixture = load_wire_fixture(path)
    kind = wire_kind(fixture)
    out: list[dict[str, Any]] = []
    for response in fixture.responses:
        if kind == "unsupported":
            if response.status >= 400:
                body = json.loads(response.body) if response.body.strip() else None
                out.append(
                    error_summary(
                        classify_error_body(response.status, body, dict(response.headers))
                    )
                )
            else:
                out.append({"unsupported_api": fixture.api})
            continue
        async with httpx.AsyncClient(transport=ReplayTransport([response])) as client:
            options: dict[str, Any] = {"http_client": client, "retry": RetryPolicy(max_attempts=1)}
            chat: Any = (
                AnthropicChat("recorded", base_url="http://replay", **options)
                if kind == "anthropic"
                else OpenAIResponses("recorded", base_url="http://replay/v1", **options)
                if kind == "responses"
                else OpenAIChat("recorded", base_url="http://replay/v1", **options)
            )
            try:
                out.append(summary(await chat([UserMessage("replay")], [])))
            except ProviderError as error:
                out.append(error_summary(error))
    return out


@pytest.mark.parametrize("path", FILES, ids=[recorded_name(p) for p in FILES])
async def test_replay(path: Path, snapshot: SnapshotAssertion) -> None:
    assert await replay(path) == snapshot


def test_every_fixture_is_covered() -> None:
    assert len(FILES) == 80
