"""Finish reasons: one documented vocabulary, the raw string kept when it is not known, and
Anthropic's ``pause_turn`` continued inside the adapter."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentfsm import AbortController, UserMessage
from agentfsm.adapters.providers import (
    FINISH_REASONS,
    AnthropicChat,
    OpenAIChat,
    OpenAIResponses,
    ProviderError,
    RetryPolicy,
    Timeouts,
)
from agentfsm.adapters.providers._finish import normalize_finish
from agentfsm.conformance._frames import DONE, chunk, completion, openai_url
from agentfsm.engine._events import AgentEvent, LlmEndEvent
from agentfsm.engine._messages import AssistantMessage, ChatResult, Usage
from agentfsm.engine._protocols import ChatDelta
from agentfsm.engine._serialization import converter, dumps, loads
from agentfsm.testing import FakeProviderServer, RecordedRequest, Reply, responses_body

FAST = Timeouts(connect=2, first_byte=2, idle=2, terminal_grace=0.3)
ONCE = RetryPolicy(max_attempts=1)


def test_the_vocabulary() -> None:
    assert {"stop", "length", "tool_calls", "content_filter", "other"} == FINISH_REASONS


@pytest.mark.parametrize(
    ("raw", "calls", "expected"),
    [
        ("stop", False, ("stop", None)),
        ("end_turn", False, ("stop", None)),
        ("stop_sequence", False, ("stop", None)),
        ("STOP", False, ("stop", None)),  # Gemini
        ("eos", False, ("stop", None)),
        ("length", False, ("length", None)),
        ("max_tokens", False, ("length", None)),
        ("MAX_TOKENS", False, ("length", None)),
        ("model_length", False, ("length", None)),  # Mistral
        ("model_context_window_exceeded", False, ("length", None)),  # Anthropic
        ("tool_calls", False, ("tool_calls", None)),
        ("function_call", False, ("tool_calls", None)),
        ("tool_use", True, ("tool_calls", None)),
        ("stop", True, ("tool_calls", None)),  # Ollama says stop with calls
        ("length", True, ("length", None)),  # a call cut by max_tokens: the cut shows
        ("max_output_tokens", True, ("length", None)),
        ("content_filter", True, ("content_filter", None)),
        ("refusal", True, ("content_filter", None)),
        ("content_filter", False, ("content_filter", None)),
        ("refusal", False, ("content_filter", None)),
        ("SAFETY", False, ("content_filter", None)),
        ("pause_turn", False, ("other", "pause_turn")),
        ("MALFORMED_FUNCTION_CALL", False, ("other", "MALFORMED_FUNCTION_CALL")),
        ("error", False, ("other", "error")),
        ("weird\u2028\udcff", False, ("other", "weird\u2028\udcff")),
        ("weird", True, ("tool_calls", "weird")),
        ("", False, ("stop", "")),
        (None, False, (None, None)),
        (None, True, ("tool_calls", None)),
    ],
)
def test_normalized_reasons(raw: str | None, calls: bool, expected: tuple[Any, Any]) -> None:
    assert normalize_finish(raw, calls) == expected
    assert expected[0] is None or expected[0] in FINISH_REASONS


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("raw", "finish", "kept"),
    [("eos_token_weird", "other", "eos_token_weird"), ("", "stop", ""), ("length", "length", None)],
)
async def test_openai_wire_keeps_an_unknown_reason_raw(
    stream: bool, raw: str, finish: str, kept: str | None
) -> None:
    with FakeProviderServer() as server:
        if stream:
            server.enqueue(
                Reply.sse([chunk({"role": "assistant", "content": "hi"}), chunk(finish=raw), DONE])
            )
        else:
            server.enqueue(
                Reply.json(completion({"role": "assistant", "content": "hi"}, finish=raw))
            )
        chat = OpenAIChat("m", base_url=openai_url(server), stream=stream, timeouts=FAST)
        result = await chat([UserMessage("x")], [])
    assert (result.message.content, result.finish_reason, result.finish_reason_raw) == (
        "hi",
        finish,
        kept,
    )


def _responses_frame(kind: str, response: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, 'response': response})}\n\n"


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("status", "reason", "finish", "kept"),
    [
        ("completed", None, "stop", None),
        ("incomplete", "max_output_tokens", "length", None),
        ("incomplete", "content_filter", "content_filter", None),
        ("incomplete", "server_overloaded\u2028", "other", "server_overloaded\u2028"),
        ("incomplete", None, "other", "incomplete"),
        ("complete", None, "stop", None),
        ("cancelled", None, "other", "cancelled"),
    ],
)
async def test_responses_wire_normalizes_like_the_others(
    stream: bool, status: str, reason: str | None, finish: str, kept: str | None
) -> None:
    body = responses_body("hi")
    body["status"] = status
    if reason is not None:
        body["incomplete_details"] = {"reason": reason}
    kind = "response.incomplete" if status == "incomplete" else "response.completed"
    with FakeProviderServer() as server:
        server.enqueue(Reply.sse([_responses_frame(kind, body)]) if stream else Reply.json(body))
        chat = OpenAIResponses("m", base_url=openai_url(server), stream=stream, timeouts=FAST)
        result = await chat([UserMessage("x")], [])
        await chat.aclose()
    assert (result.message.content, result.finish_reason, result.finish_reason_raw) == (
        "hi",
        finish,
        kept,
    )
    assert result.finish_reason in FINISH_REASONS


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", ["queued", "in_progress"])
async def test_an_unfinished_response_is_an_error_not_an_empty_answer(
    stream: bool, status: str
) -> None:
    body = responses_body("")
    body["status"] = status
    body["output"] = []
    with FakeProviderServer() as server:
        if stream:  # a server that ends its stream on a response still queued
            reply = Reply.sse([_responses_frame("response.completed", body)])
        else:
            reply = Reply.json(body)
        server.enqueue(reply)
        chat = OpenAIResponses(
            "m", base_url=openai_url(server), stream=stream, timeouts=FAST, retry=ONCE
        )
        with pytest.raises(ProviderError) as caught:
            await chat([UserMessage("x")], [])
        await chat.aclose()
    error = caught.value
    assert (error.kind, error.provider_code) == ("bad_response", "unfinished_response")
    assert status in str(error)
    assert "nothing was generated" in str(error)


def test_the_raw_reason_round_trips_and_is_left_out_when_unset() -> None:
    plain = ChatResult(AssistantMessage("x"), Usage(1, 2), "stop")
    kept = ChatResult(AssistantMessage("x"), None, "other", finish_reason_raw="pause_\udcff")
    assert "finish_reason_raw" not in converter.unstructure(plain)
    assert converter.unstructure(kept)["finish_reason_raw"] == "pause_\udcff"
    for result in (plain, kept):
        assert converter.structure(converter.unstructure(result), ChatResult) == result
        event = LlmEndEvent(turn=1, result=result)
        assert loads(dumps(event), AgentEvent) == event
    # An event without it is written exactly as before the field existed.
    written = json.loads(dumps(LlmEndEvent(turn=1, result=plain)))
    assert set(written["result"]) == {"message", "usage", "finish_reason", "model", "response_id"}


# -- pause_turn --------------------------------------------------------------------------


def sse(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


SEARCH_USE = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "web_search",
    "input": {},
}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [{"type": "web_search_result", "url": "https://example.com", "title": "E"}],
}


def paused_stream() -> list[str]:
    """A reply paused after a server tool ran: thinking (with its signature), text, the
    search and its result."""
    return [
        sse("message_start", {"message": {"id": "msg_1", "model": "m", "content": [],
                                          "usage": {"input_tokens": 10, "output_tokens": 0}}}),
        sse("content_block_start", {"index": 0, "content_block": {"type": "thinking",
                                                                  "thinking": ""}}),
        sse("content_block_delta", {"index": 0, "delta": {"type": "thinking_delta",
                                                          "thinking": "look it up"}}),
        sse("content_block_delta", {"index": 0, "delta": {"type": "signature_delta",
                                                          "signature": "c2ln"}}),
        sse("content_block_stop", {"index": 0}),
        sse("content_block_start", {"index": 1, "content_block": {"type": "text", "text": ""}}),
        sse("content_block_delta", {"index": 1, "delta": {"type": "text_delta",
                                                          "text": "Searching. "}}),
        sse("content_block_stop", {"index": 1}),
        sse("content_block_start", {"index": 2, "content_block": SEARCH_USE}),
        sse("content_block_delta", {"index": 2, "delta": {"type": "input_json_delta",
                                                          "partial_json": '{"query": "x"}'}}),
        sse("content_block_stop", {"index": 2}),
        sse("content_block_start", {"index": 3, "content_block": SEARCH_RESULT}),
        sse("content_block_stop", {"index": 3}),
        sse("message_delta", {"delta": {"stop_reason": "pause_turn"},
                              "usage": {"output_tokens": 7}}),
        sse("message_stop", {}),
    ]  # fmt: skip


PAUSED_CONTENT = [
    {"type": "thinking", "thinking": "look it up", "signature": "c2ln"},
    {"type": "text", "text": "Searching. "},
    {**SEARCH_USE, "input": {"query": "x"}},
    SEARCH_RESULT,
]


def finished_stream(text: str = "Found it.") -> list[str]:
    return [
        sse("message_start", {"message": {"id": "msg_2", "model": "m2", "content": [],
                                          "usage": {"input_tokens": 30, "output_tokens": 0}}}),
        sse("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        sse("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}}),
        sse("content_block_stop", {"index": 0}),
        sse("message_delta", {"delta": {"stop_reason": "end_turn"},
                              "usage": {"output_tokens": 3}}),
        sse("message_stop", {}),
    ]  # fmt: skip


def message(stop: str, content: list[dict[str, Any]], usage: dict[str, int]) -> dict[str, Any]:
    return {
        "id": "msg_x",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": content,
        "stop_reason": stop,
        "usage": usage,
    }


def assistant_turns(request: RecordedRequest) -> list[Any]:
    return [t for t in request.json()["messages"] if t["role"] == "assistant"]


async def test_a_paused_stream_is_sent_back_and_finished_in_one_result() -> None:
    deltas: list[ChatDelta] = []
    with FakeProviderServer() as server:
        server.enqueue(Reply.sse(paused_stream()), Reply.sse(finished_stream()))
        chat = AnthropicChat("m", base_url=server.base_url, timeouts=FAST, retry=ONCE)
        result = await chat([UserMessage("search x")], [], on_delta=deltas.append)
        first, second = server.requests
    assert assistant_turns(first) == []
    assert second.json()["messages"][:-1] == first.json()["messages"]
    assert assistant_turns(second) == [{"role": "assistant", "content": PAUSED_CONTENT}]
    assert result.message.content == "Searching. Found it."
    assert result.message.reasoning == "look it up"
    assert (result.finish_reason, result.finish_reason_raw) == ("stop", None)
    assert result.usage == Usage(40, 10)
    assert (result.model, result.response_id) == ("m2", "msg_2")
    assert [(d.kind, d.text) for d in deltas] == [
        ("thinking", "look it up"),
        ("text", "Searching. "),
        ("text", "Found it."),
    ]


async def test_a_paused_json_reply_is_sent_back_as_it_came() -> None:
    paused: list[dict[str, Any]] = [
        {"type": "text", "text": "Part one. "},
        SEARCH_USE,
        SEARCH_RESULT,
    ]
    with FakeProviderServer() as server:
        server.enqueue(
            Reply.json(message("pause_turn", paused, {"input_tokens": 5, "output_tokens": 2})),
            Reply.json(
                message(
                    "end_turn",
                    [{"type": "text", "text": "Part two."}],
                    {"input_tokens": 9, "output_tokens": 4},
                )
            ),
        )
        chat = AnthropicChat("m", base_url=server.base_url, stream=False, timeouts=FAST)
        result = await chat([UserMessage("x")], [])
        _, second = server.requests
    assert assistant_turns(second) == [{"role": "assistant", "content": paused}]
    assert result.message.content == "Part one. Part two."
    assert (result.finish_reason, result.usage) == ("stop", Usage(14, 6))


async def test_continuations_are_bounded() -> None:
    with FakeProviderServer() as server:
        server.handler = lambda request: Reply.json(
            message("pause_turn", [{"type": "text", "text": "."}], {"input_tokens": 1})
        )
        chat = AnthropicChat("m", base_url=server.base_url, stream=False, timeouts=FAST)
        result = await chat([UserMessage("x")], [])
        assert len(server.requests) == 6  # the call and five continuations
        last = server.requests[-1].json()["messages"][-1]
        assert last == {"role": "assistant", "content": [{"type": "text", "text": "."}] * 5}
        assert result.message.content == "." * 6
        assert (result.finish_reason, result.finish_reason_raw) == ("other", "pause_turn")
        none = AnthropicChat(
            "m", base_url=server.base_url, stream=False, timeouts=FAST, pause_continuations=0
        )
        assert (await none([UserMessage("x")], [])).finish_reason_raw == "pause_turn"
        assert len(server.requests) == 7


async def test_an_abort_stops_the_continuations() -> None:
    controller = AbortController()

    def abort_on_text(delta: ChatDelta) -> None:
        if delta.kind == "text":
            controller.abort()

    with FakeProviderServer() as server:
        server.enqueue(Reply.sse(paused_stream()), Reply.sse(finished_stream()))
        chat = AnthropicChat("m", base_url=server.base_url, timeouts=FAST, retry=ONCE)
        with pytest.raises(ProviderError) as raised:
            await chat([UserMessage("x")], [], signal=controller.signal, on_delta=abort_on_text)
        assert raised.value.kind == "aborted"
        assert len(server.requests) == 1


async def test_a_paused_reply_with_calls_to_answer_is_not_sent_back() -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}}
    with FakeProviderServer() as server:
        server.enqueue(Reply.json(message("pause_turn", [call], {"input_tokens": 1})))
        chat = AnthropicChat("m", base_url=server.base_url, stream=False, timeouts=FAST)
        result = await chat([UserMessage("x")], [])
        assert len(server.requests) == 1
    assert [c.name for c in result.message.tool_calls] == ["read"]
    assert (result.finish_reason, result.finish_reason_raw) == ("tool_calls", "pause_turn")
