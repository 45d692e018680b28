"""Text from the model, its tools and session files, made harmless to print on a terminal.

Whatever ``agentfsm`` prints that it did not write itself (model text and reasoning, tool
names, arguments and output, provider error messages, session contents) goes through
:func:`sanitize`, or through a :class:`StreamSanitizer` when it arrives in pieces. What
remains holds no character a terminal acts on:

* C0 controls are removed except newline and tab; a carriage return is removed (``\\r\\n``
  becomes ``\\n``; a lone ``\\r`` would let later text overwrite the line); DEL and the C1
  controls U+0080 to U+009F are removed;
* every escape sequence is removed with its payload: CSI (``ESC [`` … final byte, and the
  8-bit CSI U+009B), OSC (``ESC ]`` … BEL or ST: clipboard writes, titles, links), DCS, SOS,
  PM and APC (``ESC P``, ``ESC X``, ``ESC ^``, ``ESC _`` … ST, and their 8-bit forms), and
  the short escapes (``ESC c``, ``ESC 7``, ``ESC ( B`` …). A sequence that never ends takes
  the rest of the text with it;
* the bidirectional embedding, override and isolate controls (U+202A to U+202E,
  U+2066 to U+2069), which reorder what is shown, are made visible as ``<U+202E>``;
* every lone surrogate (U+D800 to U+DFFF, which a session or a model can hand back) is
  written as its backslash escape (``\\udc9b``): a stream with the ``surrogateescape``
  error handler (``LC_ALL=C.UTF-8``, ``PYTHONUTF8=1``) would write U+DC80 to U+DCFF as raw
  bytes, and such bytes side by side spell any UTF-8 character, a C1 control or a
  bidirectional control included;
* nothing else changes: the line separator U+2028 and other printable text are kept.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import unicodedata
from collections.abc import Iterator

__all__ = [
    "StreamSanitizer",
    "cells",
    "fit",
    "json_safe",
    "one_line",
    "sanitize",
    "sanitized_logging",
]

_GROUND, _ESC, _CSI, _STRING, _STRING_ESC, _ESCAPE_TAIL = range(6)

ESC = "\x1b"
_KEPT_CONTROLS = "\n\t"
_STRING_STARTERS = "]PX^_"
"""After ESC: OSC, DCS, SOS, PM, APC, all ended by ST (``ESC \\``; OSC also by BEL)."""
_C1_STRINGS = "\x90\x98\x9d\x9e\x9f"
"""The 8-bit forms of DCS, SOS, OSC, PM and APC."""
_C1_CSI = "\x9b"
_C1_ST = "\x9c"
_CANCEL = "\x18\x1a"
"""CAN and SUB end any sequence."""
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

_SPECIAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
"""A character :func:`sanitize` changes (a text without one passes through unchanged)."""
_JSON_ESCAPED = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(char: str) -> str:
    return f"<U+{ord(char):04X}>"


class StreamSanitizer:
    """:func:`sanitize` for text that arrives in pieces (streamed model text): an escape
    sequence split across two pieces is removed whole. Feed the pieces in order; call
    :meth:`reset` when the stream ends (a sequence left open ends there)."""

    def __init__(self) -> None:
        self._state = _GROUND

    def reset(self) -> None:
        """Forget an unfinished sequence: the next piece starts a new stream."""
        self._state = _GROUND

    def feed(self, text: str) -> str:
        """The printable part of ``text``, given the pieces fed before it."""
        if self._state == _GROUND and _SPECIAL.search(text) is None:
            return text
        out: list[str] = []
        state = self._state
        for char in text:
            state = self._step(state, char, out)
        self._state = state
        return "".join(out)

    def _step(self, state: int, char: str, out: list[str]) -> int:
        code = ord(char)
        if state == _GROUND:
            return self._ground(char, out)
        if state == _ESC:
            if char == "[":
                return _CSI
            if char in _STRING_STARTERS:
                return _STRING
            if 0x20 <= code <= 0x2F:
                return _ESCAPE_TAIL  # intermediate bytes, then one final byte
            if 0x30 <= code <= 0x7E:
                return _GROUND  # a two-byte escape: ESC c, ESC 7, ESC =, …
            if char == ESC:
                return _ESC
            return self._ground(char, out)
        if state == _CSI:
            if 0x20 <= code <= 0x3F:
                return _CSI  # parameter and intermediate bytes
            if 0x40 <= code <= 0x7E:
                return _GROUND  # the final byte
            if char == ESC:
                return _ESC
            if char in _CANCEL:
                return _GROUND
            if code < 0x20:
                return _CSI  # a terminal acts on a control inside CSI and goes on: drop it
            return self._ground(char, out)
        if state == _STRING:
            if char in ("\x07", _C1_ST):
                return _GROUND
            if char == ESC:
                return _STRING_ESC
            if char in _CANCEL:
                return _GROUND
            return _STRING  # the payload (clipboard data, a title, a link) is dropped
        if state == _STRING_ESC:
            if char == "\\":
                return _GROUND
            return self._step(_ESC, char, out)
        # _ESCAPE_TAIL
        if 0x20 <= code <= 0x2F:
            return _ESCAPE_TAIL
        if 0x30 <= code <= 0x7E:
            return _GROUND
        if char == ESC:
            return _ESC
        return self._ground(char, out)

    @staticmethod
    def _ground(char: str, out: list[str]) -> int:
        code = ord(char)
        if char == ESC:
            return _ESC
        if char == _C1_CSI:
            return _CSI
        if char in _C1_STRINGS:
            return _STRING
        if (code < 0x20 and char not in _KEPT_CONTROLS) or 0x7F <= code <= 0x9F:
            return _GROUND
        if 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")  # never a byte on the stream, whatever its errors
        else:
            out.append(_visible(char) if char in _BIDI else char)
        return _GROUND


def sanitize(text: str) -> str:
    """``text`` without the characters and sequences a terminal acts on (see the module's
    documentation); newlines and tabs are kept, lone surrogates written as escapes."""
    if _SPECIAL.search(text) is None:
        return text
    return StreamSanitizer().feed(text)


def one_line(text: str, limit: int = 500) -> str:
    """``text`` on one line, sanitized for a terminal, cut at ``limit`` characters."""
    line = " ".join(sanitize(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _cells(char: str) -> int:
    if unicodedata.category(char) in ("Mn", "Me", "Cf"):  # combining marks, zero-width
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def cells(text: str) -> int:
    """The columns ``text`` (printable, one line) takes on a terminal: wide and fullwidth
    characters two, combining marks and format characters none."""
    return sum(map(_cells, text))


def fit(text: str, width: int, more: str = "…") -> str:
    """``text`` (printable, one line) in exactly ``width`` columns: cut, ending with
    ``more``, when it is wider; padded with spaces when it is narrower."""
    if cells(text) > width:
        kept, used = [], cells(more)
        for char in text:
            used += _cells(char)
            if used > width:
                break
            kept.append(char)
        text = "".join(kept) + more
    return text + " " * (width - cells(text))


def json_safe(line: str) -> str:
    """A line of JSON with DEL, the C1 controls and the bidirectional controls written as
    ``\\uXXXX`` escapes (``json.dumps`` with ``ensure_ascii=False`` writes them as they are;
    they only occur inside strings, where the escape reads back to the same text)."""
    if _JSON_ESCAPED.search(line) is None:
        return line
    return _JSON_ESCAPED.sub(lambda match: f"\\u{ord(match.group()):04x}", line)


class _SanitizingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return sanitize(super().format(record))


@contextlib.contextmanager
def sanitized_logging() -> Iterator[None]:
    """While the block runs, the library's warnings (which can quote a provider's error
    or a tool's name) reach stderr sanitized, as Python's last-resort handler would print
    them. Nothing changes when the program configured logging itself (the root logger has
    a handler): its handlers decide."""
    if logging.getLogger().handlers:
        yield
        return
    library = logging.getLogger("agentfsm")
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_SanitizingFormatter("%(message)s"))
    library.addHandler(handler)
    try:
        yield
    finally:
        library.removeHandler(handler)
