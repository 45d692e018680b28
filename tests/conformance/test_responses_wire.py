"""The conformance kit on the OpenAI Responses wire: recorded (scripted Responses bytes),
live (against ``responses_server``, an endpoint written by the project, not a recording),
and the corpus (a live run's own recordings, and the bundled recorded Responses exchange)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentfsm.adapters.providers import OpenAIResponses, ProviderError, RetryPolicy
from agentfsm.adapters.providers._replay import fixture_wire, load_wire_fixture
from agentfsm.cli import main
from agentfsm.conformance import LiveTarget, RecordedTarget, run_checks, run_corpus
from agentfsm.conformance._checks import ALL_CHECKS
from agentfsm.conformance._context import Wire
from agentfsm.conformance._model import Capabilities, Report
from agentfsm.engine._messages import ChatResult, Message, ToolSpec, UserMessage
from agentfsm.engine._protocols import DeltaHandler, SupportsAbort
from agentfsm.testing import FakeProviderServer, Reply, scenario_handler

from .responses_server import KEY, WINDOW, ResponsesServer, answer

WIRE: Wire = "openai-responses"
CAPABLE = Capabilities(
    parallel_tools=True, tool_choice=True, stream_usage=True, reasoning=True, context_window=WINDOW
)
RECORDED = {c.id for c in ALL_CHECKS if "recorded" in c.responses}
LIVE = {c.id for c in ALL_CHECKS if "live" in c.responses}


def outcomes(report: Report) -> dict[str, str]:
    return {r.check: r.outcome for r in report.results}


def adapter(url: str) -> OpenAIResponses:
    return OpenAIResponses("m", base_url=url, retry=RetryPolicy(max_attempts=3, initial_delay=0))


def test_the_kit_names_its_responses_procedures() -> None:
    assert {
        "A1",
        "A2",
        "A3",
        "T1",
        "T6",
        "T8",
        "U1",
        "U2",
        "U4",
        "U5",
        "E1",
        "E5",
        "E7",
    } <= RECORDED
    # Every live check has a procedure on this wire too.
    assert {c.id for c in ALL_CHECKS if c.live is not None} == LIVE


async def test_recorded_checks_pass_on_the_adapter() -> None:
    report = await run_checks(RecordedTarget(adapter, WIRE, CAPABLE, name="responses"))
    got = outcomes(report)
    assert report.wire == WIRE
    assert {c for c, o in got.items() if o in ("pass", "pass-normalized")} == RECORDED
    others = [r for r in report.results if r.check not in RECORDED]
    assert others
    assert {r.message for r in others} == {f"no recorded procedure for the {WIRE} wire"}


class Forgetful:
    """A Responses adapter that loses the answer's text, calls and usage: the recorded
    checks must see it."""

    def __init__(self, url: str) -> None:
        self.inner = adapter(url)

    async def __call__(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        signal: SupportsAbort | None = None,
        on_delta: DeltaHandler | None = None,
    ) -> ChatResult:
        result = await self.inner(
            messages, tools, temperature=temperature, max_tokens=max_tokens, signal=signal
        )
        return ChatResult(type(result.message)(""), None, result.finish_reason)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_recorded_checks_fail_on_a_broken_adapter() -> None:
    report = await run_checks(RecordedTarget(Forgetful, WIRE, CAPABLE, name="broken"))
    got = outcomes(report)
    for check in ("A1", "A2", "T1", "T6", "T8", "U1", "U2", "U4", "U5"):
        assert got[check] == "fail", check


def live(server: ResponsesServer, checks: set[str] | None = None, **target: Any) -> Report:
    with FakeProviderServer() as fake:
        fake.handler = lambda request: answer(server, request)
        url = f"{fake.base_url}/v1"
        live_target = LiveTarget(url, "m", WIRE, capabilities=CAPABLE, api_key=KEY, **target)
        chosen = [c for c in ALL_CHECKS if checks is None or c.id in checks]
        return asyncio.run(run_checks(live_target, chosen))


def test_live_checks_pass_on_a_correct_endpoint() -> None:
    report = live(ResponsesServer())
    got = outcomes(report)
    passed = {c for c, o in got.items() if o == "pass"}
    # The scripted model reports no cache (U4: a skip) and never reasons (U5: the model).
    assert passed == LIVE - {"U4", "U5"}
    assert (got["U4"], got["U5"]) == ("skip", "model")
    assert all(o in ("pass", "skip", "model") for o in got.values()), report.results


@pytest.mark.parametrize(
    ("server", "check", "fragment"),
    [
        (ResponsesServer(ignores_max_tokens=True), "A3", "the answer ran past the limit"),
        (ResponsesServer(drops_usage=True), "U1", "input_tokens > 0"),
        (
            ResponsesServer(completes_cut_answers=True),
            "A3",
            "the same request with max_tokens=64 goes on",
        ),
    ],
)
def test_live_checks_fail_on_an_endpoint_with_the_defect(
    server: ResponsesServer, check: str, fragment: str
) -> None:
    result = live(server, {check}).results[0]
    assert result.outcome == "fail", result
    assert fragment in result.message


def test_a_live_run_records_responses_exchanges_that_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = live(ResponsesServer(), {"A1", "A3", "T15"}, record_dir=tmp_path)
    assert set(outcomes(report).values()) == {"pass"}
    files = sorted(tmp_path.glob("*.json"))
    assert files
    for path in files:
        fixture = load_wire_fixture(path)
        assert fixture_wire(fixture) == WIRE
        assert json.loads(path.read_text("utf-8"))["api"] == "responses"
    assert main(["conformance", "corpus", str(tmp_path), "--wire", "responses"]) == 0
    out = capsys.readouterr()
    assert f"{len(files)} {WIRE}" in out.err
    replayed = asyncio.run(run_corpus(RecordedTarget(adapter, WIRE, name="replay"), tmp_path))
    held = {r.check for r in replayed.results if r.outcome == "pass"}
    assert {"A1", "A3"} <= held
    assert not replayed.failed


def test_the_bundled_responses_exchange_replays(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "corpus", "--wire", "responses"]) == 0
    out = capsys.readouterr().out
    assert "errors.overflow_classified" in out
    report = asyncio.run(run_corpus(RecordedTarget(adapter, WIRE, name="bundled")))
    held = {r.check: r.message for r in report.results if r.outcome != "skip"}
    assert held == dict.fromkeys(("W1", "W5", "E7"), "holds on 1 recorded file")


def test_cli_live_run_on_the_responses_wire(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESPONSES_TEST_KEY", KEY)
    with FakeProviderServer() as fake:
        fake.handler = lambda request: answer(ResponsesServer(), request)
        out = tmp_path / "report.json"
        code = main(
            [
                "conformance",
                "--base-url",
                f"{fake.base_url}/v1",
                "--model",
                "m",
                "--wire",
                "responses",
                "--api-key-env",
                "RESPONSES_TEST_KEY",
                "--only",
                "answers",
                "--out",
                str(out),
            ]
        )
        paths = {request.path for request in fake.requests}
    assert code == 0
    data = json.loads(out.read_text("utf-8"))
    assert data["wire"] == WIRE
    assert paths == {"/v1/responses"}
    assert {r["check"]: r["outcome"] for r in data["results"]}["A1"] == "pass"


def test_a_server_without_the_endpoint_gets_one_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server with no /v1/responses (a 404, as llama.cpp's server says it): one verdict
    naming the endpoint and the wire that does answer, not a failure per check."""
    chat_only = scenario_handler("tools")
    missing = Reply.json(
        {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}, 404
    )
    with FakeProviderServer() as fake:
        fake.handler = lambda r: missing if r.path.endswith("/responses") else chat_only(r)
        out = tmp_path / "report.json"
        base = f"{fake.base_url}/v1"
        argv = ["conformance", "--base-url", base, "--model", "m", "--wire", "responses"]
        code = main([*argv, "--out", str(out)])
        # What `agentfsm run` gets at run time: the same endpoint named, and the wires to try.
        adapter = OpenAIResponses("m", base_url=base, retry=RetryPolicy(max_attempts=1))
        with pytest.raises(ProviderError) as caught:
            asyncio.run(adapter([UserMessage("hi")], []))
    assert code == 1
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) == 1
    assert printed[0].startswith(
        f"no openai-responses endpoint: POST {base}/responses answered 404"
    )
    assert (
        "it answers on openai-chat (200), anthropic (200): run with --wire openai-chat"
        in (printed[0])
    )
    data = json.loads(out.read_text("utf-8"))
    assert data["results"] == []
    assert data["verdict"] == printed[0]
    error = caught.value
    assert error.status == 404
    assert "404 for POST /v1/responses: this server has no such endpoint" in str(error)
    assert "--wire chat (/v1/chat/completions) or --wire anthropic (/v1/messages)" in str(error)
