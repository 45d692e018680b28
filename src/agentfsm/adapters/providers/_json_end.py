"""Where a JSON value ends, while its text still streams in: how a stream without call
indexes tells a second tool call from more arguments of the first."""

from __future__ import annotations

import json
import re

__all__ = ["JsonEnd"]

_SPACE = re.compile(r"\S")
_STRUCTURE = re.compile(r'[{}\[\]"]')
_IN_STRING = re.compile(r'["\\]')


class JsonEnd:
    """Follows text appended piece by piece and tells whether it is, so far, exactly one
    whole JSON object (or a JSON string holding one, as doubly encoded arguments are),
    with nothing but white space after it.

    Each character is looked at once (the scanning skips through strings and between
    brackets at C speed), and the text is parsed at most once, when its first value closes:
    anything but white space after that value means it never is one whole object again.
    """

    def __init__(self) -> None:
        self._state = "start"  # start, inside, closed, over
        self._depth = 0
        self._string = False
        self._escape = False
        self._top_string = False
        self._whole: bool | None = None

    def feed(self, piece: str) -> None:
        """Take the next piece of the text."""
        at, end = 0, len(piece)
        while at < end and self._state != "over":
            if self._state in ("start", "closed"):
                found = _SPACE.search(piece, at)
                if found is None:
                    return
                first = piece[found.start()]
                if self._state == "closed" or first not in '{"':
                    self._state = "over"
                    return
                self._state, at = "inside", found.end()
                self._string = self._top_string = first == '"'
                self._depth = 0 if self._string else 1
            elif self._escape:
                self._escape, at = False, at + 1
            elif self._string:
                found = _IN_STRING.search(piece, at)
                if found is None:
                    return
                at = found.end()
                if found.group() == "\\":
                    self._escape = True
                else:
                    self._string = False
                    if self._top_string:
                        self._state = "closed"
            else:
                found = _STRUCTURE.search(piece, at)
                if found is None:
                    return
                at, mark = found.end(), found.group()
                if mark == '"':
                    self._string = True
                elif mark in "{[":
                    self._depth += 1
                else:
                    self._depth -= 1
                    if self._depth <= 0:
                        self._state = "closed"

    def whole(self, text: str) -> bool:
        """Whether ``text`` (everything fed so far) is one whole JSON object, or a JSON
        string holding one."""
        if self._state != "closed":
            return False
        if self._whole is None:
            try:
                value = json.loads(text)
                if isinstance(value, str):
                    value = json.loads(value)
                self._whole = isinstance(value, dict)
            except (ValueError, RecursionError):
                self._whole = False
        return self._whole
