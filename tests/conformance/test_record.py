"""--record: every exchange a check makes, over real HTTP, saved replayable and clean."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import pytest
from attrs import evolve

from agentfsm.adapters.providers import ProviderError, Timeouts
from agentfsm.cli import main
from agentfsm.conformance import LiveTarget, RecordedTarget, run_checks, run_corpus
from agentfsm.conformance._checks import by_id
from agentfsm.conformance._context import LiveContext
from agentfsm.conformance._exchange import RecordedExchange, Verdict
from agentfsm.conformance._frames import DONE, chunk, completion
from agentfsm.conformance._model import Check
from agentfsm.conformance._record import REQUEST_HEADERS, RESPONSE_HEADERS, save_recordings
from agentfsm.testing import FakeProviderServer, RecordedRequest, Reply

KEY = "sk-test-RECORDING-0123456789abcdef"
INTERNAL = "http://10.20.30.40:8081/internal-llama"
PROXY_HEADERS = {
    "x-litellm-model-api-base": INTERNAL,
    "x-litellm-key-spend": "0.0",
    "set-cookie": "session=opaque-session-cookie; HttpOnly",
    "x-request-id": "req-123",
    "retry-after": "1",
}
FAST = Timeouts(connect=2, first_byte=5, idle=5, terminal_grace=0.3, total=30)


def openai_answer(request: RecordedRequest, text: str = "PONG") -> Reply:
    if request.json().get("stream"):
        frames = [chunk({"role": "assistant", "content": text}), chunk({}, finish="stop"), DONE]
        return Reply.sse(frames, headers=PROXY_HEADERS)
    return Reply.json(completion({"role": "assistant", "content": text}), headers=PROXY_HEADERS)


def anthropic_answer(request: RecordedRequest) -> Reply:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "fake-model",
        "content": [{"type": "text", "text": "PONG"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 9, "output_tokens": 2},
    }
    if not request.json().get("stream"):
        return Reply.json(message, headers=PROXY_HEADERS)

    def event(kind: str, payload: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **payload})}\n\n"

    start = {**message, "content": [], "stop_reason": None}
    text = {"type": "text_delta", "text": "PONG"}
    frames = [
        event("message_start", {"message": start}),
        event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        event("content_block_delta", {"index": 0, "delta": text}),
        event("content_block_stop", {"index": 0}),
        event(
            "message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}
        ),
        event("message_stop", {}),
    ]
    return Reply.sse(frames, headers=PROXY_HEADERS)


def fixtures(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text("utf-8")) for p in sorted(folder.glob("*.json"))]


def body_bytes(body: dict[str, str]) -> bytes:
    if body["encoding"] == "base64":
        return base64.b64decode(body["base64"])
    return body["text"].encode("utf-8")


def test_adapter_calls_and_raw_probes_are_recorded_named_after_their_check(
    tmp_path: Path,
) -> None:
    with FakeProviderServer() as server:
        server.handler = openai_answer
        target = LiveTarget(
            f"{server.base_url}/v1", "m", api_key=KEY, record_dir=tmp_path, timeouts=FAST
        )
        report = asyncio.run(run_checks(target, [by_id("A1"), by_id("A2")]))
        received = list(server.requests)
    assert [r.outcome for r in report.results] == ["pass", "pass"]
    files = sorted(tmp_path.glob("*.json"))
    # One file per request the server received after the kit's first plain request (is
    # there an endpoint? not a check's, not recorded), in order, named after the check.
    assert len(files) == len(received) - 1 == 4
    assert [p.name.split("-", 2)[2] for p in files] == [
        "A1-adapter.json",
        "A1-adapter.json",
        "A2-adapter.json",
        "A2-stream.json",
    ]
    for document, request in zip(fixtures(tmp_path), received[1:], strict=True):
        assert document["format"] == "agentfsm.wire-fixture/1"
        assert (document["wire"], document["api"]) == ("openai-chat", "chat.completions")
        (interaction,) = document["interactions"]
        assert interaction["request"]["uri"].endswith("/v1/chat/completions")
        assert body_bytes(interaction["request"]["body"]) == request.body  # the bytes sent
        assert document["streaming"] is bool(request.json().get("stream"))
        assert interaction["response"]["status"] == 200
    # The adapter's own streamed call is there with its exact stream.
    streamed = next(d for d in fixtures(tmp_path) if d["check"] == "A1" and d["streaming"])
    text = streamed["interactions"][0]["response"]["body"]["text"]
    assert text.endswith("data: [DONE]\n\n")
    assert '"content": "PONG"' in text


def test_recordings_keep_only_allow_listed_headers(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        server.handler = openai_answer
        target = LiveTarget(
            f"{server.base_url}/v1", "m", api_key=KEY, record_dir=tmp_path, timeouts=FAST
        )
        asyncio.run(run_checks(target, [by_id("A1"), by_id("A2")]))
        sent = server.requests[0].headers
    assert sent["authorization"] == f"Bearer {KEY}"  # the key did go out …
    assert "x-litellm-model-api-base" in PROXY_HEADERS
    for path in sorted(tmp_path.glob("*.json")):
        text = path.read_text("utf-8")
        for leaked in (KEY, INTERNAL, "10.20.30.40", "x-litellm", "set-cookie", "session="):
            assert leaked not in text, (leaked, path.name)
        assert "authorization" not in text.lower()
        (interaction,) = json.loads(text)["interactions"]
        request_names = {name for name, _ in interaction["request"]["headers"]}
        response_names = {name for name, _ in interaction["response"]["headers"]}
        assert request_names <= REQUEST_HEADERS
        assert response_names <= RESPONSE_HEADERS
        # … and what the allow-list keeps is kept, values as sent.
        assert ["x-request-id", "req-123"] in interaction["response"]["headers"]
        assert ["retry-after", "1"] in interaction["response"]["headers"]


async def test_the_key_is_scrubbed_from_request_and_response_bodies(tmp_path: Path) -> None:
    def echo(request: RecordedRequest) -> Reply:
        prompt = request.json()["messages"][0]["content"]
        return openai_answer(request, f"you said: {prompt}")

    with FakeProviderServer() as server:
        server.handler = echo
        target = LiveTarget(
            f"{server.base_url}/v1", "m", api_key=KEY, record_dir=tmp_path, timeouts=FAST
        )
        context = LiveContext(target, check="X1")
        result = await context.ask(prompt=f"my key is {KEY}; pieces {KEY[3:19]}")
        raw = await context.raw(
            {"messages": [{"role": "user", "content": f"again {KEY}"}]}, name="X1-raw"
        )
        assert KEY in server.requests[0].body.decode()  # the call really carried it
    assert KEY in result.message.content
    assert KEY in raw.text
    paths = save_recordings(target, context.recordings)
    assert [p.name.split("-", 2)[2] for p in paths] == ["X1-adapter.json", "X1-raw.json"]
    for path in paths:
        text = path.read_text("utf-8")
        assert KEY not in text
        assert KEY[3:19] not in text
        (interaction,) = json.loads(text)["interactions"]
        assert "[redacted]" in interaction["request"]["body"]["text"]
        assert "[redacted]" in interaction["response"]["body"]["text"]


async def test_a_failing_adapter_call_replays_to_the_same_outcome(tmp_path: Path) -> None:
    def empty_stream(request: RecordedRequest) -> Reply:
        if request.json().get("stream"):
            return Reply.raw(b"", headers={"content-type": "text/event-stream", **PROXY_HEADERS})
        return openai_answer(request)

    folder = tmp_path / "wire"
    with FakeProviderServer() as server:
        server.handler = empty_stream
        target = LiveTarget(f"{server.base_url}/v1", "m", record_dir=folder, timeouts=FAST)
        context = LiveContext(target, check="T16")
        with pytest.raises(ProviderError) as live:
            await context.ask(stream=True)
        calls = len(server.requests)
    save_recordings(target, context.recordings)
    assert len(list(folder.glob("*-T16-adapter.json"))) == calls  # retries included

    outcomes: list[object] = []

    def keep(exchange: RecordedExchange) -> Verdict | None:
        outcomes.append(exchange.outcome)
        return None

    probe = Check("Z1", "test.outcome", "wire", "", "", corpus=keep)
    from agentfsm.adapters.providers import OpenAIChat, RetryPolicy

    replay = RecordedTarget(
        lambda url: OpenAIChat("m", base_url=url, retry=RetryPolicy(max_attempts=1))
    )
    await run_corpus(replay, folder, checks=[probe])
    assert outcomes
    assert all(isinstance(o, ProviderError) for o in outcomes)
    for outcome in outcomes:
        assert isinstance(outcome, ProviderError)
        assert (outcome.kind, outcome.status, str(outcome)) == (
            live.value.kind,
            live.value.status,
            str(live.value),
        )


def test_cli_records_a_failing_check_and_corpus_replays_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The live run fails A1 (an empty 200 stream); its recordings replay through the
    adapter, and the corpus holds the adapter to W4 on exactly those bytes."""

    def empty_stream(request: RecordedRequest) -> Reply:
        if request.json().get("stream"):
            return Reply.raw(b"", headers={"content-type": "text/event-stream"})
        return openai_answer(request)

    folder, live, replayed = tmp_path / "wire", tmp_path / "live.json", tmp_path / "corpus.json"
    with FakeProviderServer() as server:
        server.handler = empty_stream
        argv = ["conformance", "--base-url", f"{server.base_url}/v1", "--model", "m"]
        code = main([*argv, "--only", "answers", "--record", str(folder), "--out", str(live)])
    assert code == 1
    a1 = next(r for r in json.loads(live.read_text("utf-8"))["results"] if r["check"] == "A1")
    assert a1["outcome"] == "fail"
    assert "recorded" in capsys.readouterr().err
    failing = [d for d in fixtures(folder) if d["check"] == "A1" and d["streaming"]]
    assert failing
    assert all(d["interactions"][0]["response"]["body"]["text"] == "" for d in failing)
    assert main(["conformance", "corpus", str(folder), "--out", str(replayed)]) == 0
    report = json.loads(replayed.read_text("utf-8"))
    assert report["wire"] == "openai-chat"
    w4 = next(r for r in report["results"] if r["check"] == "W4")
    assert w4["outcome"] == "pass"
    empty = [d for d in fixtures(folder) if d["interactions"][0]["response"]["body"]["text"] == ""]
    assert len(empty) >= len(failing)  # A1's and those of the other streamed calls
    assert w4["message"] == f"holds on {len(empty)} recorded file{'s' * (len(empty) > 1)}"


def test_a_context_made_inside_a_check_records_with_the_run(tmp_path: Path) -> None:
    """E1 calls with a wrong key through a context of its own: that call is recorded under
    E1 too, the wrong key scrubbed like the right one."""

    def gateway(request: RecordedRequest) -> Reply:
        if request.headers.get("authorization") != f"Bearer {KEY}":
            error = {"error": {"message": "No connected db.", "type": "auth_error"}}
            return Reply.json(error, status=400, headers=PROXY_HEADERS)
        return openai_answer(request)

    with FakeProviderServer() as server:
        server.handler = gateway
        target = LiveTarget(
            f"{server.base_url}/v1", "m", api_key=KEY, record_dir=tmp_path, timeouts=FAST
        )
        report = asyncio.run(run_checks(target, [by_id("A1"), by_id("E1")]))
        wrong = [r for r in server.requests if r.headers["authorization"] != f"Bearer {KEY}"]
    e1 = report.results[1]
    assert (e1.check, e1.outcome) == ("E1", "fail")  # a 400, not an auth error
    assert wrong
    recorded = [d for d in fixtures(tmp_path) if d["check"] == "E1"]
    assert len(recorded) == len(wrong)
    for document in recorded:
        response = document["interactions"][0]["response"]
        assert response["status"] == 400
        assert "No connected db." in response["body"]["text"]
    for path in tmp_path.glob("*.json"):
        assert "wrong-key" not in path.read_text("utf-8")
        assert KEY not in path.read_text("utf-8")


async def test_a_derived_context_scrubs_its_own_key(tmp_path: Path) -> None:
    other = "plain-secret-value-without-a-prefix-42"

    def echo(request: RecordedRequest) -> Reply:
        return openai_answer(request, f"key {request.headers['authorization']}")

    with FakeProviderServer() as server:
        server.handler = echo
        target = LiveTarget(
            f"{server.base_url}/v1", "m", api_key=KEY, record_dir=tmp_path, timeouts=FAST
        )
        run = LiveContext(target, check="X2")
        derived = LiveContext(evolve(run.target, api_key=other))
        assert derived.recordings is run.recordings
        answer = await derived.ask(stream=False)
    assert other in answer.message.content
    (path,) = save_recordings(target, run.recordings)
    assert path.name.endswith("-X2-adapter.json")
    assert other not in path.read_text("utf-8")
    assert "key [redacted]" in path.read_text("utf-8")


def test_a_failing_check_fails_again_on_its_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A LiteLLM-like server turns a streamed tools request into a clean empty answer: T16
    fails live, and `conformance corpus` on the recording fails T16 on that very file."""

    def empty_answer(request: RecordedRequest) -> Reply:
        body = request.json()
        if body.get("stream") and body.get("tools"):
            frames = [chunk({"role": "assistant", "content": ""}), chunk({}, finish="stop")]
            return Reply.sse([*frames, DONE], headers=PROXY_HEADERS)
        return openai_answer(request)

    folder, out = tmp_path / "wire", tmp_path / "corpus.json"
    with FakeProviderServer() as server:
        server.handler = empty_answer
        target = LiveTarget(
            f"{server.base_url}/v1", "m", api_key=KEY, record_dir=folder, timeouts=FAST
        )
        (live,) = asyncio.run(run_checks(target, [by_id("T16")])).results
    assert (live.check, live.outcome) == ("T16", "fail")
    assert "empty_answer" in (live.got or "")
    (recording,) = folder.glob("*-T16-streamed-auto.json")
    assert main(["conformance", "corpus", str(folder), "--out", str(out)]) == 1
    capsys.readouterr()
    replayed = next(r for r in json.loads(out.read_text("utf-8"))["results"] if r["check"] == "T16")
    assert replayed["outcome"] == "fail"
    assert recording.stem in replayed["message"]
    assert "empty_answer" in replayed["got"]


async def test_two_runs_saved_in_one_second_keep_both(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        server.handler = openai_answer
        target = LiveTarget(f"{server.base_url}/v1", "m", record_dir=tmp_path, timeouts=FAST)
        contexts = [LiveContext(target, check="X1") for _ in range(3)]
        for context in contexts:
            await context.ask(stream=False)
    saved = [path for c in contexts for path in save_recordings(target, c.recordings)]
    assert len(set(saved)) == 3
    assert sorted(saved) == sorted(tmp_path.glob("*.json"))
    assert all(p.name.endswith("-001-X1-adapter.json") for p in saved)
