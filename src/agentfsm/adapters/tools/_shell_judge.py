"""Judging one simple command of a line by the tables (for the shell permission rules).

:class:`Judge` reads a command's program and words — as bash reads them, see
:mod:`~agentfsm.adapters.tools._shell_rules` — against the tables of
:mod:`~agentfsm.adapters.tools._shell_tables` and :mod:`~agentfsm.adapters.tools._shell_vetted`:
it records why a command makes the line opaque to a deny rule, and returns why an allow
rule cannot admit it (``None``: every word is vetted). Shells, interpreters, ``awk``,
``sed`` and wrappers have their own judges here; the bash builtins that set variables or
run commands through an option have theirs in
:mod:`~agentfsm.adapters.tools._shell_builtins`.
"""

from __future__ import annotations

import re

from attrs import evolve

from ._shell_builtins import BUILTINS, IDENTIFIER, BuiltinJudge
from ._shell_syntax import SimpleCommand
from ._shell_tables import (
    ALSO_RUNS,
    ASSIGNERS,
    EVALUATORS,
    FILE_RUNNERS,
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
    SHELL_OPTIONS,
    WRAPPERS,
    is_loader,
    reads_input,
    scan,
    sed_script,
)
from ._shell_vetted import PYTEST, VETTED

__all__ = ["Judge"]

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "pdksh", "lksh", "yash", "posh"})
POSIX_SHELLS = frozenset({"sh", "dash", "posh"})
"""Shells whose ``-c`` line is read by the rules as bash reads it, kept to what both read
alike; other shells' ``-c`` lines (``zsh``, ``ksh`` …) follow grammars the rules do not parse."""
AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
_NAME = re.compile(r"[\w.+:-][\w./+@:-]*|/[\w./+@:-]+|\[")
_DURATION = re.compile(r"\d+(\.\d+)?[smhd]?")
_VCS = re.compile(r"(-e|--editable=)?(git|hg|svn|bzr)\+", re.IGNORECASE)


class Judge(BuiltinJudge):
    """Judges simple commands by the tables; collects the commands a line runs and why it
    is opaque."""

    def _simple(self, command: SimpleCommand) -> None:
        position = len(self.commands)
        self.commands.append(command)  # before the commands it wraps
        self.commands[position] = evolve(command, unvetted=self._judge(command))

    def _judge(self, command: SimpleCommand) -> str | None:
        """Judge one command: record why it is opaque; return why an allow rule cannot
        admit it (``None`` when it is vetted)."""
        first = command.words[0]
        if not command.static_name or not _NAME.fullmatch(first) or first.startswith("-"):
            return self._refuse(f"the command name {first!r} is not a plain name written out")
        name, args = command.name, command.words[1:]
        base = re.sub(r"[\d.]+$", "", name)
        literal = command.literal[1:]
        if name in EVALUATORS:
            return self._refuse(f"{name} runs text as code or changes what a name runs")
        builtin = BUILTINS.get(name)
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
        commands, opaque = self.nested(args[index], base != "bash")
        self.complex.append(f"{name} -c")
        self.commands.extend(commands)
        self.opaque.extend(opaque)
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
                if not IDENTIFIER.fullmatch(args[index].split("=", 1)[0]):
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
