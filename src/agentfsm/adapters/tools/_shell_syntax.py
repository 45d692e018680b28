"""Reading a command line's words and layout the way bash reads them, or refusing to.

The shell rules take a line's structure (its commands, operators and redirections) from
``bashlex``, a port of bash's grammar, and the ``shell`` tool runs every line with bash, so
the grammar the rules parse is the grammar that runs the line. Where ``bashlex`` and bash
could still read a line apart, the rules do not guess:

* every word is read again here from its source text with bash's quoting rules
  (:func:`read_word`), into its value after quote removal — the value the rules judge.
  A *literal* word expands to exactly that value. A few expansions are modelled: plain
  parameters (``$name``, ``${name}``, ``$1``, ``$@`` …), globs, brace expansion and ``~``
  or ``~/…``: the rules know the word stands for data they cannot see. Every other form is
  *refused*, with its name: a parameter expansion with an operator (``${x:-…}``, ``${1@P}``,
  ``${!x}``, ``${#x}``), a command, process or arithmetic substitution, ANSI-C or locale
  quoting (``$'…'``, ``$"…"``), ``~user`` forms, extended globs;
* every character of the line belongs to a token the parser read, a blank, a comment or a
  line continuation (:func:`unread_text`): nothing is skipped silently;
* redirections are limited to the forms both read alike (:data:`REDIRECTIONS`): a
  here-document, whose body the parser does not read as bash does, is refused.

A payload run by ``sh -c`` is read by another shell (dash on Debian), so a line for it must
also keep to what both shells read alike (:func:`posix_refusal`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from attrs import frozen

__all__ = [
    "REDIRECTIONS",
    "SimpleCommand",
    "Word",
    "posix_refusal",
    "read_word",
    "short",
    "unread_text",
]


@frozen
class Word:
    """A word as bash reads it."""

    value: str
    """The word after quote removal; expansions are kept as written (``$x``, ``*.py``)."""
    literal: bool
    """Nothing in the word is expanded: ``value`` is what the program receives."""
    refused: str | None = None
    """Why the rules cannot read the word (a form they do not model), or ``None``."""


_PARAMETER = re.compile(r"[A-Za-z_]\w*|\d+|[@*#?$!-]")
_NAME = re.compile(r"[A-Za-z_]\w*")


def _brace(raw: str, index: int) -> bool:
    """Whether the unquoted ``{`` at ``index`` starts a brace expansion: an unquoted ``,``
    or ``..`` inside it before its unquoted ``}`` (quoted parts count as text, as in bash:
    ``--fil{ter='x y',}`` expands)."""
    depth, quote, position = 0, "", index
    while position < len(raw):
        char = raw[position]
        if quote:
            if char == "\\" and quote == '"':
                position += 1
            elif char == quote:
                quote = ""
        elif char == "\\":
            position += 1
        elif char in "'\"":
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return False
        elif depth == 1 and (char == "," or raw.startswith("..", position)):
            return "}" in raw[position:]
        position += 1
    return False


def _dollar(raw: str, index: int, quoted: bool) -> tuple[str | None, int]:
    """What ``$`` at ``index`` starts: ``(reason, 0)`` when refused, else how many
    characters the expansion takes (1: a literal ``$``)."""
    following = raw[index + 1 : index + 2]
    if following == "'" and not quoted:
        return "ANSI-C quoting ($'…'), which the rules do not read", 0
    if following == '"' and not quoted:
        return 'locale quoting ($"…"), which the rules do not read', 0
    if following == "(":
        if raw[index + 2 : index + 3] == "(":
            return "an arithmetic expansion $((…)), which can run commands", 0
        return "a command substitution $(…)", 0
    if following == "[":
        return "an arithmetic expansion $[…], which can run commands", 0
    if following == "{":
        end = raw.find("}", index + 2)
        inside = raw[index + 2 : end] if end > 0 else ""
        if end < 0 or _PARAMETER.fullmatch(inside) is None:
            return "a parameter expansion with an operator (${…}), which can run commands", 0
        return None, end + 1 - index
    match = _NAME.match(raw, index + 1)
    if match is not None:
        return None, match.end() - index
    if following.isdigit() or (following and following in "@*#?$!-"):
        return None, 2
    return None, 1


def _join_lines(raw: str) -> str:
    """``raw`` without its line continuations: bash's reader drops a backslash-newline
    outside single quotes before it reads anything else, so ``$\\⏎(`` is ``$(``."""
    if "\\\n" not in raw:
        return raw
    out: list[str] = []
    quoted = False  # inside "…"
    index = 0
    while index < len(raw):
        char = raw[index]
        if char == "\\":
            if raw[index + 1 : index + 2] != "\n":
                out.append(raw[index : index + 2])
            index += 2
            continue
        if char == "'" and not quoted:
            end = raw.find("'", index + 1)
            end = len(raw) if end < 0 else end + 1
            out.append(raw[index:end])
            index = end
            continue
        quoted = quoted != (char == '"')
        out.append(char)
        index += 1
    return "".join(out)


def read_word(raw: str) -> Word:
    """``raw`` (one word's source text) read with bash's quoting and expansion rules."""
    raw = _join_lines(raw)
    value: list[str] = []
    expanded = False
    quoted = False  # inside "…"
    index, size = 0, len(raw)
    while index < size:
        char = raw[index]
        following = raw[index + 1 : index + 2]
        if char == "\\":
            if not following:
                value.append("\\")
            elif following == "\n":
                pass  # a line continuation
            elif quoted and following not in '$`"\\':
                value.append("\\" + following)
            else:
                value.append(following)
            index += 2
            continue
        if char == "'" and not quoted:
            end = raw.find("'", index + 1)
            if end < 0:
                return Word(raw, False, "an unterminated quote")
            value.append(raw[index + 1 : end])
            index = end + 1
            continue
        if char == '"':
            quoted = not quoted
            index += 1
            continue
        if char == "`":
            return Word(raw, False, "a command substitution `…`")
        if char == "$":
            reason, used = _dollar(raw, index, quoted)
            if reason is not None:
                return Word(raw, False, reason)
            value.append(raw[index : index + used])
            expanded = expanded or used > 1
            index += used
            continue
        if not quoted:
            if char in "<>" and following == "(":
                return Word(raw, False, "a process substitution")
            if char in "@!+*?" and following == "(":
                return Word(raw, False, "an extended glob pattern, which the rules do not read")
            if char == "~" and (index == 0 or raw[index - 1] in "=:"):
                if following not in ("", "/", ":"):
                    return Word(raw, False, "a ~ expansion other than ~ and ~/…")
                expanded = True
            elif (
                char in "*?"
                or (char == "[" and "]" in raw[index + 1 :])
                or (char == "{" and _brace(raw, index))
            ):
                expanded = True
        value.append(char)
        index += 1
    if quoted:
        return Word(raw, False, "an unterminated quote")
    return Word("".join(value), not expanded)


REDIRECTIONS = frozenset({">", ">>", "<", ">|", "<>", "&>", "&>>", ">&", "<&", "<<<"})
"""The redirections the rules read (``<<`` and ``<<-``, here-documents, are refused)."""
POSIX_REDIRECTIONS = frozenset({">", ">>", "<", ">|", "<>", ">&", "<&"})
_OPERATOR_CHARS = " \t\n;&|()"


def unread_text(source: str, spans: Iterable[tuple[int, int]]) -> str | None:
    """The first piece of ``source`` outside ``spans`` (the tokens the parser read) that is
    not blank, a comment or a line continuation: text the parser skipped, which bash may
    read. ``None`` when there is none."""
    position = 0
    for start, end in [*sorted(spans), (len(source), len(source))]:
        index = position
        while index < start:
            char = source[index]
            if char in " \t\n":
                index += 1
            elif source.startswith("\\\n", index):
                index += 2
            elif char == "#" and (index == 0 or source[index - 1] in _OPERATOR_CHARS):
                newline = source.find("\n", index, start)
                if newline < 0 and start < len(source):
                    return source[index:start]  # a token inside what bash reads as a comment
                index = start if newline < 0 else newline
            else:
                return source[index:start]
        position = max(position, end)
    return None


def posix_refusal(redirections: Iterable[tuple[str, object]], pipes: Iterable[str]) -> str | None:
    """Why a line for ``sh`` (dash) is not read alike by bash and by it: a bash-only
    redirection (``&>``, ``<<<``, ``>&file``) or ``|&``; ``None`` when it is."""
    for kind, target in redirections:
        if kind not in POSIX_REDIRECTIONS:
            return f"{kind} means something else to sh than to bash"
        if kind in (">&", "<&") and isinstance(target, str) and not re.fullmatch(r"\d+|-", target):
            return f"{kind}{target} means something else to sh than to bash"
    for pipe in pipes:
        if pipe != "|":
            return f"{pipe} means something else to sh than to bash"
    return None


def short(text: str) -> str:
    """``text`` cut to 60 characters, for a reason."""
    return text if len(text) <= 60 else text[:57] + "…"


@frozen
class SimpleCommand:
    """One simple command of a command line."""

    words: tuple[str, ...]
    """The command's words as bash reads them, quotes removed (``\\rm`` and ``'rm'`` read
    ``rm``); expansions are kept as written (``$x``, ``*.py``)."""
    static_name: bool = True
    """The command name is written out (not computed by a substitution or variable)."""
    literal: tuple[bool, ...] = ()
    """For each word: written out, nothing in it is expanded when the line runs."""
    unvetted: str | None = "not judged"
    """Why an allow rule cannot admit the command (``None``: its program, subcommand and
    every option are in the tables of vetted commands)."""
    raw: tuple[str, ...] = ()
    """Each word as written in the line."""

    @property
    def name(self) -> str:
        """The command name without its folder (``/bin/rm`` → ``rm``)."""
        return self.words[0].rsplit("/", 1)[-1] if self.words else ""

    @property
    def expanded(self) -> bool:
        """Some argument is expanded when the line runs (a glob, a variable …)."""
        return not all(self.literal[1:])

    def text(self, *, bare: bool = False) -> str:
        """The words joined by spaces (``bare``: the name without its folder)."""
        if bare and self.words:
            return " ".join((self.name, *self.words[1:]))
        return " ".join(self.words)
