"""The second reading's own view of a recorded body: out of its content encoding, and
whether it is an event stream.

A body kept as the server sent it carries its ``content-encoding`` header; the codings are
undone here in reverse order, the whole body at once: ``gzip`` (``x-gzip``) member after
member (zero bytes padding the end ignored), ``deflate`` zlib-wrapped or raw, ``identity``
nothing. A coding no HTTP client the SDKs use knows is ignored, as they ignore it; ``br``,
``zstd`` and ``compress`` are known codings this reading does not undo (the recording is
then unjudged). A body cut inside a member is what it holds, as a client reads it.

A response is an event stream when its ``content-type`` names ``text/event-stream`` (media
types compared in any case, parameters aside), or, whatever its label, when its body is not
JSON and its first line that is not blank (after a byte order mark) is an SSE comment or a
``data``, ``event``, ``id`` or ``retry`` field: the SDKs read the stream they asked for by
its bytes, so telling a stream by its bytes is the adapter's job, not the recorder's.
"""

from __future__ import annotations

import zlib

from attrs import frozen

from agentfsm.adapters.providers import RecordedResponse

__all__ = ["Body", "decoded_body", "header", "labelled_stream", "opens_like_a_stream"]

_NOT_UNDONE = ("br", "zstd", "compress", "x-compress")
"""Codings HTTP clients know that this reading does not undo (named, never a header's
other text, in reports)."""


@frozen
class Body:
    """A recorded body out of its content encoding."""

    data: bytes
    broken: bool = False
    """Its coding breaks partway: ``data`` holds what decoded before."""
    over: bool = False
    """It decodes to more than the bound it was read to: ``data`` is cut there."""
    unknown: str = ""
    """A coding this reading does not undo (one of ``br``, ``zstd``, ``compress``)."""


def header(response: RecordedResponse, name: str) -> list[str]:
    """The values of a response header (names compared in any case)."""
    return [value for key, value in response.headers if key.lower() == name]


def decoded_body(response: RecordedResponse, bound: int) -> Body:
    """``response``'s body out of its ``content-encoding``, at most ``bound`` bytes."""
    codings = [
        part.strip().lower()
        for value in header(response, "content-encoding")
        for part in value.split(",")
    ]
    data = response.body
    for coding in reversed([c for c in codings if c]):
        if coding in _NOT_UNDONE:
            return Body(data, unknown=coding)
        if coding in ("gzip", "x-gzip"):
            data, broken, over = _members(data, bound)
        elif coding == "deflate":
            data, broken, over = _deflate(data, bound)
        else:
            continue  # identity, or a coding clients ignore
        if broken or over:
            return Body(data, broken, over)
    return Body(data)


def _inflate(data: bytes, wbits: int, bound: int) -> tuple[bytes, bytes, bool, bool]:
    """One zlib stream: (what it decodes to, the bytes after it, broken, over the bound)."""
    stream = zlib.decompressobj(wbits)
    try:
        out = stream.decompress(data, bound + 1)
    except zlib.error:
        return b"", b"", True, False
    if len(out) > bound:
        return out[:bound], b"", False, True
    return out, stream.unused_data if stream.eof else b"", False, False


def _members(data: bytes, bound: int) -> tuple[bytes, bool, bool]:
    """Every gzip member of ``data``, one after another."""
    parts: list[bytes] = []
    size = 0
    while data.strip(b"\0"):
        out, data, broken, over = _inflate(data, 31, bound - size)
        parts.append(out)
        size += len(out)
        if broken or over:
            return b"".join(parts), broken, over
    return b"".join(parts), False, False


def _deflate(data: bytes, bound: int) -> tuple[bytes, bool, bool]:
    """A deflate body: zlib-wrapped, else raw (as some servers send it)."""
    out, _, broken, over = _inflate(data, 15, bound)
    if broken:
        out, _, broken, over = _inflate(data, -15, bound)
    return out, broken, over


def labelled_stream(response: RecordedResponse) -> bool:
    """Whether the recorded ``content-type`` names ``text/event-stream``."""
    for value in header(response, "content-type"):
        for media in value.split(","):
            if media.partition(";")[0].strip().lower() == "text/event-stream":
                return True
    return False


def opens_like_a_stream(text: str) -> bool:
    """Whether ``text`` opens with a line of an event stream (see the module)."""
    text = text.removeprefix("\ufeff").lstrip("\r\n")
    first = text.split("\n", 1)[0].split("\r", 1)[0]
    return first.startswith(":") or first.partition(":")[0] in ("data", "event", "id", "retry")
