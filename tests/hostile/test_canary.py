"""A canary API key against every output channel: servers that echo the key back (in error
messages, codes and types, in-stream errors, malformed frames, redirects) must never get it
into an exception and its chain, a log line (DEBUG, httpx and httpcore included), the CLI's
output in any mode, a session file, a conformance report or a recording."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentfsm import UserMessage
from agentfsm.adapters.providers import ProviderError, RetryPolicy, Router, Timeouts
from agentfsm.cli import main
from agentfsm.conformance._frames import chunk, event
from agentfsm.testing import FakeProviderServer, RecordedRequest, Reply
from agentfsm.testing._hostile import deep_json, echo_key_error

from ._provider import Wire, adapter, measured

KEY = f"sk-canary-{uuid.uuid4().hex}"
MARK = KEY.split("-")[-1]
"""What is searched for: the key's random part (any 16 characters of it would do)."""
FAST = Timeouts(connect=2, first_byte=5, idle=5, terminal_grace=0.3, total=5)
RETRY = RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=0.02, jitter=0)


class Haystack:
    """Every text an output channel produced, by where it came from."""

    def __init__(self) -> None:
        self.places: list[tuple[str, str]] = []

    def add(self, where: str, text: str) -> None:
        self.places.append((where, text))

    def add_error(self, where: str, error: BaseException) -> None:
        """The error, its chain (cause and context, recursively), args and attributes."""
        seen: set[int] = set()
        todo: list[tuple[str, BaseException]] = [(where, error)]
        while todo:
            label, item = todo.pop()
            if id(item) in seen:
                continue
            seen.add(id(item))
            self.add(f"{label} str", str(item))
            self.add(f"{label} repr", repr(item))
            for n, arg in enumerate(item.args):
                self.add(f"{label} args[{n}]", f"{arg!s} {arg!r}")
            for name, value in vars(item).items():
                if not isinstance(value, BaseException):
                    self.add(f"{label} .{name}", f"{value!s} {value!r}")
            for link in ("__cause__", "__context__"):
                linked = getattr(item, link)
                if linked is not None:
                    todo.append((f"{label}.{link}", linked))

    def add_logs(self, where: str, records: list[logging.LogRecord]) -> None:
        """Log records at every level. httpcore's DEBUG trace of the *response* headers shows
        what the server sent (an echoing server's own bytes), not anything this library
        wrote: it is left out. Request headers are never logged by httpx or httpcore."""
        for record in records:
            text = record.getMessage()
            if record.name.startswith("httpcore") and text.startswith(
                "receive_response_headers.complete"
            ):
                continue
            if record.exc_info and record.exc_info[1] is not None:
                self.add_error(f"{where} log exception", record.exc_info[1])
            self.add(f"{where} log {record.name}", text)

    def add_tree(self, where: str, folder: Path) -> None:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                self.add(f"{where} {path.name}", path.read_text("utf-8", errors="replace"))

    def hits(self) -> list[str]:
        return [where for where, text in self.places if MARK in text]


@pytest.fixture(scope="module")
def haystack() -> Iterator[Haystack]:
    stack = Haystack()
    yield stack
    print(f"\ncanary: {len(stack.places)} places searched, {len(stack.hits())} hits")


def _echo_replies(wire: Wire, other: str) -> list[tuple[str, Reply]]:
    key_text = {"content-type": "text/plain"}
    if wire == "anthropic":
        in_stream = Reply.sse(
            [
                event("message_start", {"message": {"usage": {}}}),
                event("error", {"error": {"type": KEY, "message": f"bad key {KEY}"}}),
            ]
        )
    else:
        in_stream = Reply.sse(
            [
                chunk({"content": "hi"}),
                f'data: {{"error": {{"message": "{KEY}", "code": "{KEY}"}}}}\n\n',
            ]
        )
    replies = [
        (f"{status} echoing the key", echo_key_error(KEY, status, wire=wire))
        for status in (400, 401, 403, 404, 413, 429, 500, 503, 529)
    ]
    replies += [
        ("plain-text 401 echoing the key", Reply.raw(f"no such key: {KEY}", 401, key_text)),
        ("masked key in a 401", Reply.raw(f"key {KEY[:12]}***{KEY[-8:]} invalid", 401, key_text)),
        ("in-stream error echoing the key", in_stream),
        ("malformed frame holding the key", Reply.sse([f"data: not json {KEY}\n\n"])),
        ("deep JSON 400 with the key", Reply.raw(deep_json(5000, f'"{KEY}"'), 400, key_text)),
        ("gzip 403 echoing the key", Reply.gzipped(echo_key_error(KEY, 403, wire=wire))),
        ("redirect elsewhere with the key", Reply.redirect(f"{other}/steal?key={KEY}")),
        ("wrong types holding the key", Reply.json({"choices": KEY, "content": {"a": KEY}})),
    ]
    return replies


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("wire", ["openai-chat", "anthropic"])
async def test_adapters_never_show_the_key(
    wire: Wire, stream: bool, haystack: Haystack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with FakeProviderServer() as server, FakeProviderServer() as other:
        for name, reply in _echo_replies(wire, other.base_url):
            server.handler = lambda request, reply=reply: reply  # retries see the same
            chat = adapter(
                server.base_url, wire, stream=stream, api_key=KEY, timeouts=FAST, retry=RETRY
            )

            async def call(chat: Any = chat) -> Any:
                try:
                    return await chat([UserMessage("hi")], [])
                finally:
                    await chat.aclose()

            row, outcome = await measured(f"canary {wire} stream={stream}: {name}", call)
            assert isinstance(outcome, ProviderError), row.outcome
            haystack.add_error(f"{wire}/{stream}/{name}", outcome)
        assert all(MARK not in str(r.headers) for r in other.requests)
    haystack.add_logs(f"{wire}/{stream}", caplog.records)
    assert haystack.hits() == [], haystack.hits()[:10]


async def test_router_warnings_never_show_the_key(
    haystack: Haystack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with FakeProviderServer() as first, FakeProviderServer() as second:
        first.handler = lambda request: echo_key_error(KEY, 500)
        second.handler = lambda request: echo_key_error(KEY, 429)
        chats = [
            adapter(s.base_url, stream=False, api_key=KEY, timeouts=FAST, retry=RETRY)
            for s in (first, second)
        ]
        router = Router(chats)
        row, outcome = await measured(
            "canary: router over two echoing servers", lambda: router([], [])
        )
        for chat in chats:
            await chat.aclose()
    assert isinstance(outcome, ProviderError), row.outcome
    haystack.add_error("router", outcome)
    haystack.add_logs("router", caplog.records)
    assert any("retrying" in r.getMessage() for r in caplog.records)
    assert haystack.hits() == [], haystack.hits()[:10]


def _cli_handler(request: RecordedRequest) -> Reply:
    """Each run gets a different echoing failure, chosen by the prompt."""
    prompt = json.dumps(request.json())
    if "stream-error" in prompt:
        return Reply.sse(
            [chunk({"content": "hi"}), f'data: {{"error": {{"message": "{KEY}"}}}}\n\n']
        )
    if "rate" in prompt:  # retried (and warned about) until the attempts run out
        error = {"error": {"message": f"slow down {KEY}", "code": KEY, "type": KEY}}
        return Reply.json(error, 429, {"retry-after": "0"})
    return echo_key_error(KEY, 401)


@pytest.mark.parametrize("mode", ["human", "--json", "--quiet"])
@pytest.mark.parametrize("prompt", ["auth", "rate", "stream-error"])
def test_the_cli_never_shows_the_key(
    mode: str,
    prompt: str,
    tmp_path: Path,
    haystack: Haystack,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("CANARY_KEY", KEY)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    workspace = tmp_path / "project"
    workspace.mkdir()
    sessions = tmp_path / "sessions"
    with FakeProviderServer() as server:
        server.handler = _cli_handler
        argv = [
            "run",
            f"say {prompt}",
            "--workspace",
            str(workspace),
            "--no-sandbox",
            "--provider",
            "openai-compatible",
            "--base-url",
            f"{server.base_url}/v1",
            "--model",
            "m",
            "--api-key-env",
            "CANARY_KEY",
            "--session-dir",
            str(sessions),
            "--max-turns",
            "1",
        ]
        if mode != "human":
            argv.append(mode)
        code = main(argv)
    out = capsys.readouterr()
    assert code != 0
    where = f"cli {mode} {prompt}"
    haystack.add(f"{where} stdout", out.out)
    haystack.add(f"{where} stderr", out.err)
    haystack.add_logs(where, caplog.records)
    haystack.add_tree(f"{where} session", sessions)
    assert any(path.is_file() for path in sessions.rglob("*"))
    assert haystack.hits() == [], haystack.hits()[:10]


@pytest.mark.parametrize("status", [401, 400])
def test_conformance_reports_never_show_the_key(
    status: int,
    tmp_path: Path,
    haystack: Haystack,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("CANARY_KEY", KEY)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    with FakeProviderServer() as server:
        server.handler = lambda request: Reply.json(
            {"error": {"message": f"key {KEY}", "code": KEY, "type": KEY}},
            status,
            {"x-echo-key": KEY, "set-cookie": f"k={KEY}", "x-request-id": "req_1"},
        )
        main(
            [
                "conformance",
                "--base-url",
                f"{server.base_url}/v1",
                "--model",
                "m",
                "--api-key-env",
                "CANARY_KEY",
                "--out",
                str(out_dir / "report.json"),
                "--markdown",
                str(out_dir / "report.md"),
                "--record",
                str(out_dir / "recordings"),
            ]
        )
    out = capsys.readouterr()
    haystack.add("conformance stdout", out.out)
    haystack.add("conformance stderr", out.err)
    haystack.add_logs("conformance", caplog.records)
    haystack.add_tree("conformance", out_dir)
    report = json.loads((out_dir / "report.json").read_text("utf-8"))
    if status == 401:  # the key refused: one verdict, with the server's words
        assert report["verdict"].startswith(f"POST {server.base_url}/v1/chat/completions")
    else:  # every check run, and recorded
        assert report["results"]
        assert list((out_dir / "recordings").glob("*.json"))  # one wire fixture per exchange
    assert haystack.hits() == [], haystack.hits()[:10]


def test_the_search_would_find_a_leak(haystack: Haystack) -> None:
    """The haystack is searched for real: a planted key is found (then removed)."""
    probe = Haystack()
    probe.add_error("planted", RuntimeError(f"oops {KEY}"))
    assert probe.hits() == ["planted str", "planted repr", "planted args[0]"]
    assert len(haystack.places) > 100
