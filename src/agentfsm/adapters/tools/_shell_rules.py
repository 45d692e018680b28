"""What a shell command line runs, read as bash reads it (for the permission rules).

The ``shell`` tool runs every line with bash, and the rules parse it with bash's grammar
(``bashlex``) into the simple commands it runs — across ``;``, ``&&``, ``||``, pipes,
newlines, subshells, compound commands, functions, ``bash -c``/``sh -c`` payloads and
wrappers such as ``env`` or ``timeout``. Each word is read again from the source by
:mod:`~agentfsm.adapters.tools._shell_syntax`: the rules decide only on words that are
literal or hold an expansion they model (``$f``, globs, braces, ``~``); any other form —
``${x:-…}``, a substitution, a here-document, ``$'…'`` — makes the line opaque, as does
text the parser skipped. Every simple command is then judged against the tables of
:mod:`~agentfsm.adapters.tools._shell_tables` and :mod:`~agentfsm.adapters.tools._shell_vetted`.
A closed list of dangerous spellings cannot win against a shell, so the rules fail closed:

A **deny** rule refuses every line that is opaque, in which

* a word in command position is not a plain name written out;
* a variable other than a few harmless ones (``LANG``, ``TZ``, ``NO_COLOR`` …) is put in
  a command's environment (``GIT_SSH_COMMAND=…``, ``env NAME=…``, ``export NAME=…``), or
  a shell variable that is not lowercase is set (``PATH``, ``IFS``, ``PS4`` by ``=``,
  ``read``, ``for``, ``printf -v`` …);
* a program reads code from its input, ``/dev/stdin``, ``/dev/fd/*`` or ``/proc/*/fd/*``
  (``sh``, ``python3 -``, ``awk -f /dev/./stdin``, ``make -f -``) or from an option
  (``python3 -c``, ``node -e``, ``perl -x``, ``sed e``, ``env -S``, ``pylint
  --init-hook``), or a builtin runs a command or evaluates a subscript (``jobs -x``,
  ``mapfile -C``, ``test -v``, ``printf -v``, ``eval``, ``source``);
* a program that runs other programs is not vetted (``ssh``, ``gdb``, ``vim``, ``zip``,
  ``taskset``, ``ld.so`` …), or is vetted and one of its options or subcommands is not in
  its table — spelled out exactly: an abbreviation (``--upload-pac``), an attached value
  (``-I/bin/sh``) or an unknown option is refused; an inert program with an option that
  runs one (``split --filter``, ``install -s``);
* or any command matches the rule's pattern (compared with and without its folder; a
  command whose arguments are expanded when it runs matches a pattern for its name).

A program the tables do not know at all (``./gradlew``, ``cargo-nextest``) is compared
against the pattern like any other: a deny rule narrows what happens inside the sandbox,
it is not the boundary.

An **allow** rule admits a line only when it is simple commands joined by lists and pipes
— no redirection but to ``/dev/null`` or a descriptor, no substitution, assignment (but a
harmless one before a command), background job, subshell, loop or function — each of
whose programs has an entry in the tables with its subcommand and every option in it, and
each matched by an allow rule. A program without an entry (an interpreter running a
script, a wrapper, an unknown program) is never admitted; the refusal names the word and
the reason.

Rules see the command line, not what programs do with files: ``make`` runs recipes,
``git`` runs hooks, aliases and drivers from its config, ``python3 script.py`` runs a
script — and the model may have written all of those. The OS sandbox is what bounds them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from attrs import frozen

from ._globs import rule_matches
from ._shell_builtins import ASSIGNED, IDENTIFIER
from ._shell_judge import Judge
from ._shell_syntax import (
    REDIRECTIONS,
    SimpleCommand,
    posix_refusal,
    read_word,
    short,
    unread_text,
)
from ._shell_tables import HARMLESS_VARIABLES

__all__ = ["CommandLine", "SimpleCommand", "parse_command_line"]

_GAP = r"(?:\\\n)*[ \t](?:[ \t]|\\\n)*"  # blanks, once line continuations are dropped
_TIME = re.compile(rf"(?:[ \t]|\\\n)*time({_GAP}-p)?({_GAP}--)?(?={_GAP})")
"""bash's ``time`` keyword as its grammar reads it: ``time``, ``time -p``, ``time --``,
``time -p --``."""

NOT_PLAIN = (
    "simple commands joined by ;, &&, ||, | and newlines, with no redirection but to "
    "/dev/null or another descriptor, no assignment, background job, subshell, loop or "
    "function"
)


def _pattern_matches(text: str, pattern: str) -> bool:
    # `rm *` is meant to cover `rm` alone as well (and `rm` run with arguments the rule
    # cannot see, as in `xargs rm`): the trailing space makes a bare name match it.
    return rule_matches(text, pattern) or rule_matches(text + " ", pattern)


_VERSION = re.compile(r"[.-]?\d+$")


def _names(name: str) -> list[str]:
    """A program's name and the names it has without its version suffixes, for a deny
    pattern: ``python3.11`` is also ``python3`` and ``python``, ``gcc-12`` also ``gcc``."""
    names = [name]
    while (shorter := _VERSION.sub("", names[-1])) not in ("", names[-1]):
        names.append(shorter)
    return names


@frozen
class CommandLine:
    """What a command line runs: its simple commands and what the parser could not see."""

    source: str
    """The command line as given."""
    commands: tuple[SimpleCommand, ...]
    """Every simple command it runs, nested ones (``sh -c``, wrappers) too."""
    simple: bool
    """It is one simple command: no list, pipe, redirection, substitution, assignment or
    background job, and no inline code."""
    opaque: tuple[str, ...]
    """Why some of what it runs cannot be checked (empty when everything is visible)."""
    structure: tuple[str, ...] = ()
    """What makes it more than one simple command (``list``, ``pipeline``, ``env`` …)."""
    plain: bool = False
    """It is simple commands joined by ``;``, ``&&``, ``||``, ``|`` and newlines, with no
    redirection but to ``/dev/null`` or another descriptor: the lines an allow rule may
    admit, one command at a time."""

    def refusal(self) -> str | None:
        """Why no **allow** rule can admit the line, or ``None`` (then the patterns decide)."""
        if self.opaque:
            return self.opaque[0]
        if not self.plain or not self.commands:
            return NOT_PLAIN
        return next((c.unvetted for c in self.commands if c.unvetted is not None), None)

    def unmatched(self, patterns: Sequence[str | None]) -> SimpleCommand | None:
        """The first command no pattern of ``patterns`` matches (``None``: all match)."""
        for command in self.commands:
            if not any(p is None or _pattern_matches(command.text(), p) for p in patterns):
                return command
        return None

    def admitted(self, patterns: Sequence[str | None]) -> bool:
        """Whether **allow** rules with ``patterns`` admit the whole line: every command is
        vetted and matched by one of them."""
        return self.refusal() is None and self.unmatched(patterns) is None

    def matches(self, pattern: str | None) -> bool:
        """Whether one **allow** pattern admits the whole line."""
        return self.admitted((pattern,))

    def touches(self, pattern: str | None) -> bool:
        """Whether a **deny** pattern may apply: any command matches it, or the line runs
        code that cannot be checked."""
        return self.denial(pattern) is not None

    def denial(self, pattern: str | None) -> str | None:
        """Why a **deny** pattern applies (``""``: a command matches it), or ``None``."""
        if self.opaque:
            return f"{self.opaque[0]} (so the rule cannot check what the line runs)"
        if pattern is None:
            return ""
        head = pattern.split()[0] if pattern.split() else pattern
        for command in self.commands:
            names = _names(command.name)
            texts = (command.text(), *(" ".join((n, *command.words[1:])) for n in names))
            if any(_pattern_matches(text, pattern) for text in texts):
                return ""
            named = any(rule_matches(n, head) for n in (command.words[0], *names))
            if named and command.expanded:
                return (
                    f"the arguments of {command.name} are expanded when the line runs, "
                    "so the rule cannot tell what they will be"
                )
        return None


class _Walker(Judge):
    """Reads a parse tree's words, redirections and structure, and has each simple command
    judged."""

    def __init__(self, source: str, depth: int) -> None:
        super().__init__(depth, _nested(depth))
        self.source = source
        self.unplain: list[str] = []
        self.spans: list[tuple[int, int]] = []
        self.redirections: list[tuple[str, object]] = []
        self.pipes: list[str] = []

    def _raw(self, node: Any) -> str:
        start, end = node.pos
        return self.source[start:end]

    def walk(self, node: Any) -> None:
        kind = getattr(node, "kind", "")
        if kind == "command":
            self._command(node)
        elif kind in ("list", "pipeline", "if", "while", "until"):
            if kind in ("if", "while", "until"):
                self.complex.append(kind)
                self.unplain.append(kind)
            for child in node.parts:
                self.walk(child)
        elif kind == "operator":
            self.spans.append(node.pos)
            self.complex.append("list")
            if node.op == "&":
                self.complex.append("background job")
                self.unplain.append("background job")
        elif kind == "pipe":
            self.spans.append(node.pos)
            self.complex.append("pipeline")
            self.pipes.append(node.pipe)
        elif kind == "reservedword":
            self.spans.append(node.pos)
            if node.word == "(" and self.source[node.pos[1] : node.pos[1] + 1] == "(":
                self._refuse("an arithmetic command ((…)), which can run commands")
        elif kind == "compound":
            self.complex.append("compound command")
            self.unplain.append("compound command")
            for child in node.list:
                self.walk(child)
            for redirect in getattr(node, "redirects", None) or ():
                self._redirect(redirect)
        elif kind == "for":
            self._for(node)
        elif kind == "function":
            self.complex.append("function")
            self.unplain.append("function")
            for part in node.parts:
                if part.kind == "word":
                    self.spans.append(part.pos)
                else:
                    self.walk(part)
        else:
            self._refuse(f"a {kind or 'form'} the rules do not read")

    def _word(self, node: Any) -> tuple[str, bool, str]:
        """A word node read as bash reads it: its value, whether it is literal, its text."""
        self.spans.append(node.pos)
        raw = self._raw(node)
        word = read_word(raw)
        if word.refused is not None:
            self._refuse(f"{short(raw)}: {word.refused}")
        return word.value, word.literal, raw

    def _command(self, node: Any) -> None:
        words: list[str] = []
        literal: list[bool] = []
        raws: list[str] = []
        assignments: list[str] = []
        previous: Any = None
        for part in node.parts:
            kind = part.kind
            if kind == "word":
                value, is_literal, raw = self._word(part)
                words.append(value)
                literal.append(is_literal)
                raws.append(raw)
            elif kind == "assignment":
                self.spans.append(part.pos)
                assignments.append(self._raw(part))
            elif kind == "redirect":
                if (
                    previous is not None
                    and previous.kind == "word"
                    and previous.pos[1] == part.pos[0]
                    and re.fullmatch(r"\{\w+\}", self._raw(previous))
                ):
                    self._refuse(f"{self._raw(previous)}: bash reads it as a descriptor to assign")
                self._redirect(part)
            else:
                self._refuse(f"a {kind} the rules do not read")
            previous = part
        if assignments:
            self.complex.append("assignment")
            names = {raw.split("=", 1)[0].removesuffix("+") for raw in assignments}
            if not words or not names <= HARMLESS_VARIABLES:
                self.unplain.append("assignment")
            for raw in assignments:
                self._assignment(raw, exported=bool(words))
        if words:
            command = SimpleCommand(tuple(words), literal[0], tuple(literal), raw=tuple(raws))
            self._simple(command)

    def _assignment(self, raw: str, *, exported: bool) -> None:
        match = ASSIGNED.match(raw)
        if match is None:
            self._refuse(f"{short(raw)}: not a plain variable assignment")
            return
        value = read_word(raw[match.end() :])
        if value.refused is not None:
            self._refuse(f"{short(raw)}: {value.refused}")
        self._assigned(match.group(1), exported=exported)

    def _redirect(self, node: Any) -> None:
        self.spans.append(node.pos)
        self.complex.append("redirection")
        kind = node.type
        heredoc = getattr(node, "heredoc", None)
        if heredoc is not None:
            self.spans.append(heredoc.pos)
        if kind in ("<<", "<<-"):
            self._refuse("a here-document, whose body the rules do not read")
            return
        if kind not in REDIRECTIONS:
            self._refuse(f"the redirection {kind}, which the rules do not read")
            return
        target = node.output
        if hasattr(target, "kind"):
            value, is_literal, _ = self._word(target)
            self.redirections.append((kind, value))
            quiet = is_literal and value == "/dev/null" and kind in (">", ">>", "&>", "&>>", "<")
        else:
            self.redirections.append((kind, target))
            quiet = kind in (">&", "<&")  # a descriptor duplicated or closed
        if not quiet:
            self.unplain.append("redirection")

    def _for(self, node: Any) -> None:
        self.complex.append("for")
        self.unplain.append("for")
        parts = list(node.parts)
        for index, part in enumerate(parts):
            if part.kind == "word":
                value, is_literal, raw = self._word(part)
                if index == 1:
                    if not is_literal or not IDENTIFIER.fullmatch(value):
                        self._refuse(f"for {short(raw)}: not a plain variable name")
                    else:
                        self._assigned(value, exported=False)
            else:
                self.walk(part)


def _nested(
    depth: int,
) -> Callable[[str, bool], tuple[tuple[SimpleCommand, ...], tuple[str, ...]]]:
    def read(source: str, posix: bool) -> tuple[tuple[SimpleCommand, ...], tuple[str, ...]]:
        inner = _parse(source, depth + 1, posix=posix)
        return inner.commands, inner.opaque

    return read


def _bashlex() -> Any:
    """``bashlex``, imported on first use (it builds its parser tables then, about 0.1 s),
    with its reading of ``$`` in a word bounded: for a ``${`` with no ``}`` after it in the
    word (``$'${'``, which its lexer lets through) it returns a position before the ``$``,
    and its expansion loop starts over, growing a string without end in the agent's own
    process. A step that does not move forward is a parse error instead."""
    import bashlex
    from bashlex import errors, subst

    read = subst._paramexpand
    if getattr(read, "bounded", False):
        return bashlex

    def bounded(parser: Any, string: str, start: int) -> Any:
        node, end = read(parser, string, start)
        if end <= start:
            raise errors.ParsingError("bad substitution: no closing '}'", string, start)
        return node, end

    bounded.bounded = True  # type: ignore[attr-defined]
    subst._paramexpand = bounded
    return bashlex


MAX_DEPTH = 8
"""How deep ``sh -c`` payloads are followed before a line counts as opaque."""


def _parse(source: str, depth: int, *, posix: bool = False) -> CommandLine:
    if depth > MAX_DEPTH:
        return CommandLine(source, (), False, ("shell commands nested too deeply",))
    if "\x00" in source:
        return CommandLine(source, (), False, ("the command line holds a NUL byte",))
    bashlex = _bashlex()

    # bash's `time` keyword, which bashlex does not parse, at the head of the line: read as
    # blanks (its span is still read), the pipeline after it is what runs.
    timed = _TIME.match(source)
    parsed = " " * timed.end() + source[timed.end() :] if timed else source
    try:
        trees = bashlex.parse(parsed)
    except Exception as error:  # bashlex raises several unrelated types on odd input
        return CommandLine(source, (), False, (f"the command line could not be parsed ({error})",))
    walker = _Walker(source, depth)
    if timed:
        walker.spans.append((0, timed.end()))
        walker.complex.append("time")
    for tree in trees:
        walker.walk(tree)
    if len(trees) > 1:
        walker.complex.append("several lines")
    unread = unread_text(source, walker.spans)
    if unread is not None:
        walker.opaque.insert(0, f"{short(unread)!r}: text the parser skipped, which bash reads")
    if posix and (reason := posix_refusal(walker.redirections, walker.pipes)):
        walker.opaque.insert(0, reason)
    simple = not walker.complex and not walker.opaque and len(walker.commands) == 1
    return CommandLine(
        source,
        tuple(walker.commands),
        simple,
        tuple(walker.opaque),
        tuple(walker.complex),
        plain=not walker.unplain and not walker.opaque,
    )


MAX_LINE = 16_384
"""The longest line the rules read, in characters: the parser's time grows faster than
the line (a 128 KiB pipeline takes most of a minute), and it runs in the agent's own
process. A longer line is opaque — a script file is the way to run that much."""


def parse_command_line(source: str) -> CommandLine:
    """Parse a shell command line, as bash reads it, into the commands it runs (never
    raises)."""
    if len(source) > MAX_LINE:
        reason = (
            f"the command line is {len(source)} characters long, longer than the rules "
            f"read ({MAX_LINE}); write it to a script file and run that"
        )
        return CommandLine(source, (), False, (reason,))
    try:
        return _parse(source, 0)
    except RecursionError:
        return CommandLine(source, (), False, ("the command line is nested too deeply",))
