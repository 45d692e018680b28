"""Text that may hold lone surrogates, made safe to hash, serialize and print.

Python turns the undecodable bytes of a file name into lone surrogates (``"\\udcff"``), and a
model or a tool can hand back the same. Such a string has no UTF-8 form: ``str.encode("utf-8")``
raises. Everything the library hashes, writes as JSON or prints goes through these helpers.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["encodable", "escape_surrogates", "has_surrogates", "printable", "utf8_bytes"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def has_surrogates(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (and so has no UTF-8 form)."""
    return _SURROGATE.search(text) is not None


def utf8_bytes(text: str) -> bytes:
    """``text`` as UTF-8, lone surrogates passed through (for hashing: never raises, and the
    bytes of any other text are its plain UTF-8)."""
    return text.encode("utf-8", "surrogatepass")


def escape_surrogates(json_text: str) -> str:
    """Serialized JSON with each lone surrogate written as its ``\\uXXXX`` escape.

    Surrogates only occur inside JSON strings, where the escape is valid JSON that reads
    back to the same Python string; the result can be encoded as UTF-8.
    """
    if not has_surrogates(json_text):
        return json_text
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", json_text)


def _encoding(stream: Any) -> tuple[str, str]:
    encoding = getattr(stream, "encoding", None) or "utf-8"
    errors = getattr(stream, "errors", None) or "strict"
    try:
        "".encode(encoding, errors)
    except LookupError:  # an unknown encoding or error handler: assume UTF-8
        return "utf-8", "strict"
    return encoding, errors


def encodable(text: str, stream: Any = None) -> bool:
    """Whether ``stream`` (its encoding and error handler; UTF-8 without one) can write
    ``text`` without raising."""
    encoding, errors = _encoding(stream)
    try:
        text.encode(encoding, errors)
    except UnicodeEncodeError:
        return False
    return True


def printable(text: str, stream: Any = None) -> str:
    """``text`` as ``stream`` can write it: unchanged when it can, otherwise with what its
    encoding cannot take (lone surrogates first of all) written as backslash escapes."""
    if encodable(text, stream):
        return text
    encoding, _ = _encoding(stream)
    return text.encode(encoding, "backslashreplace").decode(encoding)
