"""An error inside a 200 stream is classified like the same body sent with an HTTP status."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentfsm import UserMessage
from agentfsm.adapters.providers import (
    AnthropicChat,
    OpenAIChat,
    ProviderError,
    RetryPolicy,
    Router,
    Timeouts,
    load_wire_fixture,
)
from agentfsm.adapters.providers._errors import classify_error_body
from agentfsm.conformance._bundled import bundled_corpus, corpus_index
from agentfsm.conformance._frames import completion, openai_url
from agentfsm.testing import FakeProviderServer, Reply

CORPUS = bundled_corpus()
FAST = Timeouts(connect=2, first_byte=2, idle=2, terminal_grace=0.3)
RETRY = RetryPolicy(max_attempts=4, initial_delay=0.01, max_delay=0.02, jitter=0)
OK = Reply.json(completion({"role": "assistant", "content": "ok"}))


def groq_stream() -> bytes:
    """The recorded Groq stream that ends in ``tool_use_failed`` (``status_code`` 400)."""
    fixture = load_wire_fixture(
        CORPUS / "groq" / "chat_stream_midstream_error_event_then_retry__pydantic-ai.json"
    )
    body = fixture.responses[0].body
    assert b'"code":"tool_use_failed"' in body
    assert b'"status_code":400' in body
    return body


def frames(body: bytes) -> list[str]:
    return [part + "\n\n" for part in body.decode("utf-8").split("\n\n") if part.strip()]


async def test_groq_tool_use_failed_in_stream_is_sent_once_and_never_failed_over() -> None:
    with FakeProviderServer() as groq, FakeProviderServer() as backup:
        groq.enqueue(*[Reply.sse(frames(groq_stream()))] * 4)
        backup.enqueue(OK)
        router = Router(
            [
                OpenAIChat("m", base_url=openai_url(groq), timeouts=FAST, retry=RETRY, name="g"),
                OpenAIChat("m", base_url=openai_url(backup), timeouts=FAST, retry=RETRY, name="b"),
            ]
        )
        with pytest.raises(ProviderError) as raised:
            await router([UserMessage("call the tool")], [])
        error = raised.value
        assert (error.kind, error.in_stream, error.status) == ("bad_request", True, 200)
        assert (error.provider_code, error.provider_type) == (
            "tool_use_failed",
            "invalid_request_error",
        )
        assert not error.retryable
        assert router.attempts == ["g"]
        assert (len(groq.requests), len(backup.requests)) == (1, 0)


def anthropic_error_stream(error: dict[str, Any]) -> list[str]:
    start = {
        "type": "message_start",
        "message": {"id": "msg_1", "model": "m", "content": [], "usage": {"input_tokens": 3}},
    }
    return [
        f"event: message_start\ndata: {json.dumps(start)}\n\n",
        f"event: error\ndata: {json.dumps({'type': 'error', 'error': error})}\n\n",
    ]


@pytest.mark.parametrize(
    ("error", "kind", "requests"),
    [
        ({"type": "invalid_request_error", "message": "bad tool"}, "bad_request", 1),
        ({"type": "overloaded_error", "message": "Overloaded"}, "overloaded", 4),
        ({"type": "api_error", "message": "Internal server error"}, "server", 4),
    ],
)
async def test_anthropic_error_event_is_classified_by_its_type(
    error: dict[str, Any], kind: str, requests: int
) -> None:
    with FakeProviderServer() as server:
        server.enqueue(*[Reply.sse(anthropic_error_stream(error))] * 4)
        chat = AnthropicChat("m", base_url=server.base_url, timeouts=FAST, retry=RETRY)
        with pytest.raises(ProviderError) as raised:
            await chat([UserMessage("x")], [])
        assert (raised.value.kind, raised.value.in_stream) == (kind, True)
        assert len(server.requests) == requests


@pytest.mark.parametrize(
    ("stated", "kind"),
    [
        ({"status_code": 400}, "bad_request"),
        ({"status_code": "404"}, "bad_request"),
        ({"status": 429}, "rate_limit"),
        ({"code": 503}, "overloaded"),
        ({"status_code": 500}, "server"),
        ({"status_code": True}, "server"),  # not a status
        ({"status_code": 7}, "server"),  # not a status
        ({}, "server"),
    ],
)
def test_the_status_an_in_stream_error_states_stands_for_the_http_one(
    stated: dict[str, Any], kind: str
) -> None:
    body = {"error": {"message": "something failed", **stated}}
    error = classify_error_body(200, body, in_stream=True)
    assert (error.kind, error.status, error.in_stream) == (kind, 200, True)


def recorded_error_bodies() -> list[tuple[str, int, Any]]:
    out = []
    for entry in corpus_index(CORPUS)["exchanges"]:
        for response in load_wire_fixture(CORPUS / entry["file"]).responses:
            if response.status >= 400:
                try:
                    body = json.loads(response.body)
                except ValueError:
                    continue
                out.append((entry["id"], response.status, body))
    return out


ERROR_BODIES = recorded_error_bodies()


def test_there_are_recorded_error_bodies() -> None:
    assert len(ERROR_BODIES) >= 20


@pytest.mark.parametrize(("name", "status", "body"), ERROR_BODIES, ids=[e[0] for e in ERROR_BODIES])
def test_a_recorded_error_body_that_states_its_status_classifies_the_same_in_a_stream(
    name: str, status: int, body: Any
) -> None:
    """Every recorded HTTP error body, sent inside a 200 stream with its status stated the
    way Groq states it (``status_code``), is the same kind of error."""
    over_http = classify_error_body(status, body)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = {**body, "error": {**body["error"], "status_code": status}}
    else:
        body = {"error": body, "status_code": status}
    in_stream = classify_error_body(200, body, in_stream=True)
    assert in_stream.kind == over_http.kind, name
    assert in_stream.retryable == over_http.retryable
