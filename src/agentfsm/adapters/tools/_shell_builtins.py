"""The bash builtins that set variables or run a command through an option, judged for the
shell permission rules: ``read``, ``mapfile``/``readarray`` (``-C`` runs a command),
``getopts``, ``printf -v``, ``test``/``[`` (``-v`` names a variable whose subscript runs
code), ``unset``, ``jobs -x``, ``wait -p``, ``set``, ``shopt`` and ``declare``/``export``/
``local``/``typeset``/``readonly``.

A variable they set is judged like an assignment: a lowercase shell variable means nothing
to bash or to programs; any other, or one put in a command's environment, makes the line
opaque to a deny rule unless it is one of a few harmless ones (``LANG``, ``CI`` …).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ._shell_syntax import SimpleCommand, read_word, short
from ._shell_tables import HARMLESS_VARIABLES, SHELL_FLAGS, SHELL_OPTIONS

__all__ = ["BUILTINS", "BuiltinJudge"]

IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
ASSIGNED = re.compile(r"([A-Za-z_]\w*)\+?=")
_LOCAL = re.compile(r"[a-z_][a-z0-9_]*")
_FILE_AND_STRING_TESTS = {"=", "==", "!=", "<", ">", "-nt", "-ot", "-ef", "-a", "-o"}
TEST_BINARY = frozenset({*_FILE_AND_STRING_TESTS, "-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
"""``test``'s binary operators: with three words, the first and last are operands."""
SHOPT_GLOBS = frozenset({"nullglob", "globstar", "dotglob", "failglob", "nocaseglob"})
"""``shopt`` options the rules accept: they change what a glob expands to, nothing else."""


class BuiltinJudge:
    """Judges bash builtins; collects the commands a line runs and why it is opaque.

    ``nested`` reads a ``bash -c``/``sh -c`` line (``posix``: for ``sh``) into the commands
    it runs and why it is opaque."""

    def __init__(
        self,
        depth: int,
        nested: Callable[[str, bool], tuple[tuple[SimpleCommand, ...], tuple[str, ...]]],
    ) -> None:
        self.depth = depth
        self.nested = nested
        self.commands: list[SimpleCommand] = []
        self.opaque: list[str] = []
        self.complex: list[str] = []

    def _assigned(self, name: str, *, exported: bool) -> None:
        """An assignment to ``name``; ``exported``: it goes into a command's environment.
        Lowercase shell variables mean nothing to bash or to programs; others may."""
        if name in HARMLESS_VARIABLES or (not exported and _LOCAL.fullmatch(name)):
            return
        self.opaque.append(f"assigning {name} can make programs run code")

    def _refuse(self, reason: str) -> str:
        self.opaque.append(reason)
        return reason

    def _literal_args(self, name: str, args: tuple[str, ...], literal: tuple[bool, ...]) -> bool:
        if all(literal):
            return True
        self._refuse(f"{name} {args[literal.index(False)]}: a word expanded when the line runs")
        return False

    def _names(self, name: str, names: Sequence[str]) -> str | None:
        for variable in names:
            if not IDENTIFIER.fullmatch(variable):
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
                if not operand[1] or not IDENTIFIER.fullmatch(operand[0]):
                    return self._refuse(f"{name} {word} {operand[0]}: not a plain variable name")
        if _test_operands(words):
            return None
        return self._refuse(f"{name}: a word expanded where it may read an operator")

    def _unset(self, name: str, args: tuple[str, ...], literal: tuple[bool, ...]) -> str | None:
        if not self._literal_args(name, args, literal):
            return "refused"
        for arg in args:
            if not arg.startswith("-") and not IDENTIFIER.fullmatch(arg):
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
        """``shopt``: its option letters may come in clusters (``-qs``); what it sets or
        unsets must be a glob option (with ``-o``, a vetted ``set -o`` name)."""
        if not self._literal_args(name, args, literal):
            return "refused"
        letters = ""
        index = 0
        while index < len(args) and args[index][:1] == "-" and args[index] != "--":
            letters += args[index][1:]
            index += 1
        names = args[index + (args[index : index + 1] == ("--",)) :]
        if set(letters) - set("supqo"):
            return self._refuse(f"shopt -{letters}: not an option the rules can vet")
        allowed = SHELL_OPTIONS if "o" in letters else SHOPT_GLOBS
        if set(letters) & set("su") and not set(names) <= allowed:
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
            match = ASSIGNED.match(raw)
            if match is not None and read_word(raw[match.end() :]).value.startswith("("):
                return self._refuse(f"{name} {short(raw)}: {name} reads it as an array")
            if match is not None:
                self._assigned(match.group(1), exported=exported)
            elif is_literal and IDENTIFIER.fullmatch(value):
                if exported:
                    self._assigned(value, exported=True)
            else:
                return self._refuse(f"{name} {short(raw)}: not a plain variable name")
        return f"{name} sets variables"


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


_Judgement = Callable[[BuiltinJudge, str, tuple[str, ...], tuple[bool, ...]], str | None]
BUILTINS: dict[str, _Judgement] = {
    "read": BuiltinJudge._read,
    "mapfile": BuiltinJudge._read,
    "readarray": BuiltinJudge._read,
    "getopts": BuiltinJudge._read,
    "printf": BuiltinJudge._printf,
    "test": BuiltinJudge._test,
    "[": BuiltinJudge._test,
    "unset": BuiltinJudge._unset,
    "jobs": BuiltinJudge._jobs,
    "wait": BuiltinJudge._jobs,
    "set": BuiltinJudge._set,
    "shopt": BuiltinJudge._shopt,
}
"""Builtins that set variables, or run commands through an option, and how each is judged."""
