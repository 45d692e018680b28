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
from collections.abc import Sequence
from typing import Any

from attrs import evolve, frozen

from ._globs import rule_matches
from ._shell_syntax import REDIRECTIONS, posix_refusal, read_word, unread_text
from ._shell_tables import (
    ALSO_RUNS,
    ASSIGNERS,
    EVALUATORS,
    FILE_RUNNERS,
    HARMLESS_VARIABLES,
    INERT,
    INTERPRETER_INFO,
    INTERPRETERS,
    PYTHON_FILE_MODULES,
    PYTHON_FLAGS,
    PYTHON_MODULES,
    RISKY,
    RUNNER_INFO,
    RUNNERS,
    RUNNERS_THAT_PRINT,
    SED_FLAGS,
    SED_LONG,
    SHELL,
    SHELL_FLAGS,
    SHELL_OPTIONS,
    WRAPPERS,
    is_loader,
    reads_input,
    scan,
    sed_script,
)
from ._shell_vetted import PYTEST, VETTED

__all__ = ["CommandLine", "SimpleCommand", "parse_command_line"]

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "pdksh", "lksh", "yash", "posh"})
POSIX_SHELLS = frozenset({"sh", "dash", "posh"})
"""Shells whose ``-c`` line is read by the rules as bash reads it, kept to what both read
alike; other shells' ``-c`` lines (``zsh``, ``ksh`` …) follow grammars the rules do not parse."""
AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
_NAME = re.compile(r"[\w.+:-][\w./+@:-]*|/[\w./+@:-]+|\[")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_LOCAL = re.compile(r"[a-z_][a-z0-9_]*")
_DURATION = re.compile(r"\d+(\.\d+)?[smhd]?")
_VCS = re.compile(r"(-e|--editable=)?(git|hg|svn|bzr)\+", re.IGNORECASE)
_TIME = re.compile(r"[ \t]*time([ \t]+-p)?(?=[ \t])")
_ASSIGNED = re.compile(r"([A-Za-z_]\w*)\+?=")
TEST_BINARY = frozenset(
    [
        "=",
        "==",
        "!=",
        "<",
        ">",
        "-eq",
        "-ne",
        "-lt",
        "-le",
        "-gt",
        "-ge",
        "-nt",
        "-ot",
        "-ef",
        "-a",
        "-o",
    ]
)
SHOPT_GLOBS = frozenset({"nullglob", "globstar", "dotglob", "failglob", "nocaseglob"})
"""``shopt`` options the rules accept: they change what a glob expands to, nothing else."""
NOT_PLAIN = (
    "simple commands joined by ;, &&, ||, | and newlines, with no redirection but to "
    "/dev/null or another descriptor, no assignment, background job, subshell, loop or "
    "function"
)


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


def _pattern_matches(text: str, pattern: str) -> bool:
    # `rm *` is meant to cover `rm` alone as well (and `rm` run with arguments the rule
    # cannot see, as in `xargs rm`): the trailing space makes a bare name match it.
    return rule_matches(text, pattern) or rule_matches(text + " ", pattern)


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
            for text in (command.text(), command.text(bare=True)):
                if _pattern_matches(text, pattern):
                    return ""
            named = rule_matches(command.words[0], head) or rule_matches(command.name, head)
            if named and command.expanded:
                return (
                    f"the arguments of {command.name} are expanded when the line runs, "
                    "so the rule cannot tell what they will be"
                )
        return None


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "…"


class _Walker:
    """Collects and judges the simple commands of a parse tree."""

    def __init__(self, source: str, depth: int) -> None:
        self.source = source
        self.depth = depth
        self.commands: list[SimpleCommand] = []
        self.opaque: list[str] = []
        self.complex: list[str] = []
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
            self._refuse(f"{_short(raw)}: {word.refused}")
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
        match = _ASSIGNED.match(raw)
        if match is None:
            self._refuse(f"{_short(raw)}: not a plain variable assignment")
            return
        value = read_word(raw[match.end() :])
        if value.refused is not None:
            self._refuse(f"{_short(raw)}: {value.refused}")
        self._assigned(match.group(1), exported=exported)

    def _assigned(self, name: str, *, exported: bool) -> None:
        """An assignment to ``name``; ``exported``: it goes into a command's environment.
        Lowercase shell variables mean nothing to bash or to programs; others may."""
        if name in HARMLESS_VARIABLES or (not exported and _LOCAL.fullmatch(name)):
            return
        self.opaque.append(f"assigning {name} can make programs run code")

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
                    if not is_literal or not _IDENTIFIER.fullmatch(value):
                        self._refuse(f"for {_short(raw)}: not a plain variable name")
                    else:
                        self._assigned(value, exported=False)
            else:
                self.walk(part)

    def _simple(self, command: SimpleCommand) -> None:
        position = len(self.commands)
        self.commands.append(command)  # before the commands it wraps
        self.commands[position] = evolve(command, unvetted=self._judge(command))

    def _refuse(self, reason: str) -> str:
        self.opaque.append(reason)
        return reason

    def _judge(self, command: SimpleCommand) -> str | None:
        """Judge one command: record why it is opaque; return why an allow rule cannot
        admit it (``None`` when it is vetted)."""
        first = command.words[0]
        if not command.static_name or not _NAME.fullmatch(first):
            return self._refuse(f"the command name {first!r} is not a plain name written out")
        name, args = command.name, command.words[1:]
        base = re.sub(r"[\d.]+$", "", name)
        literal = command.literal[1:]
        if name in EVALUATORS:
            return self._refuse(f"{name} runs text as code or changes what a name runs")
        builtin = _BUILTINS.get(name)
        if builtin is not None:
            return builtin(self, name, args, literal)
        if name in ASSIGNERS:
            return self._assigner(name, command)
        if name in INERT:
            if name in ALSO_RUNS:
                self._simple(SimpleCommand((*ALSO_RUNS[name], *args), True, (True, *literal)))
            return None
        if (name in RISKY or name in FILE_RUNNERS) and not all(literal):
            # A glob or brace expansion may become the risky option (`--compress-prog*`).
            word = args[literal.index(False)]
            return self._refuse(f"{name} {word}: a word expanded when the line runs")
        if name in RISKY:
            reason = RISKY[name].refusal(name, args)
            return self._refuse(reason) if reason else None
        if name in FILE_RUNNERS:
            reason = FILE_RUNNERS[name].refusal(name, args)
            return self._refuse(reason) if reason else f"{name} runs files the rules cannot see"
        if not _known(name, base):
            if any(reads_input(arg) for arg in args):
                return self._refuse(f"{name} reads from its input, which may be code")
            return f"{name} has no entry in the tables of vetted commands"
        if not all(literal):
            word = args[literal.index(False)]
            return self._refuse(f"{name} {word}: a word expanded when the line runs")
        if name in SHELLS or base in SHELLS:
            if args in (("--version",), ("--help",)):
                return None
            return self._shell(name, base, args)
        if {name, base} & RUNNERS_THAT_PRINT and len(args) == 1 and args[0] in RUNNER_INFO:
            return None
        if base in ("python", "pypy"):
            return self._python(name, args)
        spec = INTERPRETERS.get("node" if base == "nodejs" else base)
        if spec is not None:
            seen: set[str] = set()
            reason, index = scan(name, spec, args, stop=True, seen=seen)
            if reason:
                return self._refuse(reason)
            if index >= len(args) and seen & INTERPRETER_INFO:
                return None
            if index >= len(args) and "--test" in seen:
                return f"{name} --test runs test files the rules cannot see"
            return self._script(name, args, index)
        if name in AWKS:
            return self._awk(name, args)
        if name == "sed":
            return self._sed(args)
        if name in WRAPPERS:
            return self._wrapper(command, name)
        if any(reads_input(arg) for arg in args) and name != "find":
            return self._refuse(f"{name} reads from its input, which may be code")
        if name in VETTED:
            return self._vetted(name, args)
        return self._refuse(f"{name} can run other programs and its options are not vetted")

    # -- bash builtins that set variables or run commands through an option ---------------

    def _literal_args(self, name: str, args: tuple[str, ...], literal: tuple[bool, ...]) -> bool:
        if all(literal):
            return True
        self._refuse(f"{name} {args[literal.index(False)]}: a word expanded when the line runs")
        return False

    def _names(self, name: str, names: Sequence[str]) -> str | None:
        for variable in names:
            if not _IDENTIFIER.fullmatch(variable):
                return self._refuse(f"{name} {variable}: not a plain variable name")
            self._assigned(variable, exported=False)
        return None

    def _read(self, name: str, args: tuple[str, ...], literal: tuple[bool, ...]) -> str | None:
        """``read``, ``mapfile``/``readarray`` (``-C`` runs a command), ``getopts``: the
        variables they set are judged like assignments."""
        if not self._literal_args(name, args, literal):
            return "refused"
        flags, values = ("ers", "adinNptu") if name == "read" else ("t", "dnOsuCc")
        if name == "getopts":
            return self._names(name, args[1:2])
        names: list[str] = []
        index = 0
        while index < len(args):
            arg = args[index]
            index += 1
            if arg == "--" or not arg.startswith("-") or arg == "-":
                names.extend(args[index - (arg != "--") :])
                break
            for position, letter in enumerate(arg[1:], start=1):
                if letter in flags:
                    continue
                if letter == "C":
                    return self._refuse(f"{name} -C runs a command")
                if letter not in values:
                    return self._refuse(f"{name} -{letter}: not an option the rules can vet")
                value = arg[position + 1 :] or (args[index] if index < len(args) else "")
                index += 0 if arg[position + 1 :] else 1
                if letter == "a":
                    names.append(value)
                break
        return self._names(name, names)

    def _printf(self, name: str, args: tuple[str, ...], literal: tuple[bool, ...]) -> str | None:
        """``printf``: its options and format must be written out (``-v`` sets a variable)."""
        index = 0
        names: list[str] = []
        if args[:1] == ("-v",):
            names, index = list(args[1:2]), 2
        elif args[:1] and args[0].startswith("-v"):
            names, index = [args[0][2:]], 1
        if args[index : index + 1] == ("--",):
            index += 1
        if not self._literal_args(name, args[: index + 1], literal[: index + 1]):
            return "refused"
        fmt = args[index] if index < len(args) else ""
        if fmt.startswith("-") and args[index - 1 : index] != ("--",):
            return self._refuse(f"printf {fmt}: not an option the rules can vet")
        return self._names(name, names)

    def _test(self, name: str, args: tuple[str, ...], literal: tuple[bool, ...]) -> str | None:
        """``test`` and ``[``: an expanded word must stand where ``test`` reads an operand,
        never an operator (``-v`` and ``-R`` name a variable, whose subscript runs code)."""
        words = list(zip(args, literal, strict=True))
        if name == "[" and words and words[-1] == ("]", True):
            words.pop()
        for index, (word, is_literal) in enumerate(words):
            if is_literal and word in ("-v", "-R"):
                operand = words[index + 1] if index + 1 < len(words) else ("", True)
                if not operand[1] or not _IDENTIFIER.fullmatch(operand[0]):
                    return self._refuse(f"{name} {word} {operand[0]}: not a plain variable name")
        if _test_operands(words):
            return None
        return self._refuse(f"{name}: a word expanded where it may read an operator")

    def _unset(self, name: str, args: tuple[str, ...], literal: tuple[bool, ...]) -> str | None:
        if not self._literal_args(name, args, literal):
            return "refused"
        for arg in args:
            if not arg.startswith("-") and not _IDENTIFIER.fullmatch(arg):
                return self._refuse(f"unset {arg}: not a plain variable name")
        return None

    def _jobs(self, name: str, args: tuple[str, ...], literal: tuple[bool, ...]) -> str | None:
        """``jobs`` (``-x`` runs a command) and ``wait`` (``-p`` sets a variable)."""
        if not self._literal_args(name, args, literal):
            return "refused"
        for index, arg in enumerate(args):
            if arg.startswith("-") and name == "jobs" and "x" in arg:
                return self._refuse("jobs -x runs a command")
            if arg.startswith("-") and name == "wait" and "p" in arg:
                return self._names(name, args[index + 1 : index + 2])
        return None

    def _set(self, name: str, args: tuple[str, ...], literal: tuple[bool, ...]) -> str | None:
        """``set``: the options in :data:`SHELL_FLAGS` and :data:`SHELL_OPTIONS`; words after
        them are positional parameters."""
        index = 0
        while index < len(args) and literal[index] and args[index][:1] in ("-", "+"):
            arg = args[index]
            index += 1
            if arg in ("--", "-", "+"):
                return None
            for position, letter in enumerate(arg[1:], start=1):
                if letter == "o":
                    option = arg[position + 1 :] or (args[index] if index < len(args) else "")
                    index += 0 if arg[position + 1 :] or index >= len(args) else 1
                    if option and option not in SHELL_OPTIONS:
                        return self._refuse(f"set -o {option}: not an option the rules can vet")
                    break
                if letter not in SHELL_FLAGS:
                    return self._refuse(f"set -{letter}: not an option the rules can vet")
        if index < len(args) and not literal[index]:
            return self._refuse(f"set {args[index]}: a word expanded where it may be an option")
        return None

    def _shopt(self, name: str, args: tuple[str, ...], literal: tuple[bool, ...]) -> str | None:
        if not self._literal_args(name, args, literal):
            return "refused"
        if {"-s", "-u"} & set(args) and not set(args) - {"-s", "-u", "-q"} <= SHOPT_GLOBS:
            return self._refuse("shopt changes how bash reads or runs what follows")
        return None

    def _assigner(self, name: str, command: SimpleCommand) -> str:
        """``export``, ``declare``, ``local`` …: each ``NAME=value`` is an assignment
        (exported by ``export`` and ``-x``); ``-n`` (a name for another variable), ``-i``
        (values read as arithmetic), ``-a``/``-A`` and a value in parentheses (read again
        as an array assignment, whose substitutions run) are refused."""
        exported = name == "export"
        for raw, value, is_literal in zip(
            command.raw[1:], command.words[1:], command.literal[1:], strict=True
        ):
            if value[:1] in ("-", "+") and is_literal:
                if set(value) & set("niaA"):
                    return self._refuse(
                        f"{name} {value}: a variable that names another, counts or is an array"
                    )
                exported = exported or "x" in value
                continue
            match = _ASSIGNED.match(raw)
            if match is not None and read_word(raw[match.end() :]).value.startswith("("):
                return self._refuse(f"{name} {_short(raw)}: {name} reads it as an array")
            if match is not None:
                self._assigned(match.group(1), exported=exported)
            elif is_literal and _IDENTIFIER.fullmatch(value):
                if exported:
                    self._assigned(value, exported=True)
            else:
                return self._refuse(f"{name} {_short(raw)}: not a plain variable name")
        return f"{name} sets variables"

    def _vetted(self, name: str, args: tuple[str, ...]) -> str | None:
        if name == "tar" and args and not args[0].startswith("-"):
            # `tar xzf a.tgz`: the first word is a cluster of options; its letters' values
            # follow it, so reading them as `-xzf` sees every option tar sees, and more.
            args = ("-" + args[0], *args[1:])
        reason, _ = scan(name, VETTED[name], args)
        if reason:
            return self._refuse(reason)
        if name in ("pip", "pip3") and (url := next((a for a in args if _VCS.match(a)), None)):
            return self._refuse(f"pip {url}: a version-control URL runs its tool on it")
        if name == "tar" and "--force-local" not in args:
            remote = next((arg for arg in args if ":" in arg), None)
            if remote is not None:
                return self._refuse(f"tar {remote}: a host:path archive runs a remote shell")
        return None

    def _script(self, name: str, args: tuple[str, ...], index: int) -> str:
        if index >= len(args) or args[index] == "-" or reads_input(args[index]):
            return self._refuse(f"{name} reads code from its input")
        return f"{name} runs the script {args[index]}, which the rules cannot see"

    def _shell(self, name: str, base: str, args: tuple[str, ...]) -> str:
        options = tuple("-" + arg[1:] if arg[:1] == "+" and len(arg) > 1 else arg for arg in args)
        seen: set[str] = set()
        reason, index = scan(name, SHELL, options, stop=True, seen=seen)
        if reason:
            return self._refuse(reason)
        for position, arg in enumerate(options[:index]):
            if arg.startswith("-") and not arg.startswith("--") and "o" in arg[1:]:
                rest = arg[arg.index("o", 1) + 1 :]
                option = rest or (options[position + 1] if position + 1 < index else "")
                if option not in SHELL_OPTIONS:
                    return self._refuse(f"{name} -o {option}: not an option the rules can vet")
        if "-c" not in seen:
            return self._script(name, args, index)
        if index >= len(args):
            return self._refuse(f"{name} -c without a command")
        if name not in ("bash", *POSIX_SHELLS) and base not in ("bash", *POSIX_SHELLS):
            return self._refuse(f"{name} -c reads its line with a grammar the rules do not parse")
        inner = _parse(args[index], self.depth + 1, posix=base != "bash")
        self.complex.append(f"{name} -c")
        self.commands.extend(inner.commands)
        self.opaque.extend(inner.opaque)
        return f"{name} -c runs a command line"

    def _python(self, name: str, args: tuple[str, ...]) -> str | None:
        index = 0
        info = False  # --version, -V, --help, -h: it prints and exits
        while index < len(args):
            arg = args[index]
            if arg == "--":
                index += 1
                break
            if not arg.startswith("-") or arg == "-":
                break
            if arg in ("--help", "--version"):
                info = True
                index += 1
                continue
            if arg.startswith("--"):
                return self._refuse(f"{name} {arg}: not an option the rules can vet")
            used = 1
            for position, letter in enumerate(arg[1:], start=1):
                rest = arg[position + 1 :]
                if letter in PYTHON_FLAGS:
                    info = info or letter in "Vh"
                    continue
                if letter == "c":
                    return self._refuse(f"{name} runs code given inline (-c)")
                if letter == "m":
                    module = rest or (args[index + 1] if index + 1 < len(args) else "")
                    start = index + (1 if rest else 2)
                    return self._module(name, module, args[start:])
                if letter in "WX":
                    used = 1 if rest else 2
                    break
                return self._refuse(f"{name} -{letter}: not an option the rules can vet")
            index += used
        if info and index >= len(args):
            return None
        return self._script(name, args, index)

    def _module(self, name: str, module: str, args: tuple[str, ...]) -> str | None:
        if any(reads_input(arg) for arg in args):
            return self._refuse(f"{name} -m {module} reads from its input, which may be code")
        if module == "pip":
            return self._vetted("pip", args)
        if module in PYTHON_MODULES:
            reason, _ = scan(f"{name} -m {module}", PYTEST, args)
            return self._refuse(reason) if reason else None
        risky = PYTHON_FILE_MODULES.get(module)
        if risky is not None:
            reason = risky.refusal(f"{name} -m {module}", args)
            return (
                self._refuse(reason)
                if reason
                else f"{name} -m {module} runs files the rules cannot see"
            )
        return self._refuse(f"{name} -m {module} may run code given on its command line")

    def _awk(self, name: str, args: tuple[str, ...]) -> str:
        files: list[str] = []
        index = 0
        while index < len(args):
            arg = args[index]
            if arg == "--":
                index += 1
                break
            if not arg.startswith("-") or arg == "-":
                break
            if arg[:2] not in ("-F", "-v", "-f"):
                return self._refuse(f"{name} {arg}: not an option the rules can vet")
            value = arg[2:] or (args[index + 1] if index + 1 < len(args) else "")
            if arg[:2] == "-f":
                files.append(value)
            index += 1 if arg[2:] else 2
        for file in files:
            if file == "-" or reads_input(file):
                return self._refuse(f"{name} reads its program from its input")
        if files:
            return f"{name} runs the program in {files[0]}, which the rules cannot see"
        program = args[index] if index < len(args) else ""
        if re.search(r"system|[|@]", program):
            return self._refuse(f"{name} runs a program that can run commands (system, |, @)")
        return f"{name} runs a program given inline"

    def _sed(self, args: tuple[str, ...]) -> str | None:
        scripts: list[str] = []
        operands: list[str] = []
        index = 0
        while index < len(args):
            arg = args[index]
            following = args[index + 1] if index + 1 < len(args) else ""
            index += 1
            if arg == "--":
                operands.extend(args[index:])
                break
            if arg.startswith("--"):
                option, equals, value = arg.partition("=")
                if option == "--expression":
                    scripts.append(value if equals else following)
                    index += 0 if equals else 1
                elif option == "--line-length":
                    index += 0 if equals else 1
                elif option != "--in-place" and (option not in SED_LONG or equals):
                    return self._refuse(f"sed {option}: not an option the rules can vet")
            elif arg.startswith("-") and arg != "-":
                for position, letter in enumerate(arg[1:], start=1):
                    rest = arg[position + 1 :]
                    if letter in SED_FLAGS:
                        continue
                    if letter in "el":
                        if letter == "e":
                            scripts.append(rest or following)
                        index += 0 if rest else 1
                    elif letter != "i":
                        return self._refuse(f"sed -{letter}: not an option the rules can vet")
                    break
            else:
                operands.append(arg)
        if not scripts and operands:
            scripts.append(operands[0])
        for script in scripts:
            reason = sed_script(script)
            if reason:
                return self._refuse(f"sed {script!r}: {reason}")
        return None

    def _wrapper(self, command: SimpleCommand, name: str) -> str:
        args = command.words[1:]
        seen: set[str] = set()
        reason, index = scan(name, WRAPPERS[name], args, stop=True, seen=seen)
        if reason:
            return self._refuse(reason)
        while name == "env" and index < len(args) and (args[index] == "-" or "=" in args[index]):
            if args[index] != "-":
                if not _IDENTIFIER.fullmatch(args[index].split("=", 1)[0]):
                    return self._refuse(f"env {args[index]}: not a plain variable name")
                self._assigned(args[index].split("=", 1)[0], exported=True)
            index += 1
        if name == "timeout" and index < len(args):
            if not _DURATION.fullmatch(args[index]):
                return self._refuse(f"timeout {args[index]}: not a duration")
            index += 1
        why = f"{name} runs another command, which an allow rule does not look through"
        if index >= len(args) or (name == "command" and seen & {"-v", "-V"}):
            return why
        self.complex.append(name)
        inner = SimpleCommand(
            args[index:],
            command.literal[index + 1],
            command.literal[index + 1 :],
            raw=command.raw[index + 1 :],
        )
        inner_base = re.sub(r"[\d.]+$", "", inner.name)
        if name == "xargs" and inner.name not in INERT and _known(inner.name, inner_base):
            return self._refuse(f"xargs adds words from its input to {inner.name}")
        self._simple(inner)
        return why


def _known(name: str, base: str) -> bool:
    """Whether a program is in a table (inert ones excepted): shells, interpreters,
    wrappers, vetted programs and runners."""
    return (
        name in SHELLS
        or base in SHELLS
        or base in ("python", "pypy", "nodejs")
        or base in INTERPRETERS
        or name in AWKS
        or name == "sed"
        or name in WRAPPERS
        or name in VETTED
        or name in RISKY
        or name in FILE_RUNNERS
        or name in RUNNERS
        or base in RUNNERS
        or is_loader(name)
    )


def _test_operands(words: list[tuple[str, bool]]) -> bool:
    """Whether ``test`` reads every expanded word of ``words`` as an operand (bash's rules
    for up to four arguments; past four every word must be written out)."""
    if all(is_literal for _, is_literal in words) or len(words) <= 1:
        return True
    first, second = words[0], words[1]
    if len(words) == 2:
        return first[1] and first[0] not in ("-v", "-R")
    if len(words) == 3 and second[1] and second[0] in TEST_BINARY:
        return True
    if first == ("!", True) and len(words) <= 4:
        return _test_operands(words[1:])
    if first == ("(", True) and words[-1] == (")", True) and len(words) <= 4:
        return _test_operands(words[1:-1])
    return False


_BUILTINS = {
    "read": _Walker._read,
    "mapfile": _Walker._read,
    "readarray": _Walker._read,
    "getopts": _Walker._read,
    "printf": _Walker._printf,
    "test": _Walker._test,
    "[": _Walker._test,
    "unset": _Walker._unset,
    "jobs": _Walker._jobs,
    "wait": _Walker._jobs,
    "set": _Walker._set,
    "shopt": _Walker._shopt,
}
"""Builtins that set variables, or run commands through an option, and how each is judged."""

MAX_DEPTH = 8
"""How deep ``sh -c`` payloads are followed before a line counts as opaque."""


def _parse(source: str, depth: int, *, posix: bool = False) -> CommandLine:
    if depth > MAX_DEPTH:
        return CommandLine(source, (), False, ("shell commands nested too deeply",))
    if "\x00" in source:
        return CommandLine(source, (), False, ("the command line holds a NUL byte",))
    import bashlex  # builds its parser tables when imported (about 0.1 s): on first use

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
        walker.opaque.insert(0, f"{_short(unread)!r}: text the parser skipped, which bash reads")
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


def parse_command_line(source: str) -> CommandLine:
    """Parse a shell command line, as bash reads it, into the commands it runs (never
    raises)."""
    try:
        return _parse(source, 0)
    except RecursionError:
        return CommandLine(source, (), False, ("the command line is nested too deeply",))
