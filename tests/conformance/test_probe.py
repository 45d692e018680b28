"""`agentfsm conformance probe`: the suggested quirk profile, from what a server does."""

from __future__ import annotations

import json
import socket

import pytest
from attrs import evolve

from agentfsm.adapters.providers import AnthropicQuirks, OpenAIQuirks, ResponsesQuirks
from agentfsm.adapters.providers._endpoints import WireName
from agentfsm.adapters.providers._profiles import QuirkProfile
from agentfsm.cli import main
from agentfsm.conformance._probe import ProbeError, probe
from agentfsm.testing import FakeProviderServer, Reply, ScriptTurn, scenario_handler
from agentfsm.testing._fake_server import RecordedRequest, ReplyHandler

from .probe_servers import AnthropicServer, OpenAIServer


async def suggest(
    server: ReplyHandler, wire: WireName = "openai-chat", suffix: str = "/v1"
) -> tuple[list[str], QuirkProfile]:
    with FakeProviderServer() as fake:
        fake.handler = server
        return await probe(f"{fake.base_url}{suffix}", "m", wire=wire)


def cli(server: ReplyHandler, *extra: str, suffix: str = "/v1") -> tuple[int, list[str]]:
    """Run the command against ``server``; returns the exit code and the request paths."""
    with FakeProviderServer() as fake:
        fake.handler = server
        code = main(
            [
                "conformance",
                "probe",
                "--base-url",
                f"{fake.base_url}{suffix}",
                "--model",
                "m",
                *extra,
            ]
        )
        return code, [r.path for r in fake.requests]


async def test_an_openai_like_server_needs_the_default_profile() -> None:
    findings, quirks = await suggest(OpenAIServer())
    assert quirks == OpenAIQuirks()
    assert findings == ["a plain request answers (200)"]


async def test_a_llama_cpp_like_server_gets_its_profile() -> None:
    server = OpenAIServer(
        tools_need_tool_choice=True, empty_auto_stream=True, rejects_null_content=True
    )
    findings, quirks = await suggest(server)
    assert quirks == OpenAIQuirks(
        stream_with_tools=False, explicit_tool_choice=True, null_assistant_content=False
    )
    assert "tools reach the prompt only with tool_choice auto (30 vs 110 prompt tokens)" in findings
    assert (
        "a streamed request with tools gets no parsable answer (an empty 200 stream); "
        "the same request unstreamed answers"
    ) in findings
    assert "rejects content: null on assistant tool-call turns (500)" in findings


async def test_a_clean_empty_streamed_answer_is_not_taken_for_an_answer() -> None:
    """LiteLLM turns llama.cpp's empty stream into finish 'stop' with nothing in it."""
    server = OpenAIServer(tools_need_tool_choice=True, clean_empty_auto_stream=True)
    findings, quirks = await suggest(server)
    assert quirks == OpenAIQuirks(stream_with_tools=False, explicit_tool_choice=True)
    assert (
        "a streamed request with tools gets neither text nor a tool call (finish 'stop'); "
        "the same request unstreamed answers"
    ) in findings


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        (OpenAIServer(rejects_stream_options=True), OpenAIQuirks(stream_options=False)),
        (
            OpenAIServer(wants_max_completion_tokens=True),
            OpenAIQuirks(max_tokens_field="max_completion_tokens"),
        ),
    ],
)
async def test_request_fields_a_server_rejects(
    server: OpenAIServer, expected: OpenAIQuirks
) -> None:
    assert (await suggest(server))[1] == expected


@pytest.mark.parametrize("suffix", ["", "/v1", "/v1/"])
async def test_anthropic_wire_profile(suffix: str) -> None:
    server = AnthropicServer(
        tools_need_tool_choice=True, blocks_inflate=True, clean_empty_auto_stream=True
    )
    findings, quirks = await suggest(server, "anthropic", suffix)
    assert quirks == AnthropicQuirks(
        explicit_tool_choice=True, string_content=True, stream_with_tools=False
    )
    assert (
        "text blocks reach the prompt as more than their text "
        "(17 prompt tokens as a string, 62 as a block)"
    ) in findings
    assert "tools reach the prompt only with tool_choice auto (30 vs 110 prompt tokens)" in findings


async def test_an_anthropic_like_server_needs_no_quirk() -> None:
    findings, quirks = await suggest(AnthropicServer(), "anthropic")
    assert quirks == AnthropicQuirks()
    assert findings == ["a plain request answers (200)"]


def test_the_cli_verifies_the_suggestion(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    server = OpenAIServer(
        tools_need_tool_choice=True, empty_auto_stream=True, rejects_null_content=True
    )
    code, paths = cli(server)
    out = capsys.readouterr().out
    assert code == 0, out
    profile = (
        "OpenAIQuirks(stream_with_tools=False, null_assistant_content=False, "
        "explicit_tool_choice=True)"
    )
    assert f"suggested: {profile}" in out
    assert f"verifying {profile}:" in out
    for check in ("A1", "A4", "T15", "T16"):
        assert f" {check} " in out
    assert "A4   history.content_shapes           pass-normalized: content null rejected" in out
    assert f"verified: {profile}" in out
    assert set(paths) == {"/v1/chat/completions"}
    # A4 makes the adapter retry a refused request: its line says so, no retry log does.
    assert not [r for r in caplog.records if "attempt" in r.getMessage()]


def test_the_cli_on_the_anthropic_wire_without_v1(capsys: pytest.CaptureFixture[str]) -> None:
    server = AnthropicServer(tools_need_tool_choice=True, blocks_inflate=True)
    code, paths = cli(server, "--wire", "anthropic", suffix="")
    out = capsys.readouterr().out
    assert code == 0, out
    assert "verified: AnthropicQuirks(explicit_tool_choice=True, string_content=True)" in out
    assert set(paths) == {"/v1/messages"}


def test_a_litellm_like_anthropic_route_is_verified_under_its_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Tools only with tool_choice, a clean empty streamed answer, text blocks as a repr:
    the profile that avoids all three passes the decisive checks."""
    server = AnthropicServer(
        tools_need_tool_choice=True, clean_empty_auto_stream=True, blocks_inflate=True
    )
    code, paths = cli(server, "--wire", "anthropic")
    out = capsys.readouterr().out
    assert code == 0, out
    profile = (
        "AnthropicQuirks(explicit_tool_choice=True, stream_with_tools=False, string_content=True)"
    )
    assert f"verified: {profile}" in out
    assert "T16  tools.stream_auto" in out
    assert set(paths) == {"/v1/messages"}


def test_no_profile_works(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = cli(OpenAIServer(rejects_tool_history=True))
    out = capsys.readouterr().out
    assert code == 1
    assert "no profile works: A4 (fail: " in out
    assert "verified:" not in out
    assert "(profiles tried: OpenAIQuirks(), OpenAIQuirks(explicit_tool_choice=True)," in out
    assert out.count("verifying ") == 4  # the suggestion and its three neighbours


def test_a_model_that_never_calls_a_tool_verifies_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _ = cli(OpenAIServer(never_calls_tools=True))
    out = capsys.readouterr().out
    assert code == 1
    assert "not verified: T15 (model: model behaviour: no tool call" in out
    assert "no decisive check failed" in out
    assert "verified: " not in out.replace("not verified: ", "")
    assert "T16" in out  # a skip does not stop the checks after it


@pytest.mark.parametrize(
    ("reply", "shown"),
    [
        (
            Reply.json({"error": {"message": "Authentication Error, No connected db."}}, 400),
            'HTTP 400: {"error": {"message": "Authentication Error, No connected db."}}',
        ),
        (Reply.json({"error": {"message": "model 'm' not found"}}, 404), "HTTP 404"),
        (Reply.raw("Internal Server Error", 500), "HTTP 500: Internal Server Error"),
        (Reply.raw("", 403), "HTTP 403: (empty body)"),
    ],
)
def test_a_failing_first_request_is_reported(
    reply: Reply, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, paths = cli(lambda request: reply)
    captured = capsys.readouterr()
    assert code == 1
    assert len(paths) == 1  # nothing else was tried, nothing suggested
    assert shown in captured.err
    assert captured.err.count("\n") == 1
    assert "accepted" not in captured.out + captured.err
    assert "suggested" not in captured.out


def test_the_key_never_shows(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-probe-secret-0123456789abcdef"
    monkeypatch.setenv("PROBE_KEY", key)
    echo = Reply.json({"error": {"message": f"Incorrect API key provided: {key}"}}, 401)
    code, _ = cli(lambda request: echo, "--api-key-env", "PROBE_KEY")
    captured = capsys.readouterr()
    assert code == 1
    assert "HTTP 401" in captured.err
    assert key not in captured.err + captured.out
    assert key[:12] not in captured.err


def test_a_wrong_key_on_a_litellm_like_proxy(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROBE_KEY", "sk-wrong")
    code, paths = cli(OpenAIServer(key="sk-right"), "--api-key-env", "PROBE_KEY")
    assert code == 1
    assert len(paths) == 1
    assert "No connected db." in capsys.readouterr().err


def test_an_unset_key_variable_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PROBE_UNSET_KEY", raising=False)
    code, paths = cli(OpenAIServer(), "--api-key-env", "PROBE_UNSET_KEY")
    assert code == 2
    assert paths == []
    assert "PROBE_UNSET_KEY" in capsys.readouterr().err


def test_nothing_listening_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    code = main(
        ["conformance", "probe", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m"]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("agentfsm conformance probe: cannot reach http://127.0.0.1:")
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_a_silent_server_times_out_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = cli(lambda request: Reply.stall(5), "--timeout", "0.3")
    err = capsys.readouterr().err
    assert code == 1
    assert "cannot reach" in err
    assert err.count("\n") == 1


async def test_probe_raises_probe_error_for_a_bad_url() -> None:
    with pytest.raises(ProbeError, match=r"not a usable base URL|cannot reach"):
        await probe("http://[::1", "m")


def test_a_name_that_does_not_resolve_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # ``.invalid`` never resolves (RFC 2606); the timeout bounds a resolver that hangs.
    argv = ["--base-url", "http://no-such-host.invalid/v1", "--model", "m", "--timeout", "2"]
    code = main(["conformance", "probe", *argv])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(
        "agentfsm conformance probe: cannot reach http://no-such-host.invalid/v1/chat/completions"
    )
    assert err.count("\n") == 1


def _thinking_model() -> ReplyHandler:
    """The fake server answering every fresh question with its reasoning inline first."""
    return scenario_handler([ScriptTurn("<think>2 and 3 make 5</think>5"), ScriptTurn("ok")])


async def test_reasoning_inline_suggests_think_tags() -> None:
    findings, quirks = await suggest(_thinking_model())
    assert isinstance(quirks, OpenAIQuirks)
    assert quirks.think_tags, findings
    assert any(f.startswith("answers start with their reasoning inline") for f in findings)


async def test_the_responses_wire_is_probed() -> None:
    findings, quirks = await suggest(scenario_handler("tools"), "openai-responses")
    assert quirks == ResponsesQuirks(), findings
    assert findings == ["a plain request answers (200)"]
    findings, quirks = await suggest(_thinking_model(), "openai-responses")
    assert isinstance(quirks, ResponsesQuirks)
    assert any("--wire openai-chat with think_tags=true" in f for f in findings), findings


async def test_the_responses_wire_finds_tools_reaching_the_prompt_only_with_tool_choice() -> None:
    tools = scenario_handler("tools")

    def forgets_tools(request: RecordedRequest) -> Reply:
        body = request.json()
        if body.get("tool_choice") != "auto":  # tools left out of the prompt without it
            body.pop("tools", None)
        return tools(evolve(request, body=json.dumps(body).encode()))

    findings, quirks = await suggest(forgets_tools, "openai-responses")
    assert isinstance(quirks, ResponsesQuirks)
    assert quirks.explicit_tool_choice, findings
