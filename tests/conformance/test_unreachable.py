"""A server the kit cannot check at all gets one verdict, not a failure per check: nothing
listening, a server that accepts and never answers, a server that refuses the key. What the
server saw (its own count of connections and requests) is the truth the verdict is held to."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentfsm.adapters.providers import Timeouts
from agentfsm.cli import main
from agentfsm.conformance import LiveTarget, run_checks
from agentfsm.testing import FakeProviderServer, Reply, scenario_handler

KEY = "sk-unreachable-test-KEY-0123456789abcdef"


def _closed_port() -> int:
    """A port nothing listens on: bound, then released."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def silent() -> Iterator[tuple[int, list[socket.socket]]]:
    """A server that accepts connections and never answers; its accepted connections."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], accepted
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        server.close()


def test_nothing_listening_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = f"http://127.0.0.1:{_closed_port()}/v1"
    out = tmp_path / "report.json"
    code = main(["conformance", "--base-url", base, "--model", "m", "--out", str(out)])
    printed = capsys.readouterr().out.strip().splitlines()
    assert code == 1
    assert len(printed) == 1, printed
    assert printed[0].startswith(f"no answer from POST {base}/chat/completions: ConnectError")
    assert printed[0].endswith("no check ran; is the server running, and the base URL right?")
    data = json.loads(out.read_text("utf-8"))
    assert (data["results"], data["verdict"], data["suggestion"]) == ([], printed[0], "")


async def test_a_server_that_never_answers_is_asked_once(
    silent: tuple[int, list[socket.socket]],
) -> None:
    port, accepted = silent
    base = f"http://127.0.0.1:{port}/v1"
    bounds = Timeouts(connect=1, first_byte=1, idle=1, terminal_grace=0.1, total=5)
    for wire in ("openai-chat", "anthropic", "openai-responses"):
        before = len(accepted)
        target = LiveTarget(base, "m", wire=wire, timeouts=bounds)
        report = await run_checks(target)
        assert report.results == []
        assert report.verdict.startswith(f"no answer from POST {base.removesuffix('/v1')}")
        assert "no answer in 1 s; no check ran" in report.verdict
        assert not report.ok
        # The server's own count: one plain request, no check's.
        assert len(accepted) - before == 1


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_is_one_line_without_the_key(
    status: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UNREACHABLE_KEY", KEY)
    refusal = Reply.json(
        {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}}, status
    )
    with FakeProviderServer() as fake:
        fake.handler = lambda _request: refusal
        base = f"{fake.base_url}/v1"
        out = tmp_path / "report.json"
        argv = ["conformance", "--base-url", base, "--model", "m", "--out", str(out)]
        code = main([*argv, "--api-key-env", "UNREACHABLE_KEY"])
        seen = len(fake.requests)
    printed = capsys.readouterr().out.strip().splitlines()
    assert code == 1
    assert len(printed) == 1, printed
    assert printed[0].startswith(f"POST {base}/chat/completions answered {status} (")
    assert "the server refuses the key: check --api-key-env" in printed[0]
    assert seen == 1
    written = out.read_text("utf-8")
    assert KEY not in written
    assert KEY not in printed[0]
    assert KEY[:20] not in written


def test_a_server_that_answers_is_checked(tmp_path: Path) -> None:
    """The verdict is for servers that cannot be checked: one that answers gets its checks."""
    with FakeProviderServer() as fake:
        fake.handler = scenario_handler("tools")
        out = tmp_path / "report.json"
        argv = ["conformance", "--base-url", f"{fake.base_url}/v1", "--model", "m"]
        code = main([*argv, "--only", "answers", "--out", str(out)])
    data = json.loads(out.read_text("utf-8"))
    assert code == 0
    assert "verdict" not in data
    assert {r["check"] for r in data["results"]} >= {"A1", "A2"}


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("notaurl", "needs http:// or https:// and a host"),
        ("http://", "needs http:// or https:// and a host"),
        ("ftp://127.0.0.1:8080/v1", "needs http:// or https:// and a host"),
        ("http://[::1", "is not a URL"),
        ("https://user:pw-SECRET@127.0.0.1:99999/v1?key=SECRET", "has no such port (99999"),
        ("http://127.0.0.1:0/v1", "has no such port (0"),
    ],
)
@pytest.mark.parametrize("command", [[], ["probe"]])
def test_a_base_url_requests_cannot_go_to_is_a_usage_error(
    url: str, problem: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["conformance", *command, "--base-url", url, "--model", "m"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert f"--base-url {problem}" in captured.err
    assert "SECRET" not in captured.err
