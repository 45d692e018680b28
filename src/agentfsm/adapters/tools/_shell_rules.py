"""What a shell command line runs, parsed as a shell parses it (for the permission rules).

Command lines are parsed with ``bashlex`` into the simple commands they run — across
``;``, ``&&``, ``||``, pipes, newlines, subshells, compound commands, command
substitutions, ``sh -c`` payloads and wrappers such as ``env`` or ``timeout`` — and every
simple command is judged against the tables of
:mod:`~agentfsm.adapters.tools._shell_tables` and :mod:`~agentfsm.adapters.tools._shell_vetted`.
A closed list of dangerous spellings cannot win against a shell, so the rules fail closed:

A **deny** rule refuses every line in which

* a word in command position is not a plain name written out (globs, braces, variables,
  substitutions, ``$'…'``, ``~`` …);
* a variable other than a few harmless ones (``LANG``, ``TZ``, ``NO_COLOR`` …) is assigned
  (``GIT_SSH_COMMAND=…``, ``PAGER=…``, ``LD_PRELOAD=…``, ``BASH_ENV=…``, ``env NAME=…``);
* a program reads code from its input, ``/dev/stdin``, ``/dev/fd/*`` or ``/proc/*/fd/*``
  (``sh``, ``python3 -``, ``awk -f /dev/stdin``, ``make -f -``) or from an option
  (``python3 -c``, ``node -e``, ``perl -x``, ``sed e``, ``env -S``);
* a program that runs other programs is not vetted (``ssh``, ``gdb``, ``vim``, ``zip``,
  ``taskset``, ``setpriv``, ``prlimit``, ``chrt``, ``flock``, ``ld.so`` …), or is vetted
  and one of its options or subcommands is not in its table — spelled out exactly: an
  abbreviation (``--upload-pac``), an attached value (``-I/bin/sh``) or an unknown option
  is refused;
* or any command matches the rule's pattern (compared with and without its folder; a
  command whose arguments are expanded when it runs matches a pattern for its name).

A program the tables do not know at all (``./gradlew``, ``cargo-nextest``) is compared
against the pattern like any other: a deny rule narrows what happens inside the sandbox,
it is not the boundary.

An **allow** rule admits a line only when it is one simple command — no list, pipe,
redirection, substitution, assignment or background job — whose program has an entry in
the tables and whose subcommand and every option are in that entry, and then only when the
pattern matches. A program without an entry (an interpreter running a script, a wrapper,
an unknown program) is never admitted; the refusal names the word and the reason.

Rules see the command line, not what programs do with files: ``make`` runs recipes,
``git`` runs hooks, aliases and drivers from its config, ``python3 script.py`` runs a
script — and the model may have written all of those. The OS sandbox is what bounds them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from attrs import evolve, frozen

from ._globs import rule_matches
from ._shell_tables import (
    ASSIGNERS,
    EVALUATORS,
    HARMLESS_VARIABLES,
    INERT,
    INTERPRETERS,
    PYTHON_FILE_MODULES,
    PYTHON_FLAGS,
    PYTHON_MODULES,
    RISKY_OPTIONS,
    RUNNERS,
    SED_FLAGS,
    SED_LONG,
    SHELL,
    SUBSCRIPTS,
    WRAPPERS,
    is_loader,
    reads_input,
    scan,
    sed_script,
)
from ._shell_vetted import PYTEST, VETTED

__all__ = ["CommandLine", "SimpleCommand", "parse_command_line"]

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "pdksh", "lksh", "yash", "posh"})
AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
_NAME = re.compile(r"[\w.+:-][\w./+@:-]*|/[\w./+@:-]+|\[")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_DURATION = re.compile(r"\d+(\.\d+)?[smhd]?")


@frozen
class SimpleCommand:
    """One simple command of a command line."""

    words: tuple[str, ...]
    """The command's words, quotes removed (``\\rm`` and ``'rm'`` read ``rm``)."""
    static_name: bool = True
    """The command name is written out (not computed by a substitution or variable)."""
    literal: tuple[bool, ...] = ()
    """For each word: written out, nothing in it is expanded when the line runs."""
    unvetted: str | None = "not judged"
    """Why an allow rule cannot admit the command (``None``: its program, subcommand and
    every option are in the tables of vetted commands)."""

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
    """Why some of what it runs cannot be checked (empty when everything is visible)."""
    structure: tuple[str, ...] = ()
    """What makes it more than one simple command (``list``, ``pipeline``, ``env`` …)."""

    def refusal(self) -> str | None:
        """Why no **allow** rule can admit the line, or ``None`` (then the pattern decides)."""
        if self.opaque:
            return self.opaque[0]
        if not self.simple or len(self.commands) != 1:
            return (
                "as one simple command: no ;, &&, ||, pipes, redirections, "
                "substitutions, variable assignments or inline code"
            )
        return self.commands[0].unvetted

    def matches(self, pattern: str | None) -> bool:
        """Whether an **allow** pattern admits the whole line (one vetted simple command)."""
        if self.refusal() is not None:
            return False
        return pattern is None or rule_matches(self.commands[0].text(), pattern)

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
            # `rm *` is meant to cover `rm` run with arguments it cannot see (`xargs rm`):
            # the trailing space makes a bare name match such a pattern.
            for text in (command.text(), command.text(bare=True)):
                if rule_matches(text, pattern) or rule_matches(text + " ", pattern):
                    return ""
            named = rule_matches(command.words[0], head) or rule_matches(command.name, head)
            if named and command.expanded:
                return (
                    f"the arguments of {command.name} are expanded when the line runs, "
                    "so the rule cannot tell what they will be"
                )
        return None


def _literal(raw: str) -> bool:
    """Whether a word as written expands to itself (no glob, brace, variable, quote trick)."""
    if raw == "[":
        return True
    quote = ""
    brace = False
    index = 0
    while index < len(raw):
        char = raw[index]
        following = raw[index + 1 : index + 2]
        if quote == "'":
            quote = "" if char == "'" else quote
        elif quote == '"':
            if char == "\\":
                index += 1
            elif char == '"':
                quote = ""
            elif char in "$`":
                return False
        elif char == "\\":
            index += 1
        elif char in "'\"":
            quote = char
        elif char in "$`*?[" or (char in "@+!" and following == "("):
            return False
        elif char == "{":
            brace = True
        elif brace and (char == "," or (char == "." and following == ".")):
            return False
        index += 1
    return not quote


class _Walker:
    """Collects and judges the simple commands of a parse tree."""

    def __init__(self, source: str, depth: int) -> None:
        self.source = source
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
        literal: list[bool] = []
        for part in node.parts:
            kind = part.kind
            if kind == "word":
                nested = list(_substitutions(part))
                if nested:
                    self.complex.append("substitution")
                    for sub in nested:
                        self.walk(sub)
                raw = self.source[part.pos[0] : part.pos[1]]
                literal.append(not getattr(part, "parts", None) and _literal(raw))
                words.append(part.word)
            elif kind == "assignment":
                self.complex.append("assignment")
                self._assigned(part.word)
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
            self._simple(SimpleCommand(tuple(words), literal[0], tuple(literal)))

    def _assigned(self, word: str) -> None:
        name = word.split("=", 1)[0].removesuffix("+")
        if name not in HARMLESS_VARIABLES:
            self.opaque.append(f"assigning {name} can make programs run code")

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
        if name in SUBSCRIPTS | ASSIGNERS and any(
            "[" in arg and ("$" in arg or "`" in arg) for arg in args
        ):
            return self._refuse(f"{name} evaluates a subscript that can run commands")
        if name in ASSIGNERS:
            return self._assigner(name, args)
        if name in INERT:
            return None
        if not _known(name, base):
            if any(reads_input(arg) for arg in args):
                return self._refuse(f"{name} reads from its input, which may be code")
            return f"{name} has no entry in the tables of vetted commands"
        if not all(literal):
            word = args[literal.index(False)]
            return self._refuse(f"{name} {word}: a word expanded when the line runs")
        if name in SHELLS or base in SHELLS:
            return self._shell(name, args)
        if base in ("python", "pypy"):
            return self._python(name, args)
        spec = INTERPRETERS.get("node" if base == "nodejs" else base)
        if spec is not None:
            reason, index = scan(name, spec, args, stop=True)
            return self._refuse(reason) if reason else self._script(name, args, index)
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
        if name in RISKY_OPTIONS:
            for arg in args:
                option = arg.split("=", 1)[0]
                if len(option) > 2 and any(r.startswith(option) for r in RISKY_OPTIONS[name]):
                    return self._refuse(f"{name} {option} runs a program")
            return None
        return self._refuse(f"{name} can run other programs and its options are not vetted")

    def _assigner(self, name: str, args: tuple[str, ...]) -> str:
        for arg in args:
            if arg.startswith("-"):
                if "n" in arg:
                    return self._refuse(f"{name} {arg} makes a name refer to another")
                continue
            variable = arg.split("=", 1)[0]
            if not _IDENTIFIER.fullmatch(variable):
                return self._refuse(f"{name} {arg}: not a plain variable name")
            if "=" in arg:
                self._assigned(arg)
        return f"{name} sets variables"

    def _vetted(self, name: str, args: tuple[str, ...]) -> str | None:
        if name == "tar" and args and not args[0].startswith("-"):
            # `tar xzf a.tgz`: the first word is a cluster of options; its letters' values
            # follow it, so reading them as `-xzf` sees every option tar sees, and more.
            args = ("-" + args[0], *args[1:])
        reason, _ = scan(name, VETTED[name], args)
        if reason:
            return self._refuse(reason)
        if name == "tar" and "--force-local" not in args:
            remote = next((arg for arg in args if ":" in arg), None)
            if remote is not None:
                return self._refuse(f"tar {remote}: a host:path archive runs a remote shell")
        return None

    def _script(self, name: str, args: tuple[str, ...], index: int) -> str:
        if index >= len(args) or args[index] == "-" or reads_input(args[index]):
            return self._refuse(f"{name} reads code from its input")
        return f"{name} runs the script {args[index]}, which the rules cannot see"

    def _shell(self, name: str, args: tuple[str, ...]) -> str:
        options = tuple("-" + arg[1:] if arg[:1] == "+" and len(arg) > 1 else arg for arg in args)
        seen: set[str] = set()
        reason, index = scan(name, SHELL, options, stop=True, seen=seen)
        if reason:
            return self._refuse(reason)
        if "-c" not in seen:
            return self._script(name, args, index)
        if index >= len(args):
            return self._refuse(f"{name} -c without a command")
        inner = _parse(args[index], self.depth + 1)
        self.complex.append(f"{name} -c")
        self.commands.extend(inner.commands)
        self.opaque.extend(inner.opaque)
        return f"{name} -c runs a command line"

    def _python(self, name: str, args: tuple[str, ...]) -> str | None:
        index = 0
        while index < len(args):
            arg = args[index]
            if arg == "--":
                index += 1
                break
            if not arg.startswith("-") or arg == "-":
                break
            if arg in ("--help", "--version"):
                index += 1
                continue
            if arg.startswith("--"):
                return self._refuse(f"{name} {arg}: not an option the rules can vet")
            used = 1
            for position, letter in enumerate(arg[1:], start=1):
                rest = arg[position + 1 :]
                if letter in PYTHON_FLAGS:
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
        return self._script(name, args, index)

    def _module(self, name: str, module: str, args: tuple[str, ...]) -> str | None:
        if module in PYTHON_MODULES:
            reason, _ = scan(f"{name} -m {module}", PYTEST, args)
            return self._refuse(reason) if reason else None
        if module in PYTHON_FILE_MODULES:
            return f"{name} -m {module} runs files the rules cannot see"
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
                self._assigned(args[index])
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
            args[index:], command.literal[index + 1], command.literal[index + 1 :]
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
        or name in RISKY_OPTIONS
        or name in RUNNERS
        or base in RUNNERS
        or is_loader(name)
    )


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


MAX_DEPTH = 8
"""How deep ``sh -c`` payloads are followed before a line counts as opaque."""


def _parse(source: str, depth: int) -> CommandLine:
    if depth > MAX_DEPTH:
        return CommandLine(source, (), False, ("shell commands nested too deeply",))
    if "\x00" in source:
        return CommandLine(source, (), False, ("the command line holds a NUL byte",))
    import bashlex  # builds its parser tables when imported (about 0.1 s): on first use

    try:
        trees = bashlex.parse(source)
    except Exception as error:  # bashlex raises several unrelated types on odd input
        return CommandLine(source, (), False, (f"the command line could not be parsed ({error})",))
    walker = _Walker(source, depth)
    for tree in trees:
        walker.walk(tree)
    if len(trees) > 1:
        walker.complex.append("several lines")
    simple = not walker.complex and not walker.opaque and len(walker.commands) == 1
    return CommandLine(
        source, tuple(walker.commands), simple, tuple(walker.opaque), tuple(walker.complex)
    )


def parse_command_line(source: str) -> CommandLine:
    """Parse a shell command line into the commands it runs (never raises)."""
    try:
        return _parse(source, 0)
    except RecursionError:
        return CommandLine(source, (), False, ("the command line is nested too deeply",))
