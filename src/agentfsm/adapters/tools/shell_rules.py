"""What a shell command line runs, parsed as a shell parses it (for the permission rules).

A rule such as ``shell(git *)`` is meant for one simple command. Matching it against the
raw string would let ``git status; cat ~/.ssh/id_rsa`` through, so command lines are parsed
with ``bashlex`` into the simple commands they run — across ``;``, ``&&``, ``||``, pipes,
newlines, subshells, compound commands, command substitutions and ``sh -c`` payloads — and
the rules judge those:

* an **allow** rule matches only a command line that is a single simple command with no
  redirection, substitution, variable assignment or background job, whose name is written
  out, and which runs no code given inline (``sh -c``, ``python3 -c``, ``eval``, ``env``,
  ``xargs``, ``git -c alias…``, ``find -exec`` …);
* a **deny** rule matches when *any* command the line would run matches it (command names
  compared with and without their folder, wrappers such as ``env``, ``xargs``, ``nohup`` and
  ``sh -c`` looked through), and when the line runs code the parser cannot see into
  (inline interpreter code, ``eval``, a command name computed at run time, ``find -delete``),
  since such a line could do what the rule forbids.

Rules see the command line, not what programs do with files: ``make`` runs recipes and
``git`` runs hooks the model may have written. The OS sandbox is what bounds those.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Iterator
from typing import Any

import bashlex
from attrs import frozen

__all__ = ["CommandLine", "SimpleCommand", "parse_command_line"]

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish"})
INLINE_CODE: dict[str, str] = {
    "python": "c",
    "python2": "c",
    "python3": "c",
    "pypy": "c",
    "pypy3": "c",
    "perl": "eE",
    "ruby": "e",
    "node": "ep",
    "nodejs": "ep",
    "deno": "",
    "bun": "e",
    "php": "rBRE",
    "lua": "e",
    "luajit": "e",
    "tclsh": "",
    "pwsh": "cC",
    "powershell": "cC",
    "osascript": "e",
}
"""Interpreters, with the short flags through which each takes code on its command line."""
INLINE_LONG = frozenset({"--eval", "--print", "--command", "--exec"})
AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
EVALUATORS = frozenset({"eval", "source", ".", "exec", "trap", "alias", "function"})
WRAPPERS = frozenset(
    {
        "env",
        "command",
        "builtin",
        "nohup",
        "nice",
        "ionice",
        "stdbuf",
        "setsid",
        "time",
        "timeout",
        "sudo",
        "doas",
        "su",
        "chroot",
        "unshare",
        "nsenter",
        "chronic",
        "xargs",
        "parallel",
        "watch",
        "strace",
        "ltrace",
        "flock",
        "script",
        "busybox",
    }
)
CODE_OPTIONS: dict[str, tuple[str, ...]] = {
    "git": ("-c", "--config-env", "--exec-path", "--upload-pack", "--receive-pack", "--ext-diff"),
    "make": ("--eval", "-E"),
    "gmake": ("--eval", "-E"),
    "find": ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprintf", "-fls"),
    "tar": ("--to-command", "--use-compress-program", "-I", "--checkpoint-action", "--info-script"),
    "rsync": ("-e", "--rsh", "--rsync-path"),
    "ssh": ("-o", "ProxyCommand"),
    "sed": ("e",),
    "vim": ("-c", "+"),
    "less": ("+",),
}
"""Options through which a well-known program runs code given on its command line."""

_SED_EXEC = re.compile(r"(^|[;}\s])e(\s|$)|/e[gip0-9]*$|/[gip0-9]*e[gip0-9]*$")


@frozen
class SimpleCommand:
    """One simple command of a command line."""

    words: tuple[str, ...]
    """The command's words, quotes removed (``\\rm`` and ``'rm'`` read ``rm``)."""
    static_name: bool = True
    """The command name is written out (not computed by a substitution or variable)."""

    @property
    def name(self) -> str:
        """The command name without its folder (``/bin/rm`` → ``rm``)."""
        return self.words[0].rsplit("/", 1)[-1] if self.words else ""

    def text(self, *, bare: bool = False) -> str:
        """The words joined by spaces (``bare``: the name without its folder)."""
        if bare and self.words:
            return " ".join((self.name, *self.words[1:]))
        return " ".join(self.words)


@frozen
class CommandLine:
    """What a command line runs: its simple commands and what the parser could not see."""

    source: str
    """The command line as given."""
    commands: tuple[SimpleCommand, ...]
    """Every simple command it runs, nested ones (substitutions, ``sh -c``, wrappers) too."""
    simple: bool
    """It is one simple command: no list, pipe, redirection, substitution, assignment or
    background job, and no inline code."""
    opaque: tuple[str, ...]
    """Why some of what it runs cannot be seen (empty when everything is visible)."""

    def matches(self, pattern: str | None) -> bool:
        """Whether an **allow** pattern covers the whole line (one simple command)."""
        if not self.simple or len(self.commands) != 1:
            return False
        return pattern is None or fnmatch.fnmatchcase(self.commands[0].text(), pattern)

    def touches(self, pattern: str | None) -> bool:
        """Whether a **deny** pattern may apply: any command matches it, or the line runs
        code that cannot be checked."""
        if pattern is None or self.opaque:
            return True
        # `rm *` is meant to cover `rm` run with arguments it cannot see (`xargs rm`): the
        # trailing space makes a bare name match such a pattern.
        return any(
            fnmatch.fnmatchcase(text, pattern)
            for command in self.commands
            for text in (command.text(), command.text(bare=True))
            for text in (text, text + " ")
        )


class _Walker:
    """Collects the simple commands of a parse tree."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.commands: list[SimpleCommand] = []
        self.opaque: list[str] = []
        self.complex: list[str] = []

    def walk(self, node: Any) -> None:
        kind = getattr(node, "kind", "")
        if kind == "command":
            self._command(node)
            return
        if kind in ("list", "pipeline", "compound", "if", "for", "while", "until", "function"):
            self.complex.append(kind)
        if kind == "operator" and getattr(node, "op", "") == "&":
            self.complex.append("background job")
        for child in _children(node):
            self.walk(child)

    def _command(self, node: Any) -> None:
        words: list[str] = []
        static_name = True
        for part in node.parts:
            kind = part.kind
            if kind == "word":
                nested = list(_substitutions(part))
                if nested:
                    self.complex.append("substitution")
                    for sub in nested:
                        self.walk(sub)
                    if not words:
                        static_name = False
                elif not words and getattr(part, "parts", None):
                    static_name = False  # `$cmd x`: the name comes from a variable
                words.append(part.word)
            elif kind == "assignment":
                self.complex.append("assignment")
                for sub in _substitutions(part):
                    self.walk(sub)
            elif kind == "redirect":
                self.complex.append("redirection")
                target = getattr(part, "output", None)
                if target is not None:
                    for sub in _substitutions(target):
                        self.walk(sub)
            else:
                for child in _children(part):
                    self.walk(child)
        if words:
            self._simple(SimpleCommand(tuple(words), static_name))

    def _simple(self, command: SimpleCommand) -> None:
        self.commands.append(command)
        if not command.static_name:
            self.opaque.append("the command name is computed when it runs")
            return
        name, args = command.name, command.words[1:]
        base = re.sub(r"[\d.]+$", "", name)
        if name in EVALUATORS:
            self.opaque.append(f"{name} runs code given as text")
        elif name in SHELLS or base in SHELLS:
            self._shell(name, args)
        elif name in AWKS:
            if "-f" not in args:
                self.opaque.append(f"{name} runs a program given inline")
        elif name in INLINE_CODE or base in INLINE_CODE:
            letters = INLINE_CODE.get(name, INLINE_CODE.get(base, ""))
            reason = _inline_code(args, letters)
            if reason:
                self.opaque.append(f"{name} {reason}")
        elif name in WRAPPERS:
            self._wrapped(name, args)
        elif name in CODE_OPTIONS:
            self._options(name, args)

    def _shell(self, name: str, args: tuple[str, ...]) -> None:
        script = _flag_value(args, "c")
        if script is None:
            reason = _inline_code(args, "c")
            if reason:
                self.opaque.append(f"{name} {reason}")
            return
        inner = _parse(script, self.depth + 1)
        self.complex.append(f"{name} -c")
        self.commands.extend(inner.commands)
        self.opaque.extend(inner.opaque)

    def _wrapped(self, name: str, args: tuple[str, ...]) -> None:
        self.complex.append(name)
        rest = list(args)
        while rest and (rest[0].startswith("-") or "=" in rest[0] or _is_number(rest[0])):
            rest.pop(0)  # the wrapper's own options, `env` assignments, `timeout`'s duration
        if name in ("xargs", "parallel"):
            self.opaque.append(f"{name} runs commands built from its input")
        if not rest:
            return
        self._simple(SimpleCommand(tuple(rest)))

    def _options(self, name: str, args: tuple[str, ...]) -> None:
        risky = CODE_OPTIONS[name]
        if name == "sed":
            if any(_SED_EXEC.search(arg) for arg in args if not arg.startswith("-")):
                self.opaque.append("sed runs commands (its e command)")
            return
        for arg in args:
            flag = arg.split("=", 1)[0]
            if flag in risky or (name in ("vim", "less") and arg.startswith("+")):
                self.opaque.append(f"{name} {flag} runs code or changes what it runs")
                if name == "find" and flag in ("-exec", "-execdir", "-ok", "-okdir"):
                    index = args.index(arg)
                    inner = [a for a in args[index + 1 :] if a not in (";", "+", "{}")]
                    if inner:
                        self.commands.append(SimpleCommand(tuple(inner)))
                return


def _children(node: Any) -> Iterator[Any]:
    for name in ("parts", "list"):
        for child in getattr(node, name, None) or ():
            yield child
    for name in ("command", "output"):
        child = getattr(node, name, None)
        if child is not None and hasattr(child, "kind"):
            yield child


def _substitutions(node: Any) -> Iterator[Any]:
    for part in getattr(node, "parts", None) or ():
        if part.kind in ("commandsubstitution", "processsubstitution"):
            yield part.command
        else:
            yield from _substitutions(part)


def _options_of(args: Iterable[str]) -> Iterator[str]:
    """An interpreter's own options: those before its script, module or ``--``."""
    for arg in args:
        if arg == "--" or not arg.startswith("-") or arg == "-":
            return
        yield arg
        if arg in ("-m", "-f"):
            return


def _flag_value(args: Iterable[str], letter: str) -> str | None:
    """The argument after ``-c`` (or a short-flag group holding ``c``), if any."""
    items = list(args)
    for index, arg in enumerate(items):
        if arg.startswith("--") or not arg.startswith("-"):
            if not arg.startswith("-"):
                return None
            continue
        if letter in arg[1:]:
            return items[index + 1] if index + 1 < len(items) else ""
    return None


def _inline_code(args: tuple[str, ...], letters: str) -> str | None:
    """Why an interpreter's arguments run code that cannot be seen, or ``None``."""
    for arg in _options_of(args):
        if arg.split("=", 1)[0] in INLINE_LONG:
            return f"runs code given inline ({arg.split('=', 1)[0]})"
        if not arg.startswith("--") and set(arg[1:]) & set(letters):
            return f"runs code given inline ({arg})"
    rest = [a for a in args if not a.startswith("-")]
    if (not rest or rest[0] == "-") and "-m" not in args:
        return "reads code from its input"
    return None


def _is_number(text: str) -> bool:
    return bool(re.fullmatch(r"\d+(\.\d+)?[smhd]?", text))


MAX_DEPTH = 8
"""How deep ``sh -c`` payloads are followed before a line counts as opaque."""


def _parse(source: str, depth: int) -> CommandLine:
    if depth > MAX_DEPTH:
        return CommandLine(source, (), False, ("shell commands nested too deeply",))
    if "\x00" in source:
        return CommandLine(source, (), False, ("the command line holds a NUL byte",))
    try:
        trees = bashlex.parse(source)
    except Exception as error:  # bashlex raises several unrelated types on odd input
        return CommandLine(source, (), False, (f"the command line could not be parsed ({error})",))
    walker = _Walker(depth)
    for tree in trees:
        walker.walk(tree)
    if len(trees) > 1:
        walker.complex.append("several lines")
    simple = not walker.complex and not walker.opaque and len(walker.commands) == 1
    return CommandLine(source, tuple(walker.commands), simple, tuple(walker.opaque))


def parse_command_line(source: str) -> CommandLine:
    """Parse a shell command line into the commands it runs (never raises)."""
    try:
        return _parse(source, 0)
    except RecursionError:
        return CommandLine(source, (), False, ("the command line is nested too deeply",))
