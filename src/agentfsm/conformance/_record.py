"""Recording live exchanges: every request a check sends and its answer, saved replayable.

In live mode with a record folder, every HTTP client the checks use (the raw probes' and the
adapters') sends through a :class:`RecordingTransport`, which passes each request to the
network unchanged and keeps a :class:`Capture` of it: the request and response bytes as
they crossed the wire, the status and the headers. :func:`save_recordings` writes one
``agentfsm.wire-fixture/1`` file per exchange (the format of the bundled corpus), named after
the check that made it, which ``agentfsm conformance corpus`` replays.

What a recording keeps, and what it never does:

- headers: only an allow-list (:data:`REQUEST_HEADERS`, :data:`RESPONSE_HEADERS`); keys,
  cookies and proxy headers such as ``x-litellm-model-api-base`` are never written;
- the API key: scrubbed from the URL, the bodies and the kept header values, with anything
  shaped like a key;
- bodies: at most :data:`RECORD_LIMIT` bytes each (``LiveTarget.record_limit``); past that
  the head is kept and the response is marked ``truncated``. A gzip or deflate body is
  kept decoded; one in another encoding is kept as sent and marked ``encoded``; one the
  reader left before its final record (an abort, a timeout) or that broke off is marked
  ``complete: false``. The corpus leaves those three out: they would replay as another
  answer.

Every context made from the run's target, even with another key (E1), records into the
run's :class:`Recorder`, under the check being run.
"""

from __future__ import annotations

import functools
import json
import re
import ssl
import urllib.request
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from attrs import define, field

from agentfsm.adapters.providers import fixture_body, path_wire, redact

if TYPE_CHECKING:
    from ._context import LiveTarget

__all__ = [
    "RECORD_LIMIT",
    "REQUEST_HEADERS",
    "RESPONSE_HEADERS",
    "Capture",
    "Recorder",
    "RecordingTransport",
    "recorded_header",
    "recording_client",
    "save_recordings",
    "scrub",
]

RECORD_LIMIT = 4 * 1024 * 1024
"""Bytes of one body a recording keeps (request or response, after content decoding)."""
REQUEST_HEADERS = frozenset({"content-type", "accept", "anthropic-version", "anthropic-beta"})
"""Request headers a recording keeps (an allow-list: keys and everything else left out)."""
RESPONSE_HEADERS = frozenset(
    {
        "content-type",
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
        "request-id",
        "x-request-id",
    }
)
"""Response headers a recording keeps: the content type, what the adapters read to decide a
retry, and the request id; anything else (cookies, rate-limit counters, proxy headers such
as ``x-litellm-model-api-base``) is left out."""
FIXTURE_FORMAT = "agentfsm.wire-fixture/1"

_PAIR = re.compile(r'\[\n\s+("(?:[^"\\\n]|\\.)*"),\n\s+("(?:[^"\\\n]|\\.)*")\n\s+\]')
_FINAL = re.compile(rb'^data: *\[DONE\]|"type": *"message_stop"|"finish_reason": *"', re.M)
_KEYLIKE = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|sk-ant-[A-Za-z0-9_\-]{8,}|Bearer\s+\S+)")


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` without the given secrets (or pieces of them) or anything shaped like a key."""
    return _KEYLIKE.sub("[redacted]", redact(text, secrets))


def _scrub_bytes(data: bytes, secrets: tuple[str, ...]) -> bytes:
    """``data`` scrubbed like text, every byte that is not UTF-8 kept as it was."""
    return scrub(data.decode("utf-8", "surrogateescape"), secrets).encode(
        "utf-8", "surrogateescape"
    )


def recorded_header(name: str, *, request: bool = False) -> bool:
    """Whether a recording keeps the header ``name`` (of a response, or of a request)."""
    return name.lower() in (REQUEST_HEADERS if request else RESPONSE_HEADERS)


@define
class Capture:
    """One exchange as it crossed the wire, kept by a :class:`RecordingTransport`."""

    check: str
    """The id of the check that sent it (``live`` outside the runner)."""
    name: str
    """What sent it: ``adapter`` for an adapter call, else the raw probe's name."""
    method: str
    url: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    request_size: int
    """Bytes of the request body; more than ``len(request_body)`` when it was cut."""
    at: str = field(factory=lambda: datetime.now(UTC).isoformat(timespec="milliseconds"))
    status: int | None = None
    """``None`` while no response arrived (then there is nothing to replay)."""
    reason: str | None = None
    headers: list[tuple[str, str]] = field(factory=list)
    body: bytearray = field(factory=bytearray)
    """The response body as received (content-encoded if it was), at most the limit."""
    size: int = 0
    """Bytes of the response body received, kept or not."""
    complete: bool = False
    """The body was read to its end (not left by the reader, nor broken off)."""
    error: str | None = None
    """What broke the body off, if something did."""
    secrets: tuple[str, ...] = ()
    """Keys the request carried, scrubbed from the saved file like the target's."""

    def add(self, chunk: bytes, limit: int) -> None:
        room = limit - len(self.body)
        if room > 0:
            self.body += chunk[:room]
        self.size += len(chunk)


@define
class Recorder:
    """Where a live run's exchanges go: every context made from the run's target (a check
    may make one with another key) adds its captures here, under the current check."""

    captures: list[Capture] = field(factory=list)
    check: str = "live"
    """The id of the check being run: what its exchanges are named after."""


class _Tee(httpx.AsyncByteStream):
    """The response body, passed on chunk by chunk and kept (bounded) in a capture."""

    def __init__(self, inner: httpx.AsyncByteStream, capture: Capture, limit: int) -> None:
        self._inner = inner
        self._capture = capture
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                self._capture.add(chunk, self._limit)
                yield chunk
        except Exception as error:
            self._capture.error = type(error).__name__
            raise
        self._capture.complete = True

    async def aclose(self) -> None:
        await self._inner.aclose()


class RecordingTransport(httpx.AsyncBaseTransport):
    """Sends through ``inner`` and appends a :class:`Capture` of every exchange to
    ``captures`` (the request at once, the response as it is read)."""

    def __init__(
        self,
        captures: list[Capture],
        *,
        check: str,
        name: str,
        inner: httpx.AsyncBaseTransport | None = None,
        limit: int = RECORD_LIMIT,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self.captures = captures
        self.check = check
        self.name = name
        self.limit = limit
        self.secrets = secrets
        self._inner = inner if inner is not None else httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        content = await request.aread()
        capture = Capture(
            self.check,
            self.name,
            request.method,
            str(request.url),
            list(request.headers.multi_items()),
            content[: self.limit],
            len(content),
            secrets=self.secrets,
        )
        self.captures.append(capture)
        response = await self._inner.handle_async_request(request)
        capture.status = response.status_code
        reason = response.extensions.get("reason_phrase")
        capture.reason = reason.decode("ascii", "replace") if isinstance(reason, bytes) else None
        capture.headers = list(response.headers.multi_items())
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Tee(response.stream, capture, self.limit),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()


def _proxy(url: str) -> str | None:
    """The proxy the environment sets for ``url`` (as ``httpx`` would use it), if any."""
    parsed = httpx.URL(url)
    if urllib.request.proxy_bypass(parsed.host):
        return None
    return urllib.request.getproxies().get(parsed.scheme)


def recording_client(
    captures: list[Capture],
    base_url: str,
    timeout: httpx.Timeout,
    *,
    check: str,
    name: str,
    limit: int = RECORD_LIMIT,
    secrets: tuple[str, ...] = (),
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` for ``base_url`` that records every exchange in ``captures``
    (the environment's proxy and CA settings honoured as by a default client); ``secrets``
    are the keys its requests carry."""
    inner = httpx.AsyncHTTPTransport(verify=_ssl_context(), proxy=_proxy(base_url))
    transport = RecordingTransport(
        captures, check=check, name=name, inner=inner, limit=limit, secrets=secrets
    )
    return httpx.AsyncClient(transport=transport, timeout=timeout, trust_env=False)


class _Pieces(httpx.SyncByteStream):
    def __init__(self, data: bytes) -> None:
        self._data = data

    def __iter__(self) -> Iterator[bytes]:
        for start in range(0, len(self._data), 65536):
            yield self._data[start : start + 65536]


def _decoded(capture: Capture, limit: int) -> tuple[bytes, str | None]:
    """The response body without its gzip or deflate encoding (at most a little more than
    ``limit`` bytes), and the coding it is still in, if it is in one."""
    raw = bytes(capture.body)
    codings = [
        c.strip().lower()
        for k, v in capture.headers
        if k.lower() == "content-encoding"
        for c in v.split(",")
    ]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return raw, None
    if not set(codings) <= {"gzip", "deflate"}:
        return raw, ", ".join(codings)
    headers = [("content-encoding", ", ".join(codings))]
    encoded = httpx.Response(200, headers=headers, stream=_Pieces(raw))
    out = bytearray()
    try:
        for piece in encoded.iter_bytes():  # decoded piece by piece: a bomb stops at the limit
            out += piece
            if len(out) > limit:
                break
    except httpx.DecodingError:
        return raw, ", ".join(codings)
    return bytes(out), None


def _plain(text: str) -> str:
    """``text`` fit for a UTF-8 file (a lone surrogate becomes U+FFFD)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _wire(url: str, fallback: str) -> tuple[str, str]:
    """The wire and API a request speaks, from its path."""
    wire = path_wire(httpx.URL(url).path) or fallback
    apis = {"anthropic": "messages", "openai-responses": "responses"}
    return wire, apis.get(wire, "chat.completions")


def _streaming(body: bytes) -> bool:
    try:
        parsed = json.loads(body)
    except ValueError:
        return False
    return isinstance(parsed, dict) and parsed.get("stream") is True


def _document(capture: Capture, folder: Path, stem: str, target: LiveTarget) -> dict[str, Any]:
    assert capture.status is not None
    secrets, limit = (target.api_key or "", *capture.secrets), target.record_limit
    wire, api = _wire(capture.url, target.wire)
    body, coding = _decoded(capture, limit)
    request: dict[str, Any] = {
        "method": capture.method,
        "uri": scrub(capture.url, secrets),
        "headers": [
            [k, scrub(v, secrets)]
            for k, v in capture.request_headers
            if recorded_header(k, request=True)
        ],
        "body": fixture_body(_scrub_bytes(capture.request_body, secrets)),
    }
    if capture.request_size > len(capture.request_body):
        request["truncated"] = True
        request["note"] = f"the first {len(capture.request_body)} of {capture.request_size} bytes"
    headers = [[k, scrub(v, secrets)] for k, v in capture.headers if recorded_header(k)]
    response: dict[str, Any] = {
        "status": capture.status,
        "reason": capture.reason,
        "headers": headers + ([["content-encoding", coding]] if coding else []),
        "framing": "http",
        "body": fixture_body(_scrub_bytes(body[:limit], secrets)),
    }
    notes = []
    if len(body) > limit or capture.size > len(capture.body):
        response["truncated"] = True
        notes.append(f"the body is cut at {limit} bytes (the server sent {capture.size} bytes)")
    if coding:
        response["encoded"] = coding
        notes.append(f"the body is kept as sent, in content-encoding {coding}")
    if not capture.complete:
        ended = f"it broke off ({capture.error})" if capture.error else "the reader left it"
        if capture.error or not _FINAL.search(body):
            response["complete"] = False  # an abort, a timeout, a dropped connection
        else:
            ended += ", after the final record"  # a server that keeps the stream open
        notes.append(f"the body ends where {ended}")
    if notes:
        response["note"] = "; ".join(notes)
    transformations = ["resp:decoded content-encoding"] if capture.body != body else []
    return {
        "format": FIXTURE_FORMAT,
        "id": _plain(f"{folder.name}/{stem}"),
        "provider": _plain(scrub(target.label, secrets)),
        "api": api,
        "wire": wire,
        "streaming": _streaming(capture.request_body),
        "scenario": _plain(f"{capture.check} {capture.name}"),
        "check": _plain(capture.check),
        "genuineness": "recorded by agentfsm conformance --record",
        "evidence": [],
        "quirks": [],
        "source": {"kind": "agentfsm-record", "recorded_at": capture.at},
        "redactions": ["the API key", "headers outside the allow-list"],
        "transformations": transformations,
        "interactions": [{"recorded_at": capture.at, "request": request, "response": response}],
    }


def save_recordings(target: LiveTarget, recordings: Sequence[Capture]) -> list[Path]:
    """One ``agentfsm.wire-fixture/1`` file per exchange that got a response, in
    ``target.record_dir``: ``<stamp>-<number>-<check>-<what>.json`` (a second run saved in
    the same second gets ``<stamp>.2``). A request that got no response (refused, timed out
    before the headers) has nothing to replay and is left out."""
    assert target.record_dir is not None
    folder = Path(target.record_dir)
    folder.mkdir(parents=True, exist_ok=True)
    base = stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    runs = 1
    while any(folder.glob(f"{stamp}-*")):  # another run saved here this second
        runs += 1
        stamp = f"{base}.{runs}"
    written = []
    for number, capture in enumerate(recordings, start=1):
        if capture.status is None:
            continue
        what = capture.name.removeprefix(f"{capture.check}-")
        what = "raw" if what == capture.check else what  # a probe named after its check
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{capture.check}-{what}")[:80]
        stem = f"{stamp}-{number:03d}-{safe}"
        document = _document(capture, folder, stem, target)
        text = _PAIR.sub(r"[\1, \2]", json.dumps(document, indent=2, ensure_ascii=False)) + "\n"
        path = folder / f"{stem}.json"
        path.write_text(text, "utf-8")
        written.append(path)
    return written
