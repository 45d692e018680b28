"""A bounded server-sent-event decoder.

Lines end only at CR, LF or CRLF (never at U+2028 or other Unicode line breaks, which JSON
text may carry), and a byte order mark opening the stream is ignored, as the SSE
specification says. A line longer than ``max_line_bytes`` or an
event whose data grows past ``max_event_bytes`` raises :class:`TooLarge` as soon as the bound
is crossed, so a hostile stream never holds more than about that much in memory.
"""

from __future__ import annotations

from httpx_sse import ServerSentEvent

from ._limits import TooLarge

__all__ = ["SSEDecoder"]

_BOM = "\ufeff".encode()


class SSEDecoder:
    """Feed bytes in, take whole events out."""

    def __init__(self, *, max_line_bytes: int, max_event_bytes: int) -> None:
        self.max_line_bytes = max_line_bytes
        self.max_event_bytes = max_event_bytes
        self._line = bytearray()
        self._after_cr = False
        self._event = ""
        self._data: list[str] = []
        self._data_size = 0
        self._id = ""
        self._retry: int | None = None
        self._opening = b""
        """The stream's first bytes while they may still be a byte order mark."""
        self._opened = False

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The events that ``chunk`` completes."""
        if not self._opened:
            chunk = self._opening + chunk
            if _BOM.startswith(chunk):  # all of it may still be the mark
                self._opening = chunk
                return []
            self._opened, self._opening = True, b""
            chunk = chunk.removeprefix(_BOM)
        events: list[ServerSentEvent] = []
        start = 0
        size = len(chunk)
        if self._after_cr and size and chunk[0:1] == b"\n":
            start = 1  # the LF of a CRLF split across two chunks
        self._after_cr = False
        cr = lf = -1  # next CR / LF at or after start (-2: none left in this chunk)
        while start < size:
            if cr != -2 and cr < start:
                cr = chunk.find(b"\r", start)
                cr = -2 if cr < 0 else cr
            if lf != -2 and lf < start:
                lf = chunk.find(b"\n", start)
                lf = -2 if lf < 0 else lf
            if cr == -2 and lf == -2:
                self._grow(chunk, start, size)
                break
            end = lf if cr == -2 else cr if lf == -2 else min(cr, lf)
            self._grow(chunk, start, end)
            line = bytes(self._line)
            self._line.clear()
            if end == cr:
                if end + 1 < size:
                    start = end + 2 if chunk[end + 1 : end + 2] == b"\n" else end + 1
                else:
                    self._after_cr = True
                    start = size
            else:
                start = end + 1
            event = self._line_done(line.decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)
        return events

    def finish(self) -> ServerSentEvent | None:
        """The stream ended: a last line without its terminator still counts; an event not
        closed by a blank line is dropped (as the specification says)."""
        if self._line:
            line = bytes(self._line)
            self._line.clear()
            self._line_done(line.decode("utf-8", errors="replace"))
        return None

    def _grow(self, chunk: bytes, start: int, end: int) -> None:
        if len(self._line) + (end - start) > self.max_line_bytes:
            raise TooLarge(
                "max_line_bytes",
                f"a stream line is longer than {self.max_line_bytes} bytes",
            )
        self._line += chunk[start:end]

    def _line_done(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data_size += len(value) + 1
            if self._data_size > self.max_event_bytes:
                raise TooLarge(
                    "max_event_bytes",
                    f"a stream event is larger than {self.max_event_bytes} bytes",
                )
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isascii() and value.isdigit() and len(value) < 12:
            self._retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._event and not self._data:
            return None  # a blank line, or an id/retry-only block: nothing to hand on
        event = ServerSentEvent(
            event=self._event or "message",
            data="\n".join(self._data),
            id=self._id,
            retry=self._retry,
        )
        self._event = ""
        self._data = []
        self._data_size = 0
        self._retry = None
        return event
