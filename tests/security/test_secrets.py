"""API keys stay out of tracebacks, reprs and logs.

Each failure (401, 500, 400, an error inside a stream, a stream cut short, a closed port, a
timeout) is caused for real against a server on 127.0.0.1 through ``OpenAIChat``,
``AnthropicChat`` and a ``Router`` over both, and the ``ProviderError`` is then probed the
way error reporters read it: every local of every traceback frame of the error and of its
cause/context chain (``repr``, and ``vars()`` a few levels deep, as a serializer that walks
objects would), ``traceback.TracebackException(capture_locals=True)``, rich's
``Traceback(show_locals=True)``, a real ``pytest --showlocals`` run, and the error's own
``str``, ``repr``, ``__dict__`` and pickle. The HTTP libraries' ``DEBUG`` records are
checked too.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import pickle
import secrets
import socket
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
from rich.console import Console
from rich.traceback import Traceback

from agentfsm import ToolSpec, UserMessage
from agentfsm.adapters.providers import (
    AnthropicChat,
    OpenAIChat,
    OpenAIResponses,
    ProviderError,
    RetryPolicy,
    Router,
    Secret,
    SecretsFilter,
    Timeouts,
)
from agentfsm.conformance._frames import event, openai_url, response_event
from agentfsm.engine._protocols import ChatFn
from agentfsm.testing import Drop, FakeProviderServer, Reply

from .tally import AttackTally

KIND = "secret in traceback"
LOG_KIND = "secret in log record"
TOOLS = [ToolSpec("lookup", "Look up.", {"type": "object", "properties": {}})]
FAST = Timeouts(connect=1, first_byte=0.5, idle=0.5, terminal_grace=0.2, total=5)
SRC = Path(__file__).resolve().parents[2] / "src"


def new_key() -> str:
    return f"sk-agentfsm-TEST-{secrets.token_hex(16)}"


@pytest.fixture
def key() -> str:
    return new_key()


def _error_body(key: str, status: int) -> Reply:
    message = f"Incorrect API key provided: {key}"
    return Reply.json(
        {"type": "error", "error": {"type": "authentication_error", "message": message}},
        status,
        headers={"x-echo-key": key},
    )


def _openai_stream_error(key: str) -> Reply:
    chunk = '{"choices":[{"index":0,"delta":{"content":"Hel"}}]}'
    error = '{"error":{"message":"overloaded ' + key + '","type":"server_error"}}'
    return Reply.sse([f"data: {chunk}\n\n", f"data: {error}\n\n"])


def _anthropic_stream_error(key: str) -> Reply:
    start = {"message": {"id": "m", "model": "m", "usage": {}}}
    block = {"index": 0, "content_block": {"type": "text", "text": ""}}
    delta = {"index": 0, "delta": {"type": "text_delta", "text": "Hel"}}
    error = {"error": {"type": "overloaded_error", "message": f"overloaded {key}"}}
    return Reply.sse(
        [
            event("message_start", start),
            event("content_block_start", block),
            event("content_block_delta", delta),
            event("error", error),
        ]
    )


def _cut_stream(wire: str) -> Reply:
    if wire == "openai":
        chunk = '{"choices":[{"index":0,"delta":{"content":"Hel"}}]}'
        return Reply.sse([f"data: {chunk}\n\n", Drop()])
    start = {"message": {"id": "m", "model": "m", "usage": {}}}
    return Reply.sse([event("message_start", start), Drop()])


def replies(scenario: str, wire: str, key: str) -> list[Reply]:
    """The server's answers for one scenario (enough for every retry)."""
    if scenario == "401":
        return [_error_body(key, 401)]
    if scenario == "500":
        return [_error_body(key, 500)] * 2
    if scenario == "400":
        return [_error_body(key, 400)]
    if scenario == "stream error":
        return [_openai_stream_error(key) if wire == "openai" else _anthropic_stream_error(key)]
    if scenario == "stream cut":
        return [_cut_stream(wire)]
    if scenario == "timeout":
        return [Reply.stall(3)] * 2
    raise AssertionError(scenario)


SCENARIOS = ["401", "500", "400", "stream error", "stream cut", "timeout", "closed port"]


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def adapter(
    wire: str, base_url: str, key: str, name: str | None = None
) -> OpenAIChat | AnthropicChat:
    options: dict[str, Any] = {
        "base_url": base_url,
        "api_key": key,
        "timeouts": FAST,
        "retry": RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=0.02, jitter=0),
        "name": name,
    }
    if wire == "openai":
        return OpenAIChat("m", **options)
    return AnthropicChat("m", **options)


async def provoke(scenario: str, wire: str, key: str) -> ProviderError:
    """Cause ``scenario`` for real on ``wire`` (``openai``, ``anthropic``, or ``router``:
    OpenAI then Anthropic, both failing) and return the error the caller catches."""
    wires = ["openai", "anthropic"] if wire == "router" else [wire]
    servers = [FakeProviderServer() for _ in wires]
    chats: list[OpenAIChat | AnthropicChat] = []
    try:
        for w, server in zip(wires, servers, strict=True):
            if scenario == "closed port":
                base = closed_port()
            else:
                server.start()
                server.enqueue(*replies(scenario, w, key))
                base = server.base_url
            chats.append(adapter(w, base, key, name=w))
        chat: ChatFn = Router(chats) if wire == "router" else chats[0]
        with pytest.raises(ProviderError) as caught:
            await chat([UserMessage("hi")], TOOLS)
        return library_frames_only(caught.value)
    finally:
        for made in chats:
            await made.aclose()
        for server in servers:
            server.stop()


def library_frames_only(error: ProviderError) -> ProviderError:
    """``error`` with its traceback starting at the first frame of agentfsm's code: the
    frames of this test (which holds the key it passed) are the caller's own business."""
    tb = error.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith(str(SRC)):
        tb = tb.tb_next
    assert tb is not None
    return error.with_traceback(tb)


# -- the probes ----------------------------------------------------------------------------


def chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    stack = [error]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)


def frames(error: BaseException) -> Iterator[tuple[str, dict[str, Any]]]:
    for exc in chain(error):
        tb: TracebackType | None = exc.__traceback__
        while tb is not None:
            yield tb.tb_frame.f_code.co_qualname, dict(tb.tb_frame.f_locals)
            tb = tb.tb_next


def _safe_repr(value: object) -> str:
    try:
        return repr(value)
    except Exception as exc:  # a repr that fails shows nothing of the value
        return f"<repr failed: {type(exc).__name__}>"


def _members(value: object) -> list[object]:
    if isinstance(value, dict):
        return [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    if isinstance(value, (str, bytes, int, float, bool, type(None))):
        return []
    out: list[object] = []
    with contextlib.suppress(TypeError):
        out.extend(vars(value).values())
    for cls in type(value).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if slot not in ("__weakref__", "__dict__"):
                out.append(getattr(value, slot, None))
    return out


def walk(value: object, needle: str, depth: int) -> list[str]:
    """Where ``needle`` shows in ``repr`` of ``value`` or of what it holds, ``depth``
    levels of ``vars()``/slots/containers down."""
    found: list[str] = []
    seen: set[int] = set()
    todo: list[tuple[object, int, str]] = [(value, 0, "")]
    while todo:
        current, level, path = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if needle in _safe_repr(current):
            found.append(f"{path}: {type(current).__name__}")
        if level < depth and len(seen) < 20_000:
            todo.extend((m, level + 1, f"{path}/{type(m).__name__}") for m in _members(current))
    return found


def probe_frames(error: ProviderError, needle: str) -> list[str]:
    leaks: list[str] = []
    for where, names in frames(error):
        for name, value in names.items():
            leaks.extend(f"{where}.{name}{hit}" for hit in walk(value, needle, 4))
    return leaks


def probe_capture_locals(error: ProviderError, needle: str) -> str:
    text = "".join(traceback.TracebackException.from_exception(error, capture_locals=True).format())
    assert "ProviderError" in text
    return text if needle in text else ""


def probe_rich(error: ProviderError, needle: str) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(
        Traceback.from_exception(
            type(error), error, error.__traceback__, show_locals=True, locals_max_length=1000
        )
    )
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "ProviderError" in text
    return text if needle in text else ""


def probe_sentry(error: ProviderError, needle: str) -> str:
    """Sentry's event for the error with local variables (its default), or, without the SDK,
    its serializer's reading: ``repr`` of each local, containers walked."""
    try:
        from sentry_sdk.utils import event_from_exception  # type: ignore[import-not-found]
    except ImportError:
        parts = []
        for _, names in frames(error):
            for value in names.values():
                parts.append(_safe_repr(value))
                parts.extend(_safe_repr(m) for m in _members(value))
        text = "\n".join(parts)
    else:
        event_data, _ = event_from_exception(
            (type(error), error, error.__traceback__),
            client_options={"include_local_variables": True},
        )
        text = repr(event_data)
    return text if needle in text else ""


def probe_error_itself(error: ProviderError, needle: str) -> str:
    text = " ".join(
        [str(error), repr(error), repr(error.__dict__), repr(error.args), repr(pickle.dumps(error))]
    )
    return text if needle in text else ""


PROBES: dict[str, Callable[[ProviderError, str], object]] = {
    "frames": probe_frames,
    "capture_locals": probe_capture_locals,
    "rich show_locals": probe_rich,
    "sentry": probe_sentry,
    "str/repr/__dict__/pickle": probe_error_itself,
}


@pytest.mark.parametrize("wire", ["openai", "anthropic", "router"])
@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_a_provider_error_holds_no_key(
    scenario: str, wire: str, key: str, attacks: AttackTally
) -> None:
    error = await provoke(scenario, wire, key)
    needle = key.rsplit("-", 1)[1]  # the random part: any copy of the key holds it
    for name, probe in PROBES.items():
        leak = probe(error, needle)
        attacks.record(KIND, bool(leak), f"{wire} {scenario} {name}: {str(leak)[:300]}")


ECHO_TAILS = ["error event", "error event naming the key", "malformed frame", "cut", "end"]


def _echoing_stream(wire: str, key: str, tail: str) -> Reply:
    """A 200 stream whose first event echoes the key in a field the reader keeps or
    ignores, then ``tail``: what makes the reader raise while it holds that event."""
    message = "bad key " + key if tail == "error event naming the key" else "overloaded"
    if wire == "openai":
        delta = {} if tail == "end" else {"content": "Hel"}  # a stream that ends: no answer
        echo = {"choices": [{"index": 0, "delta": delta}], "x_echo": key}
        frames: list[Any] = [f"data: {json.dumps(echo)}\n\n"]
        error = f"data: {json.dumps({'error': {'message': message, 'type': 'server_error'}})}\n\n"
    elif wire == "anthropic":
        frames = [event("message_start", {"message": {"id": key, "model": "m", "usage": {}}})]
        error = event("error", {"error": {"type": "overloaded_error", "message": message}})
    else:
        head = {"id": key, "status": "in_progress", "model": "m"}
        frames = [response_event("response.created", {"response": head})]
        error = response_event("error", {"code": "server_error", "message": message})
    if tail.startswith("error event"):
        frames.append(error)
    elif tail == "malformed frame":
        frames.append("data: {not json\n\n")
    elif tail == "cut":
        frames.append(Drop())
    return Reply.sse(frames)


def _echoing_body(wire: str, key: str) -> Reply:
    """A 200 JSON body that echoes the key, then fails the reader's shape check."""
    if wire == "openai":
        return Reply.json({"id": key, "choices": "not a list"})
    if wire == "anthropic":
        return Reply.json({"id": key, "type": "message", "content": "not a list"})
    return Reply.json({"id": key, "status": "completed", "output": "not a list"})


@pytest.mark.parametrize("wire", ["openai", "anthropic", "responses"])
async def test_a_key_echoed_in_a_stream_event_stays_out_of_the_error_frames(
    wire: str, key: str, attacks: AttackTally
) -> None:
    """The raw event (and the body) a reader holds while it raises is not left in the
    frames of the error the caller gets."""
    needle = key.rsplit("-", 1)[1]
    cases = [(tail, _echoing_stream(wire, key, tail)) for tail in ECHO_TAILS]
    cases.append(("JSON body", _echoing_body(wire, key)))
    for tail, reply in cases:
        with FakeProviderServer() as server:
            server.enqueue(reply, reply)  # the retry sees the same answer
            options: dict[str, Any] = {
                "api_key": key,
                "timeouts": FAST,
                "retry": RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=0.02, jitter=0),
                "stream": tail != "JSON body",
            }
            chat: OpenAIChat | AnthropicChat | OpenAIResponses
            if wire == "openai":
                chat = OpenAIChat("m", base_url=openai_url(server), **options)
            elif wire == "anthropic":
                chat = AnthropicChat("m", base_url=server.base_url, **options)
            else:
                chat = OpenAIResponses("m", base_url=openai_url(server), **options)
            try:
                with pytest.raises(ProviderError) as caught:
                    await chat([UserMessage("hi")], TOOLS)
            finally:
                await chat.aclose()
        assert server.requests, tail  # the error came from reading this answer
        assert caught.value.status in (200, None), (tail, caught.value)
        error = library_frames_only(caught.value)
        for name, probe in PROBES.items():
            leak = probe(error, needle)
            attacks.record(KIND, bool(leak), f"{wire} echo, {tail}, {name}: {str(leak)[:300]}")


def test_the_probes_find_a_key_left_in_a_frame(key: str) -> None:
    """The probes are not blind: a key held by a local, a headers dict or an object's
    attribute is found."""

    class Holder:
        def __init__(self) -> None:
            self.headers = {"x-api-key": key}

    def fails(holder: Holder, api_key: str) -> None:
        raise ProviderError("auth", "no")

    needle = key.rsplit("-", 1)[1]
    with pytest.raises(ProviderError) as caught:
        fails(Holder(), key)
    error = caught.value
    assert probe_frames(error, needle)
    assert probe_capture_locals(error, needle)
    assert probe_rich(error, needle)
    assert probe_sentry(error, needle)
    hidden = Secret(key)
    assert not walk(hidden, needle, 6)
    assert hidden.reveal() == key


def test_reprs_of_adapters_and_secrets_hide_the_key(key: str, attacks: AttackTally) -> None:
    needle = key.rsplit("-", 1)[1]
    objects: list[object] = [
        OpenAIChat("m", api_key=key, headers={"api-key": key, "x-other": "1"}),
        AnthropicChat("m", api_key=key),
        Secret(key),
    ]
    objects.append(Router([objects[0], objects[1]]))  # type: ignore[list-item]
    for value in objects:
        for text in (repr(value), str(value)):
            attacks.record(KIND, needle in text, f"repr of {type(value).__name__}: {text}")
        leaks = walk(value, needle, 6)
        attacks.record(KIND, bool(leaks), f"vars of {type(value).__name__}: {leaks[:3]}")
    with pytest.raises(TypeError):
        pickle.dumps(Secret(key))


async def test_the_key_is_sent_and_a_non_ascii_key_is_refused(
    key: str, attacks: AttackTally
) -> None:
    with FakeProviderServer() as server:
        server.enqueue(Reply.json({"choices": [{"message": {"content": "ok"}}]}))
        server.enqueue(Reply.json({"content": [{"type": "text", "text": "ok"}]}))
        server.enqueue(Reply.json({"choices": [{"message": {"content": "ok"}}]}))
        chats: list[OpenAIChat | AnthropicChat] = [
            OpenAIChat("m", base_url=server.base_url, api_key=key, stream=False),
            AnthropicChat("m", base_url=server.base_url, api_key=Secret(key), stream=False),
            OpenAIChat("m", base_url=server.base_url, headers={"Api-Key": key}, stream=False),
        ]
        for chat in chats:
            await chat([UserMessage("hi")], [])
            await chat.aclose()
    sent = [r.headers for r in server.requests]
    assert sent[0]["authorization"] == f"Bearer {key}"
    assert sent[1]["x-api-key"] == key
    assert sent[2]["api-key"] == key
    odd = OpenAIChat("m", base_url=closed_port(), api_key=key + "\u00e9\udcff")
    with pytest.raises(ProviderError, match="printable ASCII") as caught:
        await odd([UserMessage("hi")], [])
    await odd.aclose()
    assert caught.value.kind == "auth"
    needle = key.rsplit("-", 1)[1]
    error = library_frames_only(caught.value)
    for name, probe in PROBES.items():
        leak = probe(error, needle)
        attacks.record(KIND, bool(leak), f"non-ASCII key {name}: {str(leak)[:300]}")


PYTEST_FILE = """
import os

import pytest

from agentfsm import UserMessage
from agentfsm.adapters.providers import AnthropicChat, OpenAIChat, RetryPolicy, Router
from agentfsm.testing import FakeProviderServer, Reply


def error_reply():
    message = "Incorrect API key provided: " + os.environ["AGENTFSM_TEST_KEY"]
    return Reply.json({"type": "error", "error": {"type": "x", "message": message}}, 401)


def make(cls, url):
    # The key goes from the environment straight to the adapter: no frame of this file
    # holds it (what --showlocals prints of this file's frames is this file's business).
    return cls("m", base_url=url, api_key=os.environ["AGENTFSM_TEST_KEY"], retry=RetryPolicy(max_attempts=1))


@pytest.mark.parametrize("wire", ["openai", "anthropic", "router"])
def test_fails(wire):
    import asyncio

    with FakeProviderServer() as server:
        server.enqueue(error_reply(), error_reply())
        first = make(AnthropicChat if wire == "anthropic" else OpenAIChat, server.base_url)
        chat = Router([first, make(AnthropicChat, server.base_url)]) if wire == "router" else first
        asyncio.run(chat([UserMessage("hi")], []))
"""


def test_pytest_showlocals_prints_no_key(tmp_path: Path, key: str, attacks: AttackTally) -> None:
    (tmp_path / "test_leak.py").write_text(PYTEST_FILE, "utf-8")
    env = {**os.environ, "AGENTFSM_TEST_KEY": key, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--showlocals",
            "--tb=long",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-q",
            str(tmp_path / "test_leak.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = done.stdout + done.stderr
    assert output.count("ProviderError") >= 3, output[-3000:]  # each of the tests failed
    assert "3 failed" in output, output[-3000:]
    needle = key.rsplit("-", 1)[1]
    attacks.record(KIND, needle in output, f"pytest --showlocals: {output[-2000:]}")


# -- logs ----------------------------------------------------------------------------------

DEBUG_LOGGERS = ("httpx", "httpcore", "agentfsm.providers")


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    for name in DEBUG_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_debug_records_of_the_http_libraries_hold_no_key(
    wire: str, key: str, debug_logs: pytest.LogCaptureFixture, attacks: AttackTally
) -> None:
    needle = key.rsplit("-", 1)[1]
    for scenario in ("401", "500", "stream error", "timeout", "closed port"):
        debug_logs.clear()
        await provoke(scenario, wire, key)
        records = [r for r in debug_logs.records if r.name.split(".")[0] in ("httpx", "httpcore")]
        if scenario != "closed port":
            # The servers echoed the key in a response header, which httpcore logs.
            assert any("receive_response_headers" in r.getMessage() for r in records)
        for record in debug_logs.records:
            text = record.getMessage()
            attacks.record(LOG_KIND, needle in text, f"{wire} {scenario} {record.name}: {text}")


def test_the_filter_redacts_a_live_key_and_its_bearer_form(key: str) -> None:
    chat = OpenAIChat("m", api_key=key)
    record = logging.LogRecord(
        "httpcore.http11",
        logging.DEBUG,
        __file__,
        1,
        "sent %s and %r",
        (f"Bearer {key}", key.encode()),
        None,
    )
    assert SecretsFilter().filter(record)
    message = record.getMessage()
    assert key not in message
    assert key[:16] not in message
    assert "[redacted]" in message
    assert chat is not None
    plain = logging.LogRecord("httpx", logging.INFO, __file__, 1, "nothing %s", ("here",), None)
    SecretsFilter().filter(plain)
    assert plain.args == ("here",)
    # Installed on the HTTP loggers, child ones included.
    for name in ("httpx", "httpcore", "httpcore.http11", "httpcore.connection", "hpack.hpack"):
        assert any(isinstance(f, SecretsFilter) for f in logging.getLogger(name).filters), name
