"""``replay-vcr`` on recordings shaped like those other projects commit: the seven kinds
of exchange an adapter reads right that a looser reading called differing (an event stream
recorded without its headers among them: read by its bytes), HAR files (Polly.JS, as
Mirascope's TypeScript tests record), files that are not cassettes, and a multi-megabyte
reply."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from agentfsm.cli import main
from agentfsm.conformance._replay_vcr import MAX_PIECES, PIECE, piece_size, replay_vcr
from agentfsm.conformance._vcr import read_cassette

from .vcr_cassettes import ANSWER, KEY, record, scenarios, write

_OPENAI = "https://api.openai.com/v1/chat/completions"
_RESPONSES = "https://api.openai.com/v1/responses"
_ANTHROPIC = "https://api.anthropic.com/v1/messages"
_AZURE = "https://example.openai.azure.com/openai/deployments/gpt-4o/chat/completions"


def _interaction(
    uri: str, body: str, headers: dict[str, list[str]], status: int = 200
) -> dict[str, Any]:
    return {
        "request": {"method": "POST", "uri": uri, "body": "{}", "headers": {}},
        "response": {
            "status": {"code": status, "message": "OK"},
            "headers": headers,
            "body": {"string": body},
        },
    }


def _sse(*events: tuple[str, dict[str, Any]]) -> str:
    return "".join(
        f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n"
        for kind, payload in events
    )


_REFUSAL = "I'm sorry, I can't assist with that."


def _refusal_stream() -> str:
    """A Responses refusal as OpenAI streams it: ``response.refusal.delta`` events, no text."""
    head = {"id": "resp_r", "model": "gpt-4o", "status": "in_progress", "output": []}
    item = {"id": "msg_r", "type": "message", "role": "assistant", "status": "in_progress"}
    part = {"item_id": "msg_r", "output_index": 0, "content_index": 0}
    done = {**item, "status": "completed", "content": [{"type": "refusal", "refusal": _REFUSAL}]}
    final = {**head, "status": "completed", "output": [done], "usage": {"input_tokens": 20}}
    return _sse(
        ("response.created", {"response": head}),
        ("response.output_item.added", {"output_index": 0, "item": {**item, "content": []}}),
        ("response.content_part.added", {**part, "part": {"type": "refusal", "refusal": ""}}),
        *(("response.refusal.delta", {**part, "delta": p}) for p in (_REFUSAL[:9], _REFUSAL[9:])),
        ("response.refusal.done", {**part, "refusal": _REFUSAL}),
        ("response.output_item.done", {"output_index": 0, "item": done}),
        ("response.completed", {"response": final}),
    )


def _paused_stream() -> str:
    """A Messages reply paused by a server tool (``pause_turn``), as Anthropic streams it."""
    start = {"id": "msg_p", "type": "message", "role": "assistant", "model": "claude-sonnet-4-0"}
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    query = json.dumps({"query": "weather"})
    return _sse(
        ("message_start", {"message": {**start, "usage": {"input_tokens": 900}}}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Let me "}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "search."}}),
        ("content_block_stop", {"index": 0}),
        ("content_block_start", {"index": 1, "content_block": search}),
        (
            "content_block_delta",
            {"index": 1, "delta": {"type": "input_json_delta", "partial_json": query}},
        ),
        ("content_block_stop", {"index": 1}),
        (
            "message_delta",
            {"delta": {"stop_reason": "pause_turn"}, "usage": {"output_tokens": 41}},
        ),
        ("message_stop", {}),
    )


def _azure_filtered() -> str:
    return json.dumps(
        {
            "error": {
                "message": "The response was filtered due to the prompt triggering Azure "
                "OpenAI's content management policy.",
                "type": None,
                "param": "prompt",
                "code": "content_filter",
                "status": 400,
            }
        }
    )


def _headerless_stream() -> str:
    chunk = {
        "id": "chatcmpl-1",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"content": ANSWER}, "finish_reason": "stop"}],
    }
    return f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"


def _seven(folder: Path) -> None:
    json_type = {"content-type": ["application/json"]}
    stream_type = {"content-type": ["text/event-stream; charset=utf-8"]}
    refusal_body = {
        "id": "resp_r",
        "object": "response",
        "status": "completed",
        "model": "gpt-4o",
        "output": [
            {
                "type": "message",
                "id": "msg_r",
                "role": "assistant",
                "content": [{"type": "refusal", "refusal": _REFUSAL}],
            }
        ],
    }
    cases = {
        "text-plain": _interaction(
            _OPENAI,
            "method=POST pathname=/bin/chat/completions Content-Type=text/plain",
            {"content-type": ["text/plain"]},
        ),
        "azure-error-in-200": _interaction(_AZURE, _azure_filtered(), json_type),
        "refusal-stream": _interaction(_RESPONSES, _refusal_stream(), stream_type),
        "refusal-body": _interaction(_RESPONSES, json.dumps(refusal_body), json_type),
        "pause-turn": _interaction(_ANTHROPIC, _paused_stream(), stream_type),
        "empty-200": _interaction(_OPENAI, "", json_type),
        "stream-without-headers": _interaction(_OPENAI, _headerless_stream(), {}),
    }
    for name, interaction in cases.items():
        write(folder / f"{name}.yaml", {"interactions": [interaction], "version": 1})


async def test_seven_exchanges_a_looser_reading_called_differing(tmp_path: Path) -> None:
    _seven(tmp_path)
    report = await replay_vcr(tmp_path)
    verdicts = {r.file: (r.outcome, r.detail) for r in report.results}
    assert verdicts == dict.fromkeys(
        (
            "azure-error-in-200.yaml",
            "empty-200.yaml",
            "pause-turn.yaml",
            "refusal-body.yaml",
            "refusal-stream.yaml",
            "stream-without-headers.yaml",
            "text-plain.yaml",
        ),
        ("exact", ""),
    )
    assert report.passed


def test_cli_passes_them_and_names_the_unjudged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _seven(tmp_path)
    moved = _interaction(_OPENAI, "", {"location": ["https://elsewhere.example/"]}, status=307)
    write(tmp_path / "moved.yaml", {"interactions": [moved], "version": 1})
    assert main(["conformance", "replay-vcr", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "8 exchanges of a known wire (7 exact, 1 unjudged)" in out
    assert "unjudged: moved.yaml #0: a 307 redirect, not an answer" in out


def test_only_unjudged_exchanges_are_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    interaction = _interaction(_OPENAI, "", {"location": ["/v2"]}, status=302)
    write(tmp_path / "only.yaml", {"interactions": [interaction], "version": 1})
    assert main(["conformance", "replay-vcr", str(tmp_path)]) == 1
    assert "nothing judged" in capsys.readouterr().err


def _har(recorded: list[dict[str, Any]]) -> dict[str, Any]:
    """The exchanges as Polly.JS writes them: headers as name/value lists, the body decoded
    in ``content.text`` (base64 for bytes), its type in ``content.mimeType``."""
    entries = []
    for number, item in enumerate(recorded):
        headers = [
            {"name": name, "value": value}
            for name, values in item["headers"].items()
            for value in values
            if name.lower() != "content-type"  # mimeType stands for it
        ]
        raw: bytes = item["body"]
        if raw.startswith(b"\x1f\x8b"):
            raw = gzip.decompress(raw)
        mime = item["headers"].get("content-type", [""])[0]
        content: dict[str, Any] = {"mimeType": mime, "size": len(raw)}
        if number % 2:
            content.update(text=base64.b64encode(raw).decode(), encoding="base64")
        else:
            content["text"] = raw.decode("utf-8")
        entries.append(
            {
                "request": {
                    "method": "POST",
                    "url": item["uri"],
                    "headers": [{"name": "x-api-key", "value": KEY}],
                    "postData": {"mimeType": "application/json", "text": item["request_body"]},
                },
                "response": {
                    "status": item["status"],
                    "statusText": item["message"],
                    "headers": headers,
                    "content": content,
                },
            }
        )
    return {"log": {"version": "1.2", "creator": {"name": "Polly.JS"}, "entries": entries}}


async def test_har_recordings_are_read_and_exact(tmp_path: Path) -> None:
    recorded = await record(scenarios())
    har = tmp_path / "recording.har"
    har.write_text(json.dumps(_har(recorded)), "utf-8")
    (tmp_path / "other.har").write_text(json.dumps({"version": 1}), "utf-8")
    cassette = read_cassette(har)
    assert (len(cassette.exchanges), cassette.other) == (10, 1)
    report = await replay_vcr(tmp_path)
    assert [r.outcome for r in report.results] == ["exact"] * 10
    assert {wire for (_, wire) in report.providers()} == {
        "openai-chat",
        "anthropic",
        "openai-responses",
    }
    assert report.skipped == [("other.har", "not a HAR recording: no log.entries")]
    assert report.passed


def test_pieces_scale_with_the_body() -> None:
    assert piece_size(100) == PIECE
    for length in (PIECE * MAX_PIECES, 5 * 1024 * 1024, 64 * 1024 * 1024):
        size = piece_size(length)
        assert size % 2 == 1
        assert -(-length // size) <= MAX_PIECES


async def test_a_multi_megabyte_reply_is_exact_in_every_delivery(tmp_path: Path) -> None:
    """An image generation reply of a few MiB (its picture in one base64 string)."""
    picture = base64.b64encode(bytes(range(256)) * 12_000).decode()  # about 4 MiB
    body = {
        "id": "resp_img",
        "object": "response",
        "status": "completed",
        "model": "gpt-image",
        "output": [
            {"type": "image_generation_call", "id": "ig_1", "result": picture},
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Here it is."}],
            },
        ],
    }
    interaction = _interaction(_RESPONSES, json.dumps(body), {"content-type": ["application/json"]})
    write(tmp_path / "image.yaml", {"interactions": [interaction], "version": 1})
    (result,) = (await replay_vcr(tmp_path)).results
    assert result.outcome == "exact"


async def test_a_stream_opening_with_a_byte_order_mark_loses_no_event(tmp_path: Path) -> None:
    """The SSE specification ignores a leading BOM; the adapter read past it once, losing
    the first chunk's text."""
    chunks = [
        {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"content": "Hello"}}]},
        {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    body = "\ufeff" + "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    interaction = _interaction(_OPENAI, body, {"content-type": ["text/event-stream"]})
    write(tmp_path / "bom.yaml", {"interactions": [interaction], "version": 1})
    (result,) = (await replay_vcr(tmp_path)).results
    assert (result.outcome, result.detail) == ("exact", "")
