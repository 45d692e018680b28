"""Glob patterns, in one place: path globs translated to RE2, and permission-rule patterns.

Two dialects, each with one implementation here:

- **Path globs** (the ``glob`` and ``grep`` tools' patterns, ``.gitignore`` rules):
  :func:`segment_regex` turns one ``/``-free part of a pattern into RE2 syntax, where ``*``
  and ``?`` never cross ``/`` and ``[...]`` classes (``!`` or ``^`` negates) never match
  ``/``. The callers put the parts together (``**`` crosses folders) and compile with RE2,
  so no pattern takes more than linear time. ``.gitignore`` rules also read ``\\`` as an
  escape (``escapes=True``); the tools' patterns take it literally.
- **Rule patterns** (``write_file(src/**)``, ``shell(rm *)``): :func:`rule_matches` is
  :func:`fnmatch.fnmatchcase`, where ``*`` matches any text, ``/`` included, so ``**`` is
  just ``*`` and ``src/*`` covers everything below ``src``.
"""

from __future__ import annotations

import fnmatch

import re2

__all__ = ["rule_matches", "segment_regex"]


def rule_matches(text: str, pattern: str) -> bool:
    """Whether a permission-rule ``pattern`` matches ``text`` (case-sensitive; ``*`` and
    ``?`` cross ``/``)."""
    return fnmatch.fnmatchcase(text, pattern)


def _class_regex(segment: str, start: int, *, escapes: bool) -> tuple[str, int] | None:
    """The class opening at ``segment[start]`` as RE2 and the index after it; ``None`` when
    it is not closed (the ``[`` is then a literal). A ``]`` right after the opening (or
    after ``!``/``^``) is a member; ``/`` never is."""
    i = start + 1
    negate = i < len(segment) and segment[i] in "!^"
    if negate:
        i += 1
    body: list[str] = []
    first = True
    while i < len(segment):
        char = segment[i]
        if char == "]" and not first:
            inner = "".join(body)
            if negate:
                return f"[^/{inner}]", i + 1
            return (f"[{inner}]" if inner else r"\b\B"), i + 1  # an empty class: no match
        first = False
        if escapes and char == "\\" and i + 1 < len(segment):
            i += 1
            char = segment[i]
            if char != "/":
                body.append("\\" + char if char in "\\[]^-" else char)
        elif char == "-" and body and i + 1 < len(segment) and segment[i + 1] != "]":
            body.append("-")  # a range
        elif char != "/":
            body.append("\\" + char if char in "\\[]^-" else char)
        i += 1
    return None


def segment_regex(segment: str, *, escapes: bool = False) -> str:
    """One ``/``-free part of a path glob as RE2: ``*`` (or ``**`` inside a part) is
    ``[^/]*``, ``?`` is ``[^/]``, ``[...]`` a class; with ``escapes`` a ``\\`` makes the
    next character literal."""
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            while i + 1 < len(segment) and segment[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (found := _class_regex(segment, i, escapes=escapes)) is not None:
            out.append(found[0])
            i = found[1]
            continue
        elif escapes and char == "\\" and i + 1 < len(segment):
            i += 1
            out.append(re2.escape(segment[i]))
        else:
            out.append(re2.escape(char))
        i += 1
    return "".join(out)
