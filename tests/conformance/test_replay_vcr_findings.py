"""``replay-vcr`` on the shapes of recordings where a second reading that copied the adapters'
rules gave wrong verdicts. For each: what the bytes say, stated here (the truth); the real
adapters exact against it; and an adapter that reads the bytes the old, wrong way caught as
differing on the field it gets wrong (so the verdict is not the adapters' echo)."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import yaml

from agentfsm.adapters.providers import ProviderError
from agentfsm.adapters.providers._replay import RecordedResponse
from agentfsm.cli import main
from agentfsm.conformance import _replay_vcr
from agentfsm.conformance._reading import Answer, Call, Failure, read_recorded
from agentfsm.conformance._replay_vcr import MAX_PIECES, VcrResult, replay_vcr
from agentfsm.engine._messages import ChatResult, Usage

_CHAT = "https://api.openai.com/v1/chat/completions"
_RESPONSES = "https://api.openai.com/v1/responses"
_MESSAGES = "https://api.anthropic.com/v1/messages"
_SSE = {"content-type": ["text/event-stream"]}
_JSON = {"content-type": ["application/json"]}


def _cassette(
    folder: Path,
    body: str | bytes,
    headers: dict[str, list[str]],
    uri: str = _CHAT,
    *,
    status: int = 200,
    name: str = "c.yaml",
) -> Path:
    """One exchange as vcrpy writes it (bytes as ``!!binary``)."""
    response: dict[str, Any] = {"status": {"code": status, "message": "OK"}, "headers": headers}
    response["body"] = {"string": body}
    interaction = {"request": {"method": "POST", "uri": uri, "body": "{}"}, "response": response}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump({"interactions": [interaction], "version": 1}), "utf-8")
    return path


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    body = {"id": "chatcmpl-1", "model": "gpt-4o", "choices": [choice], **extra}
    return f"data: {json.dumps(body)}\n\n"


_DONE = "data: [DONE]\n\n"


def _reading(path: Path, wire: str = "openai-chat") -> Any:
    from agentfsm.conformance._vcr import read_cassette

    (exchange,) = read_cassette(path).exchanges
    assert exchange.response is not None
    return read_recorded(exchange.response, wire)  # type: ignore[arg-type]


async def _one(folder: Path) -> VcrResult:
    (result,) = (await replay_vcr(folder)).results
    return result


Change = Callable[[Any], Any]
"""An answer (or error) changed; applied to answers only here."""


def _loosen(monkeypatch: pytest.MonkeyPatch, wire: str, change: Change) -> None:
    """The wire's adapter with its answer changed the way a looser reading got it wrong."""
    path, factory = _replay_vcr.ADAPTERS[wire]

    def build(url: str, client: httpx.AsyncClient | None) -> Any:
        real = factory(url, client)

        async def chat(*args: Any, **kwargs: Any) -> ChatResult:
            try:
                outcome: ChatResult | ProviderError = await real(*args, **kwargs)
            except ProviderError as error:
                outcome = error
            changed = change(outcome)
            if isinstance(changed, ProviderError):
                raise changed
            assert isinstance(changed, ChatResult)
            return changed

        chat.aclose = real.aclose  # type: ignore[attr-defined]
        return chat

    monkeypatch.setitem(_replay_vcr.ADAPTERS, wire, (path, build))


def _message(result: Any, **changes: Any) -> Any:
    return attrs.evolve(result, message=attrs.evolve(result.message, **changes))


def _caught(result: VcrResult, field: str) -> None:
    assert result.outcome == "differing"
    assert field in result.fields
    assert {d.delivery for d in result.differences if d.field == field} == {
        "whole",
        "pieces",
        "loopback",
    }


# 1. The deprecated function_call.

_LEGACY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4-0613",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "function_call": {
                    "name": "get_current_weather",
                    "arguments": '{"location": "Boston"}',
                },
            },
            "finish_reason": "function_call",
        }
    ],
    "usage": {"prompt_tokens": 82, "completion_tokens": 16, "total_tokens": 98},
}


async def test_a_legacy_function_call_is_one_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = _cassette(tmp_path / "body", json.dumps(_LEGACY), _JSON)
    stream = "".join(
        [
            _chunk({"role": "assistant", "function_call": {"name": "get_current_weather"}}),
            _chunk({"function_call": {"arguments": '{"location": '}}),
            _chunk({"function_call": {"arguments": '"Boston"}'}}),
            _chunk({}, "function_call"),
            _DONE,
        ]
    )
    streamed = _cassette(tmp_path / "stream", stream, _SSE)
    for path in (body, streamed):
        outcome = _reading(path).outcome
        assert outcome.calls == (Call(None, "get_current_weather", {"location": "Boston"}),)
        assert (outcome.text, outcome.finish_reason) == ("", "tool_calls")
    assert (await _one(tmp_path / "body")).outcome == "exact"
    assert (await _one(tmp_path / "stream")).outcome == "exact"
    _loosen(monkeypatch, "openai-chat", lambda r: _message(r, tool_calls=()))
    _caught(await _one(tmp_path / "body"), "calls")


# 2. One bad value: a verdict for that exchange or file, never a traceback.


@pytest.mark.parametrize("count", ["1e999", "NaN", "-1", "12.9", '"many"'])
async def test_a_usage_count_that_is_no_count_is_a_bad_response(tmp_path: Path, count: str) -> None:
    body = json.dumps(_LEGACY).replace('"prompt_tokens": 82', f'"prompt_tokens": {count}')
    path = _cassette(tmp_path, body, _JSON)
    assert _reading(path).outcome == Failure(
        "bad_response", 200, False, "usage.prompt_tokens is not a token count"
    )
    assert (await _one(tmp_path)).outcome == "exact"


async def test_usage_counts_written_as_text_or_float_are_exact_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = json.dumps(_LEGACY).replace('"prompt_tokens": 82', '"prompt_tokens": "82"')
    body = body.replace('"completion_tokens": 16', '"completion_tokens": 16.0')
    path = _cassette(tmp_path, body, _JSON)
    assert _reading(path).outcome.usage == Usage(82, 16)
    assert (await _one(tmp_path)).outcome == "exact"

    def as_zero(result: Any) -> Any:  # the looser reading: text is no number, so 0
        return attrs.evolve(result, usage=attrs.evolve(result.usage, input_tokens=0))

    _loosen(monkeypatch, "openai-chat", as_zero)
    _caught(await _one(tmp_path), "usage input_tokens")


def test_yaml_no_safe_loader_builds_is_skipped_or_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.yaml").write_text("released: 2024-02-30\n", "utf-8")
    (tmp_path / "odd.yaml").write_text('value: !!int "x"\n', "utf-8")
    (tmp_path / "compose.yaml").write_text("a: 1\n---\nb: 2\n", "utf-8")
    (tmp_path / "cfn.yaml").write_text("B:\n  Name: !Ref X\n", "utf-8")
    (tmp_path / "mkdocs.yml").write_text("f: !!python/name:material.emoji.twemoji\n", "utf-8")
    (tmp_path / "empty.yaml").write_text("", "utf-8")
    (tmp_path / "broken.yaml").write_text('interactions: !!int "x"\n', "utf-8")
    _cassette(tmp_path, json.dumps(_LEGACY), _JSON, name="real.yaml")
    code = main(["conformance", "replay-vcr", str(tmp_path)])
    printed = capsys.readouterr()
    assert "Traceback" not in printed.out + printed.err
    assert code == 1  # broken.yaml is a cassette whose values cannot be built
    assert "1 exchanges of a known wire (1 exact, 1 unreadable files)" in printed.out
    assert "6 files skipped (not cassettes)" in printed.out
    assert "unreadable file: broken.yaml: a YAML value that cannot be built" in printed.out


# 3. A cut is never hidden by the calls it cut.


@pytest.mark.parametrize("reason", ["length", "content_filter"])
async def test_a_cut_inside_a_tool_call_keeps_its_finish_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reason: str
) -> None:
    cut = '{"path": "a.py", "content": "import os\\nde'
    call: dict[str, Any] = {"index": 0, "id": "call_1", "type": "function"}
    call["function"] = {"name": "write_file", "arguments": cut}
    stream = _chunk({"role": "assistant", "tool_calls": [call]}) + _chunk({}, reason) + _DONE
    path = _cassette(tmp_path, stream, _SSE)
    outcome = _reading(path).outcome
    assert (outcome.finish_reason, outcome.finish_reason_raw) == (reason, None)
    assert outcome.calls == (Call("call_1", "write_file", {}, cut),)
    assert (await _one(tmp_path)).outcome == "exact"
    _loosen(monkeypatch, "openai-chat", lambda r: attrs.evolve(r, finish_reason="tool_calls"))
    _caught(await _one(tmp_path), "finish reason")


def _responses_events(*events: tuple[str, dict[str, Any]]) -> str:
    return "".join(
        f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n"
        for kind, payload in events
    )


async def test_a_responses_answer_cut_in_a_call_is_length(tmp_path: Path) -> None:
    """Mirascope's refusal stream: incomplete at max_output_tokens, its call's arguments
    cut."""
    call: dict[str, Any] = {"type": "function_call", "id": "fc_1", "call_id": "call_1"}
    call["name"] = "f"
    call["arguments"] = '{"instructions": "If your interest is legit'
    head: dict[str, Any] = {"id": "resp_1", "object": "response", "model": "gpt-5"}
    final = {**head, "status": "incomplete", "output": [call]}
    final["incomplete_details"] = {"reason": "max_output_tokens"}
    stream = _responses_events(
        ("response.created", {"response": {**head, "status": "in_progress"}}),
        ("response.output_item.added", {"output_index": 0, "item": {**call, "arguments": ""}}),
        ("response.function_call_arguments.delta", {"output_index": 0, "delta": call["arguments"]}),
        ("response.incomplete", {"response": final}),
    )
    path = _cassette(tmp_path, stream, _SSE, _RESPONSES)
    outcome = _reading(path, "openai-responses").outcome
    assert (outcome.finish_reason, len(outcome.calls)) == ("length", 1)
    assert (await _one(tmp_path)).outcome == "exact"


# 4. Bodies decoded by the second reading itself.


def _hello() -> bytes:
    message = {"role": "assistant", "content": "Hello"}
    body: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o"}
    body["choices"] = [{"index": 0, "message": message, "finish_reason": "stop"}]
    return json.dumps(body).encode()


async def test_a_har_body_kept_gzipped_in_base64_is_read(tmp_path: Path) -> None:
    """Polly's node-http adapter keeps a gzip body as its bytes, base64 in the HAR."""
    headers = [{"name": "content-type", "value": "application/json"}]
    headers.append({"name": "content-encoding", "value": "gzip"})
    content: dict[str, Any] = {"mimeType": "application/json", "encoding": "base64"}
    content["text"] = base64.b64encode(gzip.compress(_hello())).decode()
    entry = {
        "request": {"method": "POST", "url": _CHAT},
        "response": {"status": 200, "headers": headers, "content": content},
    }
    path = tmp_path / "r.har"
    path.write_text(json.dumps({"log": {"entries": [entry]}}), "utf-8")
    outcome = _reading(path).outcome
    assert (outcome.text, outcome.finish_reason) == ("Hello", "stop")
    assert (await _one(tmp_path)).outcome == "exact"


async def test_every_gzip_member_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    frames = [_chunk({"content": "Hel"}), _chunk({"content": "lo"}), _chunk({}, "stop"), _DONE]
    body = b"".join(gzip.compress(frame.encode()) for frame in frames)
    path = _cassette(tmp_path, body, {**_SSE, "content-encoding": ["gzip"]})
    assert _reading(path).outcome.text == "Hello"
    assert (await _one(tmp_path)).outcome == "exact"
    # An adapter reading through httpx's decoder alone gets the first member only.
    monkeypatch.setattr(
        "agentfsm.adapters.providers._transport.decode_content", lambda response: response
    )
    _caught(await _one(tmp_path), "text")


# 5. An event stream is one by its label in any case, or by its bytes.

_HELLO_STREAM = _chunk({"role": "assistant", "content": "Hello"}) + _chunk({}, "stop") + _DONE


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({"content-type": ["Text/Event-Stream; charset=utf-8"]}, _HELLO_STREAM),
        (_JSON, _HELLO_STREAM),
        ({}, (": ok\n\n" + _HELLO_STREAM).replace("\n", "\r")),
    ],
    ids=["upper-case", "labelled-json", "cr-no-label"],
)
async def test_an_event_stream_is_read_whatever_its_label(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    headers: dict[str, list[str]],
    body: str,
) -> None:
    path = _cassette(tmp_path, body, headers)
    reading = _reading(path)
    assert reading.streamed
    assert (reading.outcome.text, reading.outcome.finish_reason) == ("Hello", "stop")
    assert (await _one(tmp_path)).outcome == "exact"
    # An adapter that goes by the label alone, in lower case, reads no stream here.
    monkeypatch.setattr(
        "agentfsm.adapters.providers._http_adapter.is_event_stream",
        lambda value: "text/event-stream" in value,
    )
    monkeypatch.setattr(
        "agentfsm.adapters.providers._http_adapter.looks_like_events", lambda text: False
    )
    _caught(await _one(tmp_path), "outcome")


# 6. Tool calls as the wire documents them.


def _fragments(*calls: dict[str, Any]) -> str:
    frames = [_chunk({"tool_calls": [call]}) for call in calls]
    return "".join(frames) + _chunk({}, "tool_calls") + _DONE


async def test_a_name_split_over_fragments_is_joined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = _fragments(
        {"index": 0, "id": "call_1", "function": {"name": "get_", "arguments": ""}},
        {"index": 0, "function": {"name": "weather", "arguments": '{"city":"Paris"}'}},
    )
    path = _cassette(tmp_path, stream, _SSE)
    assert _reading(path).outcome.calls == (Call("call_1", "get_weather", {"city": "Paris"}),)
    assert (await _one(tmp_path)).outcome == "exact"

    def first_piece(result: Any) -> Any:
        (call,) = result.message.tool_calls
        return _message(result, tool_calls=(attrs.evolve(call, name="get_"),))

    _loosen(monkeypatch, "openai-chat", first_piece)
    _caught(await _one(tmp_path), "call 0 name")


def _unindexed(*arguments: str) -> str:
    return _fragments(*({"function": {"name": "f", "arguments": a}} for a in arguments))


@pytest.mark.parametrize(
    ("fragments", "expected"),
    [
        (('{"s": "a}', '{b"}', '{"c": 1}'), [{"s": "a}{b"}, {"c": 1}]),
        (
            ('{"k": "xxxxxxxxxxxxxxx", "n": ', '{"z": 1}}', '{"c": 1}'),
            [{"k": "xxxxxxxxxxxxxxx", "n": {"z": 1}}, {"c": 1}],
        ),
    ],
    ids=["glued", "false-differing"],
)
async def test_calls_without_an_index_part_where_their_json_ends(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fragments: tuple[str, ...],
    expected: list[dict[str, Any]],
) -> None:
    path = _cassette(tmp_path, _unindexed(*fragments), _SSE)
    assert [c.arguments for c in _reading(path).outcome.calls] == expected
    assert (await _one(tmp_path)).outcome == "exact"

    def glued(result: Any) -> Any:
        text = "".join(fragments)
        (first, *_) = result.message.tool_calls
        one = attrs.evolve(first, arguments={}, raw_arguments=text)
        return _message(result, tool_calls=(one,))

    _loosen(monkeypatch, "openai-chat", glued)
    _caught(await _one(tmp_path), "calls")


async def test_calls_come_in_the_order_of_their_indexes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = _fragments(
        {"index": 1, "id": "call_b", "function": {"name": "b", "arguments": "{}"}},
        {"index": 0, "id": "call_a", "function": {"name": "a", "arguments": "{}"}},
    )
    path = _cassette(tmp_path, stream, _SSE)
    assert [c.name for c in _reading(path).outcome.calls] == ["a", "b"]
    assert (await _one(tmp_path)).outcome == "exact"
    _loosen(
        monkeypatch,
        "openai-chat",
        lambda r: _message(r, tool_calls=tuple(reversed(r.message.tool_calls))),
    )
    _caught(await _one(tmp_path), "call 0 name")


@pytest.mark.parametrize(
    ("calls", "why"),
    [
        (
            (
                {"function": {"name": "f", "arguments": '{"a": 1}'}},
                {"function": {"arguments": '{"b": 2}'}},
            ),
            "a tool-call fragment without index, id or name opens a second JSON value",
        ),
        (
            (
                {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": "{}"}},
                {"index": 0, "id": "call_2", "function": {"name": "g", "arguments": "{}"}},
            ),
            "two ids given to the tool call at index 0",
        ),
        (
            (
                {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": "{}"}},
                {"id": "call_2", "function": {"name": "g", "arguments": "{}"}},
            ),
            "tool-call fragments with and without an index in one reply",
        ),
    ],
    ids=["nameless-second-object", "two-ids-one-index", "mixed-indexes"],
)
async def test_fragments_the_rules_part_more_than_one_way_are_unjudged(
    tmp_path: Path, calls: tuple[dict[str, Any], ...], why: str
) -> None:
    _cassette(tmp_path, _fragments(*calls), _SSE)
    result = await _one(tmp_path)
    assert result.outcome == "unjudged"
    assert result.detail.startswith(why)


# 7. The Responses API's final output is the completed response.


async def test_calls_only_in_the_final_response_output_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message: dict[str, Any] = {"type": "message", "id": "msg_1", "role": "assistant"}
    message["content"] = [{"type": "output_text", "text": "Hi", "annotations": []}]
    call: dict[str, Any] = {"type": "function_call", "id": "fc_1", "call_id": "call_1"}
    call["name"] = "get_weather"
    call["arguments"] = '{"city":"Paris"}'
    head = {"id": "resp_1", "object": "response", "model": "gpt-5", "output": []}
    stream = _responses_events(
        ("response.created", {"response": {**head, "status": "in_progress"}}),
        ("response.output_item.added", {"output_index": 0, "item": {**message, "content": []}}),
        ("response.output_text.delta", {"output_index": 0, "item_id": "msg_1", "delta": "Hi"}),
        ("response.output_item.done", {"output_index": 0, "item": message}),
        (
            "response.completed",
            {"response": {**head, "status": "completed", "output": [message, call]}},
        ),
    )
    path = _cassette(tmp_path, stream, _SSE, _RESPONSES)
    outcome = _reading(path, "openai-responses").outcome
    assert outcome.calls == (Call("call_1", "get_weather", {"city": "Paris"}),)
    assert (outcome.text, outcome.finish_reason) == ("Hi", "tool_calls")
    assert (await _one(tmp_path)).outcome == "exact"
    _loosen(
        monkeypatch,
        "openai-responses",
        lambda r: attrs.evolve(_message(r, tool_calls=()), finish_reason="stop"),
    )
    _caught(await _one(tmp_path), "calls")


# 8. Anthropic's thinking signatures and redacted thinking are reasoning items.


async def test_thinking_signatures_and_redacted_thinking_are_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-0",
        "content": [
            {"type": "thinking", "thinking": "Let me see.", "signature": "EqQBCkYIBBgC"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 10, "output_tokens": 20},
    }
    path = _cassette(tmp_path, json.dumps(body), _JSON, _MESSAGES)
    assert _reading(path, "anthropic").outcome.reasoning_items == (
        {"type": "thinking", "thinking": "Let me see.", "signature": "EqQBCkYIBBgC"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"},
    )
    assert (await _one(tmp_path)).outcome == "exact"
    _loosen(monkeypatch, "anthropic", lambda r: _message(r, reasoning_items=()))
    _caught(await _one(tmp_path), "reasoning items")


# 9. Every exchange bounded by work, not by the clock.


def test_many_events_go_over_loopback_in_few_frames() -> None:
    body = ("data: {}\n\n" * 600_000 + _HELLO_STREAM).encode()
    reply = _replay_vcr._loopback_reply(RecordedResponse(200, (), body), streamed=True)
    assert reply.frames is not None
    assert len(reply.frames) <= MAX_PIECES + 1
    assert b"".join(reply.frames) == body
    small = _replay_vcr._loopback_reply(RecordedResponse(200, (), _HELLO_STREAM.encode()), True)
    assert small.frames is not None
    assert len(small.frames) == 3


async def test_an_adapter_waiting_forever_is_hung_and_a_busy_one_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio
    import time

    monkeypatch.setattr(_replay_vcr, "IDLE_SECONDS", 1.0)

    async def waits(*args: Any, **kwargs: Any) -> ChatResult:
        await asyncio.Event().wait()
        raise AssertionError

    assert await _replay_vcr._bounded(waits, [], 0) is None

    async def works(*args: Any, **kwargs: Any) -> ChatResult:
        spent = time.process_time()
        while time.process_time() - spent < 3.0:  # three idle windows of CPU work
            sum(range(20_000))
            await asyncio.sleep(0)
        return ChatResult(_message_of("done"))

    outcome = await _replay_vcr._bounded(works, [], 0)
    assert isinstance(outcome, ChatResult)


def _message_of(text: str) -> Any:
    from agentfsm.engine._messages import AssistantMessage

    return AssistantMessage(text)


async def test_many_responses_items_without_an_index_are_too_large(tmp_path: Path) -> None:
    added = 'data: {"type":"response.output_item.added","item":{"type":"message"}}\n\n'
    done = 'data: {"type":"response.completed","response":{"status":"completed","output":[]}}\n\n'
    path = _cassette(tmp_path, added * 45_000 + done, _SSE, _RESPONSES)
    assert _reading(path, "openai-responses").outcome == Failure(
        "too_large", None, False, "past Limits.max_blocks"
    )
    assert (await _one(tmp_path)).outcome == "exact"


# 10. The replay's own limits are never the adapter's fault.


async def test_a_header_value_out_of_ascii_is_sent_as_recorded(tmp_path: Path) -> None:
    _cassette(tmp_path, _HELLO_STREAM, {**_SSE, "x-note": ["caf\u00e9"]})
    assert (await _one(tmp_path)).outcome == "exact"


@pytest.mark.parametrize(
    ("status", "headers", "body", "why"),
    [
        (200, {**_SSE, "x-bad": ["a\r\nb"]}, _HELLO_STREAM, "a response header the replay"),
        (200, {**_SSE, "bad name": ["x"]}, _HELLO_STREAM, "a response header the replay"),
        (103, {"link": ["</a>; rel=preload"]}, "", "an interim 103 response was recorded"),
        (204, _JSON, '{"a": 1}', "a 204 response with a body, which HTTP never sends"),
    ],
    ids=["crlf-value", "odd-name", "interim-103", "204-with-body"],
)
async def test_what_the_replay_cannot_send_is_unjudged(
    tmp_path: Path, status: int, headers: dict[str, list[str]], body: str, why: str
) -> None:
    _cassette(tmp_path, body, headers, status=status)
    result = await _one(tmp_path)
    assert (result.outcome, result.detail[: len(why)]) == ("unjudged", why)
    assert "a\r\nb" not in result.detail


async def test_a_header_value_with_a_lone_surrogate_is_unjudged(tmp_path: Path) -> None:
    headers = [{"name": "content-type", "value": "text/event-stream"}]
    headers.append({"name": "x-bad", "value": "\ud800"})  # JSON can carry one; HTTP cannot
    content = {"mimeType": "text/event-stream", "text": _HELLO_STREAM}
    entry = {
        "request": {"method": "POST", "url": _CHAT},
        "response": {"status": 200, "headers": headers, "content": content},
    }
    (tmp_path / "r.har").write_text(json.dumps({"log": {"entries": [entry]}}), "utf-8")
    result = await _one(tmp_path)
    assert (result.outcome, result.detail) == (
        "unjudged",
        "a response header the replay cannot send as recorded (its value)",
    )


async def test_a_failure_of_the_replay_itself_is_not_the_adapters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cassette(tmp_path, _HELLO_STREAM, _SSE)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("the harness")

    monkeypatch.setattr(_replay_vcr, "_Pieces", broken)
    result = await _one(tmp_path)
    assert (result.outcome, result.detail) == (
        "unjudged",
        "the replay could not serve the response as recorded (ValueError)",
    )


async def test_a_failure_of_the_reading_is_that_exchanges_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cassette(tmp_path / "a", _HELLO_STREAM, _SSE)
    _cassette(tmp_path / "b", _HELLO_STREAM, _SSE)

    calls: list[int] = []

    def flaky(response: Any, wire: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise OverflowError("cannot convert float infinity to integer")
        return read_recorded(response, wire)

    monkeypatch.setattr(_replay_vcr, "read_recorded", flaky)
    report = await replay_vcr(tmp_path)
    assert [(r.outcome, r.detail) for r in report.results] == [
        ("crashed", "second reading: OverflowError: cannot convert float infinity to integer"),
        ("exact", ""),
    ]


# 11 and 12. Files that are no cassettes; no header value in any report.


def test_a_content_encoding_value_never_reaches_a_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    secret = "sk-proj-AbCdEfGh12345678"
    _cassette(tmp_path, b"{}", {"content-encoding": [f"x; {secret}"]}, name="leak.yaml")
    _cassette(tmp_path, _hello(), {**_JSON, "content-encoding": ["none"]}, name="none.yaml")
    _cassette(tmp_path, _hello(), {**_JSON, "content-encoding": ["UTF-8"]}, name="utf8.yaml")
    _cassette(tmp_path, b"\x00\x01", {"content-encoding": ["br"]}, name="br.yaml")
    report = asyncio.run(replay_vcr(tmp_path))
    verdicts = {r.file: (r.outcome, r.detail) for r in report.results}
    assert verdicts["none.yaml"] == verdicts["utf8.yaml"] == ("exact", "")
    assert verdicts["br.yaml"] == (
        "unjudged",
        "a body in the br content encoding, which this reading does not undo",
    )
    out = tmp_path / "out"
    out.mkdir()
    for flags in ([], ["--json"], ["--markdown"], ["--json", str(out / "r.json")]):
        main(["conformance", "replay-vcr", str(tmp_path), *flags])
    printed = capsys.readouterr()
    text = printed.out + printed.err + (out / "r.json").read_text("utf-8")
    assert secret not in text
    assert "x; " not in text


def test_the_reading_of_a_headerless_cr_stream_opening_with_a_comment() -> None:
    body = (": ok\n\n" + _HELLO_STREAM).replace("\n", "\r").encode()
    reading = read_recorded(RecordedResponse(200, (), body), "openai-chat")
    assert reading.streamed
    assert reading.outcome == Answer(
        "Hello",
        finish_reason="stop",
        response_id="chatcmpl-1",
        model="gpt-4o",
    )


async def test_a_loopback_server_that_cannot_serve_is_not_the_adapters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cassette(tmp_path, _HELLO_STREAM, _SSE)

    def unservable(response: Any, streamed: bool) -> Any:
        raise OSError("no port left")

    monkeypatch.setattr(_replay_vcr, "_loopback_reply", unservable)
    result = await _one(tmp_path)
    assert (result.outcome, result.detail) == (
        "unjudged",
        "the replay could not serve the response as recorded (OSError)",
    )


async def test_a_fault_of_the_kit_itself_is_that_exchanges_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _cassette(tmp_path / "a", _HELLO_STREAM, _SSE)
    _cassette(tmp_path / "b", json.dumps(_LEGACY), _JSON)
    real = _replay_vcr._view

    def view(outcome: Any, deltas: Any, given: Any) -> Any:
        if isinstance(outcome, ChatResult) and outcome.message.content == "Hello":
            raise KeyError("x-secret-header-value")
        return real(outcome, deltas, given)

    monkeypatch.setattr(_replay_vcr, "_view", view)
    report = await replay_vcr(tmp_path)
    assert [(r.outcome, r.detail) for r in report.results] == [
        ("crashed", "the replay itself failed (KeyError)"),
        ("exact", ""),
    ]


# Shapes a differential fuzz of the two readings found.


async def test_a_tool_call_fragment_carrying_nothing_makes_no_call(tmp_path: Path) -> None:
    stream = _chunk({"tool_calls": [{"index": 0, "id": ""}]}) + _chunk({}, "") + _DONE
    path = _cassette(tmp_path, stream, _SSE)
    assert _reading(path).outcome == Failure("server", 200, False, "an empty 200 answer")
    assert (await _one(tmp_path)).outcome == "exact"


async def test_redacted_thinking_is_its_start_and_a_reused_index_is_unjudged(
    tmp_path: Path,
) -> None:
    def event(kind: str, **payload: Any) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n"

    start = event("message_start", message={"id": "msg_1", "model": "claude", "usage": {}})
    redacted = {"type": "redacted_thinking", "data": "EmwK"}
    end = event("message_delta", delta={"stop_reason": "end_turn"}) + event("message_stop")
    stray = event("content_block_delta", index=0, delta={"type": "text_delta", "text": "x"})
    body = start + event("content_block_start", index=0, content_block=redacted) + stray + end
    path = _cassette(tmp_path / "stray", body, _SSE, _MESSAGES)
    assert _reading(path, "anthropic").outcome.reasoning_items == (redacted,)
    assert (await _one(tmp_path / "stray")).outcome == "exact"
    text = {"type": "text", "text": "Hi"}
    reused = event("content_block_start", index=0, content_block=text)
    _cassette(tmp_path / "reused", body.replace(stray, reused + stray), _SSE, _MESSAGES)
    result = await _one(tmp_path / "reused")
    assert (result.outcome, result.detail) == (
        "unjudged",
        "a second content block started at index 0",
    )


def _random_stream(rng: Any) -> str:
    """A Chat Completions stream of random tool-call fragments, text, usage and finish."""
    arguments = ['{"a": 1}', '{"a": ', "1}", "{", "}", '"x"', "", '{"s": "}{"}', "{}", "null"]
    frames = []
    for _ in range(rng.randint(0, 6)):
        call: dict[str, Any] = {}
        if rng.random() < 0.6:
            call["index"] = rng.choice([0, 0, 1, 2])
        if rng.random() < 0.4:
            call["id"] = rng.choice(["call_1", "call_2", ""])
        function = {}
        if rng.random() < 0.6:
            function["name"] = rng.choice(["f", "g", "get_", "weather", ""])
        if rng.random() < 0.9:
            function["arguments"] = rng.choice(arguments)
        call["function"] = function
        roll = rng.random()
        if roll < 0.6:
            frames.append(_chunk({"tool_calls": [call]}))
        elif roll < 0.7:
            frames.append(_chunk({"function_call": function}))
        elif roll < 0.85:
            frames.append(_chunk({"content": rng.choice(["Hi", "", "\u2028"])}))
        else:
            count = rng.choice([1, "2", 3.0, 4.5, None, -1])
            frames.append(_chunk({}, usage={"prompt_tokens": count, "completion_tokens": 1}))
    finish = rng.choice(["stop", "length", "tool_calls", "content_filter", "", None, "x"])
    frames.append(_chunk({}, finish))
    return "".join(frames) + (_DONE if rng.random() < 0.8 else "")


async def test_random_streams_are_never_read_two_ways(capsys: pytest.CaptureFixture[str]) -> None:
    """The second reading and the adapter follow the same documented rules their own ways:
    on random fragments they agree, or the reading says why the bytes do not settle it."""
    import random

    rng = random.Random(4_391)
    judged = unjudged = 0
    for _ in range(300):
        body = _random_stream(rng).encode()
        response = RecordedResponse(200, (("content-type", "text/event-stream"),), body)
        reading = read_recorded(response, "openai-chat")
        if reading.outcome is None:
            unjudged += 1
            continue
        outcome, deltas, _ = await _replay_vcr._deliver("whole", response, True, "openai-chat")
        assert isinstance(outcome, ChatResult | ProviderError)
        answer = reading.outcome
        given = {c.id for c in answer.calls if c.id} if isinstance(answer, Answer) else set()
        view = _replay_vcr._view(outcome, deltas, given)
        expected = _replay_vcr._expected(reading)
        assert expected is not None
        assert _replay_vcr._compare(expected, view, "whole") == [], body
        judged += 1
    with capsys.disabled():
        print(f"\nrandom streams tried: {judged + unjudged} ({unjudged} unjudged)")
    assert judged > 150


async def test_a_cassette_with_a_tag_the_safe_loader_does_not_know_is_read(
    tmp_path: Path,
) -> None:
    """Old vcrpy under Python 2 wrote ``!!python/unicode`` strings: read as the text."""
    path = _cassette(tmp_path, "PLACEHOLDER", _JSON)
    text = path.read_text("utf-8").replace("string: PLACEHOLDER", "string: !!python/unicode 'BODY'")
    path.write_text(text.replace("BODY", json.dumps(_LEGACY).replace("'", "''")), "utf-8")
    assert len(_reading(path).outcome.calls) == 1
    assert (await _one(tmp_path)).outcome == "exact"


async def test_arguments_holding_nan_are_exact_when_handed_on_as_sent(tmp_path: Path) -> None:
    """``NaN`` (which Python's JSON reads) is itself: arguments ``{"x": NaN, "n": 5}`` handed
    on as sent are exact, although ``nan != nan``."""
    function = {"name": "f", "arguments": '{"x": NaN, "n": 5}'}
    call = {"id": "call_1", "type": "function", "function": function}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    body = {"id": "c", "model": "m", "choices": [{"index": 0, "message": message}]}
    path = _cassette(tmp_path, json.dumps(body), {"content-type": ["application/json"]})
    (expected,) = _reading(path).outcome.calls
    assert json.dumps(expected.arguments) == '{"x": NaN, "n": 5}'
    assert (await _one(tmp_path)).outcome == "exact"
