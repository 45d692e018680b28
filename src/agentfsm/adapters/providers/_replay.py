"""Replaying recorded provider exchanges (the bundled corpus, or a ``--record`` folder).

``ReplayTransport`` serves the recorded responses of one file, in order, whatever the
requests; adapters run on it exactly as on the network.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from attrs import frozen

__all__ = [
    "RecordedResponse",
    "ReplayTransport",
    "WireFixture",
    "fixture_body",
    "fixture_wire",
    "load_wire_fixture",
    "path_wire",
]

_DROP_HEADERS = {"content-encoding", "content-length", "transfer-encoding", "connection"}


@frozen
class RecordedResponse:
    """One recorded HTTP response."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    whole: bool = True
    """The body is all the server sent, as it meant it; ``False`` when a recording cut it
    (``truncated``), kept it in a content encoding (``encoded``), or holds it only up to
    where the reader left or the connection broke (``complete: false``)."""


@frozen
class WireFixture:
    """A recorded file: what it is, and its responses."""

    path: Path
    provider: str
    api: str
    streaming: bool
    responses: tuple[RecordedResponse, ...]
    name: str = ""
    """How reports name the exchange: a fixture's ``id``, else ``folder/file``."""
    uris: tuple[str, ...] = ()
    """The recorded requests' URIs (none when the file records responses only)."""
    declared_wire: str | None = None
    """The file's own ``wire`` field (``agentfsm.wire-fixture/1``), when it has one."""
    declares_wire: bool = False
    """Whether the file has a ``wire`` field (it may say ``null``: no adapter reads it)."""

    @property
    def label(self) -> str:
        return self.name or f"{self.path.parent.name}/{self.path.name}"


def _headers(raw: Any) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    if isinstance(raw, dict):
        for name, value in raw.items():
            values = value if isinstance(value, list) else [value]
            for item in values:
                if str(name).lower() not in _DROP_HEADERS:
                    out.append((str(name), str(item)))
    return tuple(out)


def _body(raw: Any) -> bytes:
    if isinstance(raw, dict):
        raw = raw.get("string", raw.get("body", ""))
    if isinstance(raw, bytes):
        return raw
    if raw is None:
        return b""
    if not isinstance(raw, str):
        return json.dumps(raw).encode()
    return raw.encode("utf-8")


def _sse_from_lines(text: str) -> bytes:
    """Stream payloads one a line (SSE framing stripped) framed again, ``[DONE]`` closing."""
    lines = [line for line in text.splitlines() if line.strip()]
    return ("".join(f"data: {line}\n\n" for line in lines) + "data: [DONE]\n\n").encode()


def fixture_body(data: bytes) -> dict[str, str]:
    """A body as a fixture holds it: UTF-8 text when it decodes, else base64 (the bytes
    exactly); :func:`_fixture_body` reads it back."""
    try:
        return {"encoding": "utf-8", "text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"encoding": "base64", "base64": base64.b64encode(data).decode("ascii")}


def _fixture_body(raw: Any) -> bytes:
    if raw is None:
        return b""
    if raw.get("encoding") == "base64":
        return base64.b64decode(raw["base64"])
    return str(raw["text"]).encode("utf-8")


def _from_json(file: Path) -> WireFixture:
    """An ``agentfsm.wire-fixture/1`` file (the bundled corpus; see docs/conformance.md)."""
    data = json.loads(file.read_text("utf-8"))
    if not isinstance(data, Mapping) or not str(data.get("format", "")).startswith(
        "agentfsm.wire-fixture/"
    ):
        raise ValueError(f"{file} is not an agentfsm wire fixture")
    responses = []
    for interaction in data["interactions"]:
        response = interaction["response"]
        body = _fixture_body(response.get("body"))
        if response.get("framing") == "sse-data-lines":
            body = _sse_from_lines(body.decode("utf-8"))
        pairs = response.get("headers") or []
        headers = tuple((str(k), str(v)) for k, v in pairs if str(k).lower() not in _DROP_HEADERS)
        whole = not response.get("truncated") and not response.get("encoded")
        whole = whole and response.get("complete", True) is not False
        responses.append(RecordedResponse(int(response["status"]), headers, body, whole))
    wire = data.get("wire")
    return WireFixture(
        file,
        str(data["provider"]),
        str(data["api"]),
        bool(data["streaming"]),
        tuple(responses),
        str(data["id"]),
        _uris(data["interactions"]),
        str(wire) if wire is not None else None,
        "wire" in data,
    )


def _uris(interactions: Any) -> tuple[str, ...]:
    requests = [i.get("request") for i in interactions or [] if isinstance(i, Mapping)]
    return tuple(str(r["uri"]) for r in requests if isinstance(r, Mapping) and r.get("uri"))


def load_wire_fixture(path: str | Path) -> WireFixture:
    """Read a ``.json`` wire fixture, a ``.yaml`` cassette, a raw ``.sse`` body, or a
    ``.jsonl`` chunk list.

    ``.jsonl`` files (and fixtures framed ``sse-data-lines``) hold one stream payload per
    line with the SSE framing stripped; it is put back (``data: …`` and a closing
    ``data: [DONE]``).
    """
    file = Path(path)
    provider = file.parent.name
    sse_headers = (("content-type", "text/event-stream"),)
    if file.suffix == ".json":
        return _from_json(file)
    if file.suffix == ".sse":
        return WireFixture(
            file,
            provider,
            "unknown",
            True,
            (RecordedResponse(200, sse_headers, file.read_bytes()),),
        )
    if file.suffix == ".jsonl":
        body = _sse_from_lines(file.read_text("utf-8"))
        return WireFixture(
            file, provider, "unknown", True, (RecordedResponse(200, sse_headers, body),)
        )
    try:
        import yaml
    except ImportError as exc:  # pragma: no cover - dev extra
        raise RuntimeError("reading .yaml fixtures needs PyYAML (pip install pyyaml)") from exc
    data = yaml.safe_load(file.read_text("utf-8"))
    meta = data.get("fixture") or {}
    responses = []
    for interaction in data.get("interactions") or []:
        response = interaction.get("response") or {}
        status = response.get("status")
        code = status.get("code") if isinstance(status, dict) else status
        responses.append(
            RecordedResponse(
                int(code or 200), _headers(response.get("headers")), _body(response.get("body"))
            )
        )
    return WireFixture(
        file,
        str(meta.get("provider", provider)),
        str(meta.get("api", "unknown")),
        bool(meta.get("streaming", False)),
        tuple(responses),
        uris=_uris(data.get("interactions")),
    )


_ANTHROPIC_EVENTS = re.compile(
    rb'^event: *(message_start|content_block_start)\b|"type": *"(message_start|message)"', re.M
)


def path_wire(uri: str) -> str | None:
    """The wire a request path speaks (``…/messages``, ``…/chat/completions``,
    ``…/responses``), else ``None``."""
    path = uri.split("?", 1)[0].rstrip("/")
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/chat/completions"):
        return "openai-chat"
    if path.endswith("/responses"):
        return "openai-responses"
    return None


def fixture_wire(fixture: WireFixture) -> str | None:
    """The wire a recorded file speaks: ``"anthropic"`` (Messages), ``"openai-chat"`` (Chat
    Completions, or an unlabelled stream), ``"openai-responses"`` (the Responses API), or
    ``None`` (Gemini-native …).

    In order: the file's own ``wire`` field; its provider or API (``anthropic``,
    ``messages``, ``responses``); the path of its recorded requests (``…/messages``,
    ``…/chat/completions``, ``…/responses``); another labelled API (no wire); for a body
    without a label, a Messages stream or message (``message_start`` …) is Anthropic's,
    anything else Chat Completions."""
    if fixture.declares_wire:
        return fixture.declared_wire
    if fixture.provider == "anthropic" or fixture.api == "messages":
        return "anthropic"
    if fixture.api == "responses":
        return "openai-responses"
    paths = {path_wire(uri) for uri in fixture.uris} - {None}
    if len(paths) == 1:
        return paths.pop()
    if fixture.provider == "gemini" or fixture.api not in ("chat.completions", "unknown"):
        return None
    if fixture.api == "unknown" and any(
        _ANTHROPIC_EVENTS.search(r.body[:4096]) for r in fixture.responses
    ):
        return "anthropic"
    return "openai-chat"


class ReplayTransport(httpx.AsyncBaseTransport):
    """Serves recorded responses in order; a request past the last one gets a 599."""

    def __init__(self, responses: Sequence[RecordedResponse]) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        index = len(self.requests) - 1
        if index >= len(self.responses):
            return httpx.Response(599, json={"error": {"message": "no recorded response left"}})
        recorded = self.responses[index]
        return httpx.Response(
            recorded.status,
            headers=list(recorded.headers),
            stream=httpx.ByteStream(recorded.body),
            request=request,
        )
