"""The second reading ``replay-vcr`` holds adapters to: event streams split as the SSE
specification says, and what a recording cannot settle left unjudged."""

from __future__ import annotations

import json
import random

import pytest

from agentfsm.adapters.providers._replay import RecordedResponse
from agentfsm.conformance._reading import Answer, Call, Failure, read_recorded, sse_events

_STREAM = (("content-type", "text/event-stream"),)
_JSON = (("content-type", "application/json"),)


def test_events_end_at_blank_lines_whatever_the_line_ends() -> None:
    body = "event: a\r\ndata: 1\r\n\r\ndata: 2\rdata: 3\r\rdata: 4\n\n"
    assert list(sse_events(body)) == [("a", "1"), ("message", "2\n3"), ("message", "4")]


def test_a_line_separator_is_text_not_a_line_end() -> None:
    body = 'data: {"t": "a\u2028b\u2029c\x85d"}\n\n'
    ((_, data),) = sse_events(body)
    assert json.loads(data) == {"t": "a\u2028b\u2029c\x85d"}


def test_comments_fields_and_the_unclosed_last_event() -> None:
    body = "\ufeff: keep-alive\nid: 7\nretry: 10\ndata:no space\ndata:  two spaces\n\ndata: cut"
    assert list(sse_events(body)) == [("message", "no space\n two spaces")]


def test_an_event_without_data_is_not_dispatched() -> None:
    assert list(sse_events("event: ping\n\n: only a comment\n\n")) == []


def _chat(*chunks: object) -> bytes:
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"


def test_chat_tool_calls_without_index_fold_by_id_and_name() -> None:
    def fragment(**call: object) -> dict[str, object]:
        return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}

    body = _chat(
        fragment(id="c1", function={"name": "f", "arguments": '{"a":'}),
        fragment(function={"arguments": " 1}"}),
        fragment(id="c2", function={"name": "g", "arguments": ""}),  # another id
        fragment(id="c2", function={"name": "g", "arguments": '{"b": 2}'}),  # repeated
        fragment(function={"name": "f", "arguments": '{"a": 3}'}),  # another name, no id
        fragment(function={"name": "f", "arguments": '{"a": 4}'}),  # f again, f complete
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    )
    reading = read_recorded(RecordedResponse(200, _STREAM, body), "openai-chat")
    assert reading.outcome == Answer(
        calls=(
            Call("c1", "f", {"a": 1}),
            Call("c2", "g", {"b": 2}),
            Call(None, "f", {"a": 3}),
            Call(None, "f", {"a": 4}),
        ),
        finish_reason="tool_calls",
        finish_reason_raw=None,
    )


def test_after_done_nothing_counts() -> None:
    body = _chat({"choices": [{"index": 0, "delta": {"content": "Hi"}}]}) + _chat(
        {"choices": [{"index": 0, "delta": {"content": " again"}}]}
    )
    reading = read_recorded(RecordedResponse(200, _STREAM, body), "openai-chat")
    assert isinstance(reading.outcome, Answer)
    assert reading.outcome.text == "Hi"


def test_an_error_after_text_is_not_retryable() -> None:
    body = _chat(
        {"choices": [{"index": 0, "delta": {"content": "Hi"}}]},
        {"error": {"message": "upstream failed", "code": 502}},
    )
    reading = read_recorded(RecordedResponse(200, _STREAM, body), "openai-chat")
    assert reading.outcome == Failure("server", 200, False, "an error event in the stream")


def test_what_a_recording_cannot_settle_is_unjudged() -> None:
    stream = _chat({"choices": [{"index": 0, "delta": {"content": "Hi"}}]})
    headerless = read_recorded(RecordedResponse(200, (), stream), "openai-chat")
    assert (headerless.streamed, headerless.outcome) == (True, Answer("Hi"))  # by its bytes
    moved = read_recorded(RecordedResponse(302, (("location", "/x"),), b""), "anthropic")
    assert (moved.outcome, moved.unjudged) == (None, "a 302 redirect, not an answer")
    body = json.dumps({"choices": [{"index": 0, "message": {"content": "Hi"}}]}).encode()
    plain = read_recorded(RecordedResponse(200, (), body), "openai-chat")
    assert isinstance(plain.outcome, Answer)  # a JSON body needs no header to be read


def test_responses_status_reads_as_a_finish_reason() -> None:
    def finish(status: str, reason: str | None = None) -> object:
        body: dict[str, object] = {"object": "response", "status": status, "output": []}
        if reason is not None:
            body["incomplete_details"] = {"reason": reason}
        raw = json.dumps(body).encode()
        outcome = read_recorded(RecordedResponse(200, _JSON, raw), "openai-responses").outcome
        if isinstance(outcome, Failure):
            return outcome.kind
        assert isinstance(outcome, Answer)
        return outcome.finish_reason, outcome.finish_reason_raw

    assert finish("completed") == ("stop", None)
    assert finish("incomplete", "max_output_tokens") == ("length", None)
    assert finish("incomplete", "content_filter") == ("content_filter", None)
    assert finish("incomplete", "server_overload") == ("other", "server_overload")
    assert finish("incomplete") == ("other", "incomplete")
    assert finish("complete") == ("stop", None)
    assert finish("queued") == "bad_response"
    assert finish("in_progress") == "bad_response"


def test_many_small_pieces_are_read_in_linear_time() -> None:
    """A hostile recording of many tiny lines, deltas and fragments: each is added once,
    never the whole so far copied or re-parsed for each."""
    lines = 200_000
    ((_, data),) = sse_events("data: x\n" * lines + "\n")
    assert len(data) == 2 * lines - 1
    opening = {"function": {"name": "f", "arguments": '{"a": "'}}
    more = {"function": {"name": "f", "arguments": "{"}}  # never a whole object
    chunks = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [opening]}}]},
        *[{"choices": [{"index": 0, "delta": {"tool_calls": [more], "content": "t"}}]}] * 50_000,
    ]
    reading = read_recorded(RecordedResponse(200, _STREAM, _chat(*chunks)), "openai-chat")
    assert isinstance(reading.outcome, Answer)
    assert reading.outcome.text == "t" * 50_000
    (call,) = reading.outcome.calls
    assert call.raw_arguments == '{"a": "' + "{" * 50_000


def _jsonish(rng: random.Random, depth: int = 0) -> str:
    """Text near JSON: values, strings with escapes and brackets, and some breakage."""
    roll = rng.random()
    if depth > 3 or roll < 0.3:
        return rng.choice(['"a}"', '"\\\\"', '"\\""', '"{["', "1", "true", "null", '"x\\u0041"'])
    if roll < 0.7:
        items = [f'"k{i}": {_jsonish(rng, depth + 1)}' for i in range(rng.randint(0, 3))]
        return "{" + ", ".join(items) + "}"
    if roll < 0.9:
        return "[" + ", ".join(_jsonish(rng, depth + 1) for _ in range(rng.randint(0, 3))) + "]"
    return rng.choice(["{", "}", '"', "\\", "{}}", '{"a": "b}'])


def test_both_readers_tell_where_arguments_end_as_json_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The adapters' and this reading's own way to tell whether argument text, piece by
    piece, is one whole JSON object: both against ``json.loads`` of the whole text."""
    from agentfsm.adapters.providers._json_end import JsonEnd
    from agentfsm.conformance._reading._chat import _Shape

    rng = random.Random(20_260)
    tried = 0
    for _ in range(3000):
        text = _jsonish(rng) + rng.choice(["", " ", "\n", " {}", "x", '"s"'])
        if rng.random() < 0.2:
            text = json.dumps(text)  # doubly encoded
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(0, 6))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        try:
            value = json.loads(text)
            value = json.loads(value) if isinstance(value, str) else value
            truth = isinstance(value, dict) and text.lstrip()[:1] in ("{", '"')
        except ValueError:
            truth = False
        ours, theirs = JsonEnd(), _Shape()
        for piece in pieces:
            ours.feed(piece)
            theirs.add(piece)
        assert ours.whole(text) == truth, (text, pieces)
        assert theirs.whole(text) == truth, (text, pieces)
        tried += 1
    with capsys.disabled():
        print(f"\nargument ends tried: {tried}")
