"""`conformance corpus DIR`: each recording replayed through its own wire's adapter; a run
that exercises nothing is not a pass; recordings are bounded and keep every byte."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import httpx
import pytest

from agentfsm.adapters.providers import OpenAIChat, ReplayTransport, load_wire_fixture
from agentfsm.adapters.providers._replay import fixture_wire
from agentfsm.cli import main
from agentfsm.conformance import LiveTarget, RecordedTarget, run_checks, run_corpus
from agentfsm.conformance._checks import by_id
from agentfsm.conformance._context import LiveContext, Wire
from agentfsm.conformance._corpus import corpus_wires
from agentfsm.conformance._frames import DONE, chunk, completion
from agentfsm.conformance._record import save_recordings
from agentfsm.engine._messages import UserMessage
from agentfsm.testing import FakeProviderServer, Pause, RecordedRequest, Reply

from .test_record import FAST, anthropic_answer, openai_answer

ANTHROPIC_STREAM = (
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":'
    '"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":3,'
    '"output_tokens":0}}}\n\n'
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    '"content_block":{"type":"text","text":""}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
    '{"type":"text_delta","text":"hi"}}\n\n'
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    '"usage":{"output_tokens":1}}\n\n'
    'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def record(folder: Path, wire: Wire, checks: tuple[str, ...] = ("A1", "A2")) -> None:
    """A live run of ``checks`` against a fake server of ``wire``, recorded in ``folder``."""
    with FakeProviderServer() as server:
        anthropic = wire == "anthropic"
        server.handler = anthropic_answer if anthropic else openai_answer
        url = server.base_url if anthropic else f"{server.base_url}/v1"
        target = LiveTarget(url, "m", wire, record_dir=folder, timeouts=FAST)
        report = asyncio.run(run_checks(target, [by_id(c) for c in checks]))
    assert {r.outcome for r in report.results} == {"pass"}


def results(path: Path) -> dict[str, dict[str, str]]:
    return {r["check"]: r for r in json.loads(path.read_text("utf-8"))["results"]}


def test_anthropic_recordings_replay_without_wire(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "anthropic"
    record(folder, "anthropic")
    assert set(corpus_wires(folder)) == {"anthropic"}
    out = tmp_path / "report.json"
    assert main(["conformance", "corpus", str(folder), "--out", str(out)]) == 0
    report = json.loads(out.read_text("utf-8"))
    assert report["wire"] == "anthropic"
    by_check = results(out)
    assert by_check["A1"]["outcome"] == "pass"
    assert by_check["A1"]["message"].startswith("holds on ")
    assert "recorded files in" in capsys.readouterr().err


def test_mixed_wires_each_go_to_their_adapter(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    record(folder / "openai", "openai-chat")
    record(folder / "anthropic", "anthropic")
    # Older recordings: a YAML cassette whose request path is the only label, and a raw
    # Messages stream body.
    (folder / "older").mkdir()
    (folder / "older" / "cassette.yaml").write_text(
        "interactions:\n- request: {method: POST, uri: 'http://x/v1/messages', body: '{}'}\n"
        "  response:\n    status: 200\n    headers: {content-type: [text/event-stream]}\n"
        f"    body: {json.dumps(ANTHROPIC_STREAM)}\n",
        "utf-8",
    )
    (folder / "older" / "stream.sse").write_text(ANTHROPIC_STREAM, "utf-8")
    wires = corpus_wires(folder)
    assert set(wires) == {"openai-chat", "anthropic"}
    assert {p.name for p in wires["anthropic"]} >= {"cassette.yaml", "stream.sse"}
    assert all(p.parent.name == "openai" for p in wires["openai-chat"])
    out = tmp_path / "r.json"
    assert main(["conformance", "corpus", str(folder), "--out", str(out)]) == 0
    assert not out.exists()
    openai, anthropic = tmp_path / "r.openai-chat.json", tmp_path / "r.anthropic.json"
    assert json.loads(openai.read_text("utf-8"))["wire"] == "openai-chat"
    assert json.loads(anthropic.read_text("utf-8"))["wire"] == "anthropic"
    files = len(wires["anthropic"])
    assert f"({files} files)" in json.loads(anthropic.read_text("utf-8"))["target"]
    assert results(anthropic)["A1"]["outcome"] == results(openai)["A1"]["outcome"] == "pass"
    # --wire still chooses: one wire, one report, at the path given.
    assert (
        main(["conformance", "corpus", str(folder), "--wire", "anthropic", "--out", str(out)]) == 0
    )
    assert json.loads(out.read_text("utf-8"))["wire"] == "anthropic"


def test_a_corpus_that_exercises_nothing_is_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gemini = tmp_path / "gemini"
    gemini.mkdir()
    (gemini / "generate.yaml").write_text(
        "fixture: {provider: gemini, api: generateContent}\ninteractions:\n"
        "- response: {status: 200, body: '{\"candidates\": []}'}\n",
        "utf-8",
    )
    assert main(["conformance", "corpus", str(gemini)]) == 1
    assert "nothing exercised" in capsys.readouterr().err
    openai = tmp_path / "openai"
    record(openai, "openai-chat", ("A1",))
    assert main(["conformance", "corpus", str(openai), "--wire", "anthropic"]) == 1
    err = capsys.readouterr().err
    assert "nothing exercised on the anthropic wire" in err
    assert "not a pass" in err
    assert main(["conformance", "corpus", str(openai)]) == 0


def test_a_huge_body_is_recorded_cut_and_left_out_of_the_corpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long = "x" * 50_000
    with FakeProviderServer() as server:
        server.handler = lambda request: Reply.json(
            completion({"role": "assistant", "content": long})
        )
        target = LiveTarget(
            f"{server.base_url}/v1", "m", record_dir=tmp_path, timeouts=FAST, record_limit=1000
        )
        context = LiveContext(target, check="A1")
        result = asyncio.run(context.ask(stream=False))
    assert result.message.content == long  # recording never changes what the adapter reads
    (path,) = save_recordings(target, context.recordings)
    response = json.loads(path.read_text("utf-8"))["interactions"][0]["response"]
    assert response["truncated"] is True
    assert len(response["body"]["text"].encode()) == 1000
    sent = len(json.dumps(completion({"role": "assistant", "content": long})))
    assert response["note"] == f"the body is cut at 1000 bytes (the server sent {sent} bytes)"
    assert not load_wire_fixture(path).responses[0].whole
    replay = RecordedTarget(lambda url: OpenAIChat("m", base_url=url))
    report = asyncio.run(run_corpus(replay, tmp_path))
    assert report.target.endswith("(0 files; 1 with a cut, encoded or unfinished body left out)")
    assert {r.outcome for r in report.results} == {"skip"}
    assert main(["conformance", "corpus", str(tmp_path)]) == 1  # nothing exercised
    assert "nothing exercised on the openai-chat wire" in capsys.readouterr().err


async def test_a_gzipped_body_is_recorded_decoded(tmp_path: Path) -> None:
    body = completion({"role": "assistant", "content": "zipped"})
    with FakeProviderServer() as server:
        server.handler = lambda request: Reply.gzipped(Reply.json(body))
        target = LiveTarget(f"{server.base_url}/v1", "m", record_dir=tmp_path, timeouts=FAST)
        context = LiveContext(target, check="A1")
        assert (await context.ask(stream=False)).message.content == "zipped"
    (path,) = save_recordings(target, context.recordings)
    document = json.loads(path.read_text("utf-8"))
    response = document["interactions"][0]["response"]
    assert json.loads(response["body"]["text"]) == body
    assert "content-encoding" not in {name for name, _ in response["headers"]}
    assert document["transformations"] == ["resp:decoded content-encoding"]


async def test_surrogates_and_line_separators_survive_a_recording(tmp_path: Path) -> None:
    # A JSON-escaped lone surrogate and a raw U+2028 in valid UTF-8, then bytes that are no
    # UTF-8 at all (an encoded surrogate).
    text_body = completion({"role": "assistant", "content": "a\u2028b \\ud800 c"})
    valid = json.dumps(text_body, ensure_ascii=False).replace("\\\\ud800", "\\ud800").encode()
    invalid = b'{"broken": "\xed\xa0\x80"}'
    replies = iter(
        [
            Reply.raw(valid, headers={"content-type": "application/json"}),
            Reply.raw(invalid, status=500, headers={"content-type": "application/json"}),
        ]
    )

    def answer(request: RecordedRequest) -> Reply:
        return next(replies)

    with FakeProviderServer() as server:
        server.handler = answer
        target = LiveTarget(f"{server.base_url}/v1", "m", record_dir=tmp_path, timeouts=FAST)
        context = LiveContext(target, check="A4")
        live = await context.ask(stream=False)
        raw = await context.raw({"messages": []}, name="A4-raw")
    assert live.message.content == "a\u2028b \ud800 c"
    assert raw.status == 500
    first, second = save_recordings(target, context.recordings)
    kept = json.loads(second.read_text("utf-8"))["interactions"][0]["response"]["body"]
    assert kept["encoding"] == "base64"
    assert base64.b64decode(kept["base64"]) == invalid
    assert load_wire_fixture(second).responses[0].body == invalid
    fixture = load_wire_fixture(first)
    assert fixture.responses[0].body == valid
    assert "\u2028" in first.read_text("utf-8")
    transport = ReplayTransport(fixture.responses)
    async with httpx.AsyncClient(transport=transport) as client:
        replayed = await OpenAIChat(
            "m", base_url="http://replay/v1", http_client=client, stream=False
        )([UserMessage("x")], [])
    assert replayed.message.content == live.message.content


def test_fixture_wire_reads_the_file_then_the_path_then_the_body(tmp_path: Path) -> None:
    def yaml(name: str, text: str) -> str | None:
        path = tmp_path / name
        path.write_text(text, "utf-8")
        return fixture_wire(load_wire_fixture(path))

    response = "  response: {status: 200, body: ''}\n"
    assert yaml(
        "a.yaml", f"interactions:\n- request: {{uri: 'http://h/v1/messages'}}\n{response}"
    ) == ("anthropic")
    assert yaml(
        "b.yaml", f"interactions:\n- request: {{uri: 'http://h/v1/chat/completions'}}\n{response}"
    ) == ("openai-chat")
    assert yaml(
        "c.yaml", f"interactions:\n- request: {{uri: 'http://h/v1beta/x:generate'}}\n{response}"
    ) == (
        "openai-chat"  # an unlabelled body that is not a Messages one
    )
    (tmp_path / "d.sse").write_text(ANTHROPIC_STREAM, "utf-8")
    assert fixture_wire(load_wire_fixture(tmp_path / "d.sse")) == "anthropic"
    (tmp_path / "e.sse").write_text('data: {"choices": []}\n\n', "utf-8")
    assert fixture_wire(load_wire_fixture(tmp_path / "e.sse")) == "openai-chat"
    # A fixture's own wire field wins, null included.
    fixture = {
        "format": "agentfsm.wire-fixture/1",
        "id": "x/f",
        "provider": "anthropic",
        "api": "messages",
        "streaming": False,
        "interactions": [{"request": None, "response": {"status": 200, "body": None}}],
    }
    for wire in ("openai-chat", None):
        (tmp_path / "f.json").write_text(json.dumps({**fixture, "wire": wire}), "utf-8")
        assert fixture_wire(load_wire_fixture(tmp_path / "f.json")) == wire


def test_an_aborted_call_is_recorded_unfinished_and_left_out(tmp_path: Path) -> None:
    """C1 aborts on the first delta: the recording holds the stream as far as it came and is
    not replayed (as a whole answer it would be a false failure)."""
    pieces = [chunk({"content": f"{n} "}) for n in range(1, 40)]
    slow = [x for piece in pieces for x in (piece, Pause(0.05))]
    with FakeProviderServer() as server:
        server.handler = lambda request: Reply.sse([*slow, chunk({}, finish="stop"), DONE])
        target = LiveTarget(f"{server.base_url}/v1", "m", record_dir=tmp_path, timeouts=FAST)
        report = asyncio.run(run_checks(target, [by_id("C1")]))
    assert report.results[0].outcome == "pass"
    (document,) = [json.loads(p.read_text("utf-8")) for p in tmp_path.glob("*-C1-adapter.json")]
    response = document["interactions"][0]["response"]
    assert response["complete"] is False
    assert response["note"] == "the body ends where the reader left it"
    assert response["body"]["text"].startswith('data: {"id"')
    assert "[DONE]" not in response["body"]["text"]
    replay = RecordedTarget(lambda url: OpenAIChat("m", base_url=url))
    label = asyncio.run(run_corpus(replay, tmp_path)).target
    assert label.endswith("(0 files; 1 with a cut, encoded or unfinished body left out)")


def test_a_stream_left_open_after_its_final_record_is_whole(tmp_path: Path) -> None:
    """A server that neither sends [DONE] nor closes: the adapter leaves after the final
    record, and the recording still replays."""
    frames: list[str | Pause] = [chunk({"content": "PONG"}), chunk({}, finish="stop"), Pause(3.0)]
    with FakeProviderServer() as server:
        server.handler = lambda request: Reply.sse(frames)
        target = LiveTarget(f"{server.base_url}/v1", "m", record_dir=tmp_path, timeouts=FAST)
        context = LiveContext(target, check="W2")
        assert asyncio.run(context.ask(stream=True)).message.content == "PONG"
    (path,) = save_recordings(target, context.recordings)
    response = json.loads(path.read_text("utf-8"))["interactions"][0]["response"]
    assert "complete" not in response
    assert response["note"] == "the body ends where the reader left it, after the final record"
    replay = RecordedTarget(lambda url: OpenAIChat("m", base_url=url))
    report = asyncio.run(run_corpus(replay, tmp_path))
    assert report.target.endswith("(1 files)")
    a1 = next(r for r in report.results if r.check == "A1")
    assert (a1.outcome, a1.message) == ("pass", "holds on 1 recorded file")
