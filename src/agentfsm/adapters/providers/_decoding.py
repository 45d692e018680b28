"""A reply's content encoding, undone by the adapters rather than by httpx (which reads only
the first member of a gzip body), and what says a reply is an event stream.

``gzip`` (``x-gzip``) bodies may hold several members one after another, as RFC 1952 allows:
each is decoded (zero bytes padding the end are ignored). ``deflate`` is zlib-wrapped or raw.
A body cut inside a member gives what it holds; bytes that are not in their coding are an
``httpx.DecodingError`` (a ``bad_response`` error, ``bad_encoding``). A response whose
codings are not all these (and ``identity``) is left to httpx, as before; requests accept
only the codings decoded here (:data:`ACCEPT_ENCODING`).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import AsyncIterator, Iterator

import httpx

__all__ = ["ACCEPT_ENCODING", "decode_content", "is_event_stream", "looks_like_events"]

ACCEPT_ENCODING = "gzip, deflate"
"""The ``accept-encoding`` of every request: the codings :func:`decode_content` undoes."""

_PIECE = 256 * 1024
"""Most decoded bytes taken from zlib at once (a small chunk may inflate a thousandfold)."""
_CODINGS = ("gzip", "x-gzip", "deflate", "identity")


class _Inflater:
    """One coding undone: zlib streams (gzip members) one after another."""

    def __init__(self, coding: str) -> None:
        self.gzip = coding != "deflate"
        self.head = b""  # deflate: its first bytes, until they tell zlib-wrapped from raw
        self.stream: zlib._Decompress | None = zlib.decompressobj(31) if self.gzip else None

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self.stream is None:
            self.head += data
            if len(self.head) < 2:
                return
            data, self.head = self.head, b""
            zlib_wrapped = data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            self.stream = zlib.decompressobj(15 if zlib_wrapped else -15)
        try:
            while data:
                if self.stream.eof:
                    if not self.gzip or not data.strip(b"\0"):
                        return  # what follows the stream: padding (or, deflate, ignored)
                    self.stream = zlib.decompressobj(31)  # the next gzip member
                piece = self.stream.decompress(data, _PIECE)
                if piece:
                    yield piece
                data = self.stream.unused_data if self.stream.eof else self.stream.unconsumed_tail
        except zlib.error as error:
            raise httpx.DecodingError(f"the body does not decode ({error})") from None

    def flush(self) -> Iterator[bytes]:
        if self.stream is None:  # a deflate body of one byte
            data, self.head = self.head, b""
            self.stream = zlib.decompressobj(-15)
            yield from self.feed(data)
        try:
            rest = self.stream.flush()
        except zlib.error as error:
            raise httpx.DecodingError(f"the body does not decode ({error})") from None
        if rest:
            yield rest


def _through(inflaters: list[_Inflater], data: bytes, flush: bool = False) -> Iterator[bytes]:
    """``data`` through the chain (the coding applied last undone first)."""
    if not inflaters:
        if data:
            yield data
        return
    first, rest = inflaters[0], inflaters[1:]
    for piece in first.feed(data):
        yield from _through(rest, piece)
    if flush:
        for piece in first.flush():
            yield from _through(rest, piece)
        yield from _through(rest, b"", flush=True)


class _Decoded(httpx.AsyncByteStream):
    def __init__(self, raw: httpx.AsyncByteStream, codings: list[str]) -> None:
        self.raw = raw
        self.codings = [c for c in reversed(codings) if c != "identity"]

    async def __aiter__(self) -> AsyncIterator[bytes]:
        inflaters = [_Inflater(c) for c in self.codings]
        async for chunk in self.raw:
            for piece in _through(inflaters, chunk):
                yield piece
        for piece in _through(inflaters, b"", flush=True):
            yield piece

    async def aclose(self) -> None:
        await self.raw.aclose()


def decode_content(response: httpx.Response) -> httpx.Response:
    """``response`` whose body is read decoded by this module (its ``content-encoding``
    header dropped, so httpx does not decode it again); left as it is when it has no coding
    to undo, one this module does not know, or a body already read."""
    codings = [
        c.strip().lower() for c in response.headers.get_list("content-encoding", split_commas=True)
    ]
    codings = [c for c in codings if c]
    if not codings or response.is_stream_consumed or any(c not in _CODINGS for c in codings):
        return response
    if not isinstance(response.stream, httpx.AsyncByteStream):
        return response
    response.stream = _Decoded(response.stream, codings)
    del response.headers["content-encoding"]
    return response


def is_event_stream(content_type: str) -> bool:
    """Whether a ``content-type`` value names ``text/event-stream`` (media types are
    compared in any case, their parameters aside)."""
    return any(
        part.split(";", 1)[0].strip().lower() == "text/event-stream"
        for part in content_type.split(",")
    )


_FIRST_LINE = re.compile(r"\A\ufeff?[\r\n]*(:|(data|event|id|retry)(:|\r|\n|\Z))")


def looks_like_events(text: str) -> bool:
    """Whether a body that is not JSON opens (after a byte order mark and blank lines) with
    a line of a server-sent event stream: a comment, or a ``data``, ``event``, ``id`` or
    ``retry`` field. No JSON text opens so."""
    return _FIRST_LINE.match(text) is not None
