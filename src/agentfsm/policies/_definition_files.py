"""The files a check's build tool reads for its definition, fingerprinted.

The verify gate runs the check as the user left it. A check run through ``make``, ``npm``,
``pnpm``, ``yarn``, ``bun``, ``pdm``, ``poe`` or ``hatch`` is defined not only by the line
that names it but by every file that tool reads to know what the check does: all the make
file names and their includes, ``.npmrc`` (``script-shell=``), the yarn and pnpm settings,
the pyproject tool tables. :func:`command_files` fingerprints them, present or absent, so
that a file created, changed, removed or swapped for a symlink during the run is noticed.

Files are read only through :func:`~agentfsm.engine._files.read_small_file` (regular files,
bounded, no symlink): anything else is :data:`UNREADABLE`, which differs from absent.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shlex
import tomllib
from collections.abc import Iterator, Sequence
from itertools import product
from pathlib import Path
from typing import Any

from agentfsm.engine import read_small_file

__all__ = ["UNREADABLE", "command_files", "command_tools"]

UNREADABLE = "unreadable"
"""The state of a definition file that is there but not a small regular file (a symlink, a
FIFO, a folder, larger than 1 MiB)."""

MAX_DEFINITION_BYTES = 1 << 20
MAX_FILES = 1000
"""More files than this in one fingerprint: the definition cannot be pinned."""
MAX_ALTERNATIVES = 64
"""More values than this for one include line: it cannot be pinned."""
MAX_ROUNDS = 8
MAX_DEPTH = 8

MAKE_NAMES = ("GNUmakefile", "makefile", "Makefile")
"""The names GNU make looks for, in its order: the first that exists is read."""
NODE_FILES = (
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    "pnpm-workspace.yaml",
    ".pnpmfile.cjs",
    "bunfig.toml",
)
LOCKFILES = ("pnpm-lock.yaml", "yarn.lock", "bun.lockb", "bun.lock")
"""Only their presence counts: it chooses the runner (installing changes their content)."""
PACKAGE_FIELDS = ("scripts", "config", "packageManager", "workspaces", "pnpm")
"""The ``package.json`` fields a script run reads (dependencies may change freely)."""
PYTHON_TOOL_FILES = {
    "pdm": ("pdm.toml", ".pdm.toml", ".pdm-python"),
    "poe": ("poe_tasks.toml", "poe_tasks.yaml", "poe_tasks.json"),
    "hatch": ("hatch.toml",),
}
TOOLS = {
    "make": "make",
    "gmake": "make",
    "npm": "node",
    "pnpm": "node",
    "yarn": "node",
    "bun": "node",
    "pdm": "pdm",
    "poe": "poe",
    "hatch": "hatch",
}
"""Build tools by program name, and the family of files each reads."""
WRAPPERS = frozenset({"env", "exec", "command", "time", "nice", "nohup"})

_DIRECTIVE = re.compile(r"^\s*(?:override\s+)?(-include|sinclude|include|-load|load)\s+(.*)$")
_ASSIGNMENT = re.compile(
    r"^\s*(?:(?:override|export|private)\s+)*([^\s:#=?!+$(){}]+)\s*(:::=|::=|:=|\?=|\+=|!=|=)\s*(.*)$"
)
_SUBMAKE = re.compile(r"(?:\$\(MAKE\)|\$\{MAKE\}|(?<![\w./-])g?make)(?=\s|$)(.*)")
_SUBSTITUTION = re.compile(r"^([^\s:=$]+):([^=]*)=(.*)$")
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_YARN_PATH = re.compile(r"^\s*(?:yarnPath:|yarn-path)\s*[\"']?([^\"'\s#]+)", re.MULTILINE)


class Unpinned(Exception):
    """A value the static reading cannot know (a ``$(shell …)``, an undefined variable)."""


def command_tools(command: str) -> list[tuple[str, str | None, list[str]]]:
    """The build tools a command line starts, each as ``(family, folder, arguments)``: the
    first word of every command of the line (after ``;``, ``&&``, ``||``, ``|``, a
    newline), past variable assignments and ``env``/``exec``/``time``-like wrappers. The
    family is ``make``, ``node`` (npm, pnpm, yarn, bun), ``pdm``, ``poe`` or ``hatch``; the
    folder is where earlier ``cd`` commands of the line lead (relative to where the line
    starts), ``None`` when a ``cd`` cannot be followed (``cd $DIR``, ``cd -``)."""
    found = []
    folder: str | None = ""
    for segment in _segments(command):
        words = iter(segment)
        for word in words:
            if _ENV_ASSIGNMENT.match(word) or word in WRAPPERS or word.startswith("-"):
                continue
            if word == "cd":
                target = next(words, None)
                if target is None or target == "-" or _is_shell_variable(target):
                    folder = None
                elif folder is not None:
                    folder = _Files.key(folder, target)
            family = TOOLS.get(os.path.basename(word))
            if family is not None:
                found.append((family, folder, list(words)))
            break
    return found


def _is_shell_variable(word: str) -> bool:
    return any(c in word for c in "$`~")


def _segments(command: str) -> Iterator[list[str]]:
    for line in command.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:  # an unclosed quote: the plain words
            tokens = line.split()
        segment: list[str] = []
        for token in tokens:
            if token and all(c in "();<>|&" for c in token):
                yield segment
                segment = []
            else:
                segment.append(token)
        yield segment


def command_files(
    workspace: str | Path, command: str
) -> tuple[tuple[tuple[str, str | None], ...], tuple[str, ...]]:
    """The fingerprint of what the build tools of ``command`` read for their definition,
    in ``workspace``: ``(files, unpinned)``.

    ``files`` holds ``(path, state)`` pairs sorted by path (relative to the workspace, or
    absolute): the state is a hash of the file (or of the part that defines the check, for
    ``package.json`` and ``pyproject.toml``), ``None`` when it is absent, or
    :data:`UNREADABLE`. ``unpinned`` names what could not be pinned (an include through a
    ``$(shell …)``, too many files): a gate cannot know the check is the user's.
    """
    files = _Files(Path(workspace))
    contexts = []
    python: dict[str, list[str]] = {}
    for family, folder, args in command_tools(command):
        if folder is None:
            files.unpinned.append(f"the folder {family} runs in (a cd the gate cannot follow)")
        elif family == "make":
            contexts.append(_make_context(args, folder))
        elif family == "node":
            _node(files, folder)
        else:
            python.setdefault(folder, []).append(family)
    for folder, tools in python.items():
        _python(files, folder, tools)
    if contexts:
        _MakeReader(files).read(contexts)
    if len(files.states) > MAX_FILES:
        files.unpinned.append(f"more than {MAX_FILES} definition files")
    return tuple(sorted(files.states.items())), tuple(dict.fromkeys(files.unpinned))


class _Files:
    """The states read so far, and what could not be pinned."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.states: dict[str, str | None] = {}
        self.unpinned: list[str] = []

    @staticmethod
    def key(base: str, name: str) -> str:
        return Path(os.path.normpath(os.path.join(base, name))).as_posix()

    def read(self, key: str) -> bytes | None:
        """Record ``key``'s state; its bytes when it is a small regular file."""
        path = self.root / key
        if not os.path.lexists(path):
            self.states[key] = None
            return None
        try:
            data = read_small_file(path, MAX_DEFINITION_BYTES, follow_symlinks=False)
        except (OSError, ValueError):
            self.states[key] = UNREADABLE
            return None
        self.states[key] = hashlib.sha256(data).hexdigest()[:16]
        return data

    def present(self, key: str) -> None:
        self.states[key] = "present" if os.path.lexists(self.root / key) else None

    def value(self, key: str, value: object) -> None:
        text = json.dumps(value, sort_keys=True, ensure_ascii=True, default=str)
        self.states[key] = hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


# -- make ------------------------------------------------------------------------------


def _make_context(args: Sequence[str], base: str = "") -> tuple[str, tuple[str, ...]]:
    """The folder make runs in (``base``, then ``-C``) and the make files it is told to
    read (``-f``)."""
    files = []
    words = iter(args)
    for word in words:
        for short, long in (("-C", "--directory"), ("-f", "--file"), ("-f", "--makefile")):
            if word in (short, long):
                value = next(words, "")
            elif word.startswith(f"{long}="):
                value = word.split("=", 1)[1]
            elif word.startswith(short) and not word.startswith("--"):
                value = word[len(short) :]
            else:
                continue
            if short == "-C":
                base = _Files.key(base, value)
            else:
                files.append(value)
            break
    return base, tuple(files)


class _MakeReader:
    """Every file make reads: the make file it finds (or is given), the files its
    ``include`` / ``-include`` / ``sinclude`` / ``load`` lines name (globs expanded, the
    variables the files assign expanded), transitively, and those of ``$(MAKE) -C dir`` /
    ``-f file`` in its recipes. Conditionals are not evaluated: both branches count."""

    def __init__(self, files: _Files) -> None:
        self.files = files
        self.parsed: dict[str, tuple[str, str]] = {}  # key -> (text, the folder make runs in)
        self.contexts: set[tuple[str, tuple[str, ...]]] = set()
        self.seen: set[str] = set()

    def read(self, contexts: list[tuple[str, tuple[str, ...]]]) -> None:
        pending = list(contexts)
        for _ in range(MAX_ROUNDS):
            for context in pending:
                self._context(*context)
            pending = []
            variables = self._variables()
            unpinned: list[str] = []
            grew = False
            for key, (text, base) in list(self.parsed.items()):
                for kind, rest in _directives(text):
                    try:
                        names = self._expand_words(rest, variables, base)
                    except Unpinned:
                        unpinned.append(f"{kind} {rest.strip()} (in {key})")
                        continue
                    for name in names:
                        grew |= self._include(_Files.key(base, name), base, kind)
                for arguments in _submakes(text):
                    try:
                        words = [" ".join(self._expand(w, variables, base)) for w in arguments]
                        if any(_is_shell_variable(w) for w in words):
                            raise Unpinned(" ".join(words))
                    except Unpinned:
                        unpinned.append(f"$(MAKE) {' '.join(arguments)} (in {key})")
                        continue
                    context = _make_context(" ".join(words).split(), base)
                    if context not in self.contexts:
                        pending.append(context)
            if not grew and not pending:
                self.files.unpinned.extend(unpinned)
                return
            if len(self.files.states) > MAX_FILES:
                break
        self.files.unpinned.append("too many make files")

    def _context(self, base: str, named: tuple[str, ...]) -> None:
        self.contexts.add((base, named))
        if named:
            for name in named:
                self._include(_Files.key(base, name), base, "-f")
            return
        keys = [_Files.key(base, name) for name in MAKE_NAMES]
        for key in keys:
            self.files.read(key)
        main = next((key for key in keys if self.files.states[key] is not None), None)
        if main is not None:
            self._include(main, base, "make")

    def _include(self, key: str, base: str, kind: str) -> bool:
        """Fingerprint ``key``; parse it when make reads it as a make file. Whether it is
        new."""
        if key in self.seen:
            return False
        self.seen.add(key)
        data = self.files.read(key)
        if self.files.states[key] == UNREADABLE:
            self.files.unpinned.append(f"{key} (not a regular file)")
        if data is not None and not kind.endswith("load"):
            self.parsed[key] = (data.decode("utf-8", errors="replace"), base)
        return True

    def _variables(self) -> dict[str, list[str | None]]:
        """Every value each variable is given anywhere (``None``: one it cannot know)."""
        variables: dict[str, list[str | None]] = {}
        for text, _ in self.parsed.values():
            for line in _logical_lines(text):
                match = _ASSIGNMENT.match(line)
                if match is None or line.startswith("\t"):
                    continue
                name, operator, value = match.groups()
                values = variables.setdefault(name, [])
                if operator == "!=":
                    values.append(None)
                elif operator == "+=" and values:
                    values[:] = [v if v is None else f"{v} {value}" for v in values]
                else:
                    values.append(value)
        return variables

    def _expand_words(
        self, text: str, variables: dict[str, list[str | None]], base: str
    ) -> list[str]:
        names: list[str] = []
        for value in self._expand(text, variables, base):
            for word in value.split():
                names.extend(_glob(self.files.root, base, word) if _is_glob(word) else [word])
        return list(dict.fromkeys(names))

    def _expand(
        self, text: str, variables: dict[str, list[str | None]], base: str, depth: int = 0
    ) -> list[str]:
        """Every value ``text`` may take; raises :class:`Unpinned`."""
        if depth > MAX_DEPTH:
            raise Unpinned(text)
        parts: list[list[str]] = []
        for literal, reference in _references(text):
            if literal:
                parts.append([literal])
            if reference is not None:
                parts.append(self._reference(reference, variables, base, depth))
        values = [""]
        for choices in parts:
            values = list(dict.fromkeys(a + b for a, b in product(values, choices)))
            if len(values) > MAX_ALTERNATIVES:
                raise Unpinned(text)
        return values

    def _reference(
        self, inner: str, variables: dict[str, list[str | None]], base: str, depth: int
    ) -> list[str]:
        expand = self._expand
        function, _, argument = inner.partition(" ")
        if function == "wildcard":
            return [
                " ".join(m for w in value.split() for m in _glob(self.files.root, base, w))
                for value in expand(argument, variables, base, depth + 1)
            ]
        if function == "patsubst":
            pattern, replacement, words = _arguments(argument, 3)
            return [
                " ".join(_patsubst(p, r, word) for word in value.split())
                for p in expand(pattern, variables, base, depth + 1)
                for r in expand(replacement, variables, base, depth + 1)
                for value in expand(words, variables, base, depth + 1)
            ]
        substitution = _SUBSTITUTION.match(inner)
        name = substitution.group(1) if substitution else inner
        if name == "CURDIR":
            values: list[str | None] = [os.path.abspath(self.files.root / base)]
        else:
            values = variables.get(name, [None])
        expanded: list[str] = []
        for value in values:
            if value is None:
                raise Unpinned(inner)
            expanded.extend(expand(value, variables, base, depth + 1))
        if substitution is None:
            return expanded
        old, new = substitution.group(2), substitution.group(3)
        if "%" not in old:
            old, new = f"%{old}", f"%{new}"
        return [" ".join(_patsubst(old, new, w) for w in value.split()) for value in expanded]


def _logical_lines(text: str) -> Iterator[str]:
    """Lines with their ``\\``-newline continuations joined, comments cut (recipe lines,
    which start with a tab, are kept whole)."""
    for line in re.sub(r"\\\r?\n", " ", text).splitlines():
        if not line.startswith("\t"):
            line = re.sub(r"(?<!\\)#.*", "", line)
        yield line


def _directives(text: str) -> Iterator[tuple[str, str]]:
    for line in _logical_lines(text):
        match = _DIRECTIVE.match(line)
        if match is not None:
            yield match.group(1), match.group(2)


def _submakes(text: str) -> Iterator[list[str]]:
    """The arguments of each ``$(MAKE)`` / ``make`` in a recipe line that names a folder or
    a make file (``-C``, ``-f``)."""
    for line in _logical_lines(text):
        if not line.startswith("\t"):
            continue
        for match in _SUBMAKE.finditer(line):
            words = re.split(r"[;&|]", match.group(1), maxsplit=1)[0].split()
            if any(
                w.startswith(("-C", "-f", "--directory", "--file", "--makefile")) for w in words
            ):
                yield words


def _references(text: str) -> Iterator[tuple[str, str | None]]:
    """``text`` as (literal, variable reference) pairs: ``$(X)``, ``${X}``, ``$X``; ``$$``
    is a literal ``$``."""
    literal, i = "", 0
    while i < len(text):
        char = text[i]
        if char != "$" or i + 1 >= len(text):
            literal += char
            i += 1
            continue
        after = text[i + 1]
        if after == "$":
            literal += "$"
            i += 2
        elif after in "({":
            close = ")" if after == "(" else "}"
            level, j = 1, i + 2
            while j < len(text) and level:
                level += {after: 1, close: -1}.get(text[j], 0)
                j += 1
            if level:
                raise Unpinned(text)
            yield literal, text[i + 2 : j - 1]
            literal, i = "", j
        else:
            yield literal, after
            literal, i = "", i + 2
    yield literal, None


def _arguments(text: str, count: int) -> list[str]:
    """A function's comma-separated arguments (commas inside references do not count)."""
    parts: list[str] = []
    level = start = 0
    for i, char in enumerate(text):
        level += {"(": 1, "{": 1, ")": -1, "}": -1}.get(char, 0)
        if char == "," and level == 0 and len(parts) < count - 1:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    if len(parts) != count:
        raise Unpinned(text)
    return [p.strip() for p in parts]


def _patsubst(pattern: str, replacement: str, word: str) -> str:
    head, percent, tail = pattern.partition("%")
    if not percent:
        return replacement if word == pattern else word
    if word.startswith(head) and word.endswith(tail) and len(word) >= len(head) + len(tail):
        stem = word[len(head) : len(word) - len(tail)]
        return replacement.replace("%", stem, 1) if "%" in replacement else replacement
    return word


def _is_glob(word: str) -> bool:
    return any(c in word for c in "*?[")


def _glob(root: Path, base: str, pattern: str) -> list[str]:
    """The paths ``pattern`` matches from make's folder (relative to it), sorted."""
    found = sorted(glob.glob(pattern, root_dir=root / base))
    if len(found) > MAX_FILES:
        raise Unpinned(pattern)
    return found


# -- npm, pnpm, yarn, bun --------------------------------------------------------------


def _node(files: _Files, base: str) -> None:
    package = _Files.key(base, "package.json")
    raw = files.read(package)
    if raw is not None:
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            data = None
        if isinstance(data, dict):
            files.value(package, {f: data.get(f) for f in PACKAGE_FIELDS})
    for name in NODE_FILES:
        settings = files.read(_Files.key(base, name))
        if settings is not None and name in (".yarnrc", ".yarnrc.yml"):
            # The yarn release a project pins is the program that runs its scripts.
            text = settings.decode("utf-8", errors="replace")
            for match in _YARN_PATH.finditer(text):
                files.read(_Files.key(base, match.group(1)))
    for name in LOCKFILES:
        files.present(_Files.key(base, name))


# -- pdm, poe, hatch -------------------------------------------------------------------


def _python(files: _Files, base: str, tools: Sequence[str]) -> None:
    """``pyproject.toml``'s tables of ``tools`` (only they count: dependencies may change),
    the tools' own files, and the files their tables name."""
    pyproject = _Files.key(base, "pyproject.toml")
    raw = files.read(pyproject)
    tables: dict[str, Any] = {}
    if raw is not None:
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            files.states[pyproject] = f"invalid {files.states[pyproject]}"
        else:
            section = data.get("tool")
            tables = {t: section.get(t) for t in tools} if isinstance(section, dict) else {}
            files.value(pyproject, tables)
    for tool in dict.fromkeys(tools):
        for name in (*PYTHON_TOOL_FILES[tool], *_named_files(tables.get(tool))):
            files.read(_Files.key(base, name))


def _named_files(value: Any, depth: int = 0) -> Iterator[str]:
    """The files a pdm / poe table reads too (``include``, ``envfile``, ``env_file``)."""
    if depth > MAX_DEPTH or not isinstance(value, dict):
        return
    for name, item in value.items():
        if name in ("include", "envfile", "env_file"):
            yield from _strings(item)
        else:
            yield from _named_files(item, depth + 1)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
