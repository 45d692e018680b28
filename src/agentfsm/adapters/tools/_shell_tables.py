"""The tables the shell permission rules judge programs by, and the option scanner.

Every program a command line runs falls in one of these classes (see
:mod:`agentfsm.adapters.tools._shell_rules` for how the rules use them):

* :data:`INERT` — programs that run no other program and no code, whatever their
  arguments (``ls``, ``cat``, ``rm`` …);
* :data:`RISKY` — programs that are inert except for a few options, refused with every
  abbreviation (``sort --compress-program``, ``rg --pre``, ``split --filter``,
  ``install -s``);
* :data:`~agentfsm.adapters.tools._shell_vetted.VETTED` — programs that do run other
  programs or code (``git``, ``make``, ``find``, ``tar``, ``cargo`` …): each option and
  subcommand must be in the program's :class:`Spec`, spelled out exactly; anything else is
  refused;
* :data:`FILE_RUNNERS` — programs that run files the rules cannot see, with the options
  through which they run code given on the command line (``pylint --init-hook``);
* :data:`RUNNERS` — programs that run other programs or code and are not vetted
  (interpreters, debuggers, editors, ``ssh``, ``taskset`` …): never judged, always refused
  by a deny rule (but :data:`RUNNERS_THAT_PRINT` asked for their version);
* anything else is *unknown*.

Shells, interpreters, ``awk``, ``sed``, wrappers and the bash builtins that set variables
or run commands have their own judges in the rules.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping

from attrs import field, frozen

__all__ = ["INERT", "RISKY", "RUNNERS", "WRAPPERS", "Risky", "Spec", "is_loader", "scan"]


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


@frozen
class Spec:
    """The options and subcommands of a program that are known not to run code."""

    flags: frozenset[str] = field(default="", converter=_set)
    """Options without a value (``-n``, ``--all``)."""
    values: frozenset[str] = field(default="", converter=_set)
    """Options with a value, attached (``-C.``, ``--directory=.``) or the next word."""
    optional: frozenset[str] = field(default="", converter=_set)
    """Options with an optional value: attached, or (short ones) a number as the next word."""
    subcommands: Mapping[str, Spec] | None = None
    """When set, the first operand must name one of these; later words use its spec."""
    numeric: bool = False
    """``-5`` is an option (``git log -5``, ``head -20``)."""
    single_dash: bool = False
    """Long options with one dash and no clusters (``find -name``, ``go test -run``)."""
    anything: bool = False
    """Every word is accepted (subject to ``check``)."""
    check: Callable[[str], str | None] | None = None
    """Judges each operand (every word when ``anything``): a reason when refused."""
    complete: Callable[[set[str], list[str]], str | None] | None = None
    """Judges the whole form once every word is read (the options met, the operands): a
    reason when refused (``git config`` must only read)."""
    info: frozenset[str] = field(default="", converter=_set)
    """Options that make a line complete without a subcommand (``--version``, ``--help``)."""
    rest: Spec | None = None
    """How the words after ``--`` are judged (default: all operands, through ``check``)."""
    dashdash: bool = True
    """``--`` ends the options (``False``: ``find``, which reads its expression after it)."""


def _newer() -> str:
    return " ".join(f"-newer{x}{y}" for x in "aBcm" for y in "aBcmt")


def scan(
    program: str,
    spec: Spec,
    args: tuple[str, ...],
    *,
    stop: bool = False,
    seen: set[str] | None = None,
) -> tuple[str | None, int]:
    """Judge ``args`` against ``spec``: the reason they are refused (``None`` when every
    word is known harmless) and, with ``stop``, the index of the first operand. The
    options met are added to ``seen``."""
    if seen is None:
        seen = set()
    operands: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if spec.anything:
            reason = spec.check(arg) if spec.check else None
            if reason:
                return reason, index
            index += 1
            continue
        if arg == "--" and not spec.dashdash:
            index += 1
            continue
        if arg == "--":
            if stop:
                return None, index + 1
            if spec.rest is not None:
                reason, _ = scan(program, spec.rest, args[index + 1 :])
                return reason or _complete(program, spec, seen, operands), len(args)
            for operand in args[index + 1 :]:
                if spec.check and (reason := spec.check(operand)):
                    return reason, index
                operands.append(operand)
            break
        if arg.startswith("-") and arg != "-":
            reason, used = _option(program, spec, args, index, seen)
            if reason:
                return reason, index
            index += used
            continue
        if stop:
            return None, index
        if spec.subcommands is not None:
            sub = spec.subcommands.get(arg)
            if sub is None:
                return f"{program} {arg}: not a subcommand the rules can vet", index
            reason, _ = scan(f"{program} {arg}", sub, args[index + 1 :])
            return reason, len(args)
        if spec.check and (reason := spec.check(arg)):
            return reason, index
        operands.append(arg)
        index += 1
    if spec.subcommands is not None and not stop and not spec.info & seen:
        return f"{program}: a subcommand is required", len(args)
    return _complete(program, spec, seen, operands), len(args)


def _complete(program: str, spec: Spec, seen: set[str], operands: list[str]) -> str | None:
    return spec.complete(seen, operands) if spec.complete is not None else None


def _option(
    program: str, spec: Spec, args: tuple[str, ...], index: int, seen: set[str]
) -> tuple[str | None, int]:
    """One option word: the reason it is refused, and how many words it used."""
    arg = args[index]
    if spec.numeric and arg[1:].isdigit():
        return None, 1
    if arg.startswith("--") or spec.single_dash:
        name, equals, _ = arg.partition("=")
        seen.add(name)
        if name in spec.flags and not equals:
            return None, 1
        if name in spec.optional:
            return None, 1
        if name in spec.values:
            if equals:
                return None, 1
            if index + 1 < len(args):
                return None, 2
            return f"{program} {name}: its value is missing", 1
        return f"{program} {name}: not an option the rules can vet", 1
    for position in range(1, len(arg)):
        option = "-" + arg[position]
        seen.add(option)
        if option in spec.flags:
            continue
        if option in spec.optional:
            attached = position + 1 < len(arg)
            following = index + 1 < len(args) and args[index + 1].isdigit()
            return None, 1 if attached or not following else 2
        if option in spec.values:
            if position + 1 < len(arg):
                return None, 1
            if index + 1 < len(args):
                return None, 2
            return f"{program} {option}: its value is missing", 1
        return f"{program} {option}: not an option the rules can vet", 1
    return None, 1


# --- inert programs and programs with a few risky options ---------------------------------

INERT = _set(
    """
    ls dir vdir cat tac nl head tail wc echo pwd true false : cd pushd popd
    mkdir rmdir rm cp mv ln touch chmod chown chgrp truncate mktemp dd shred
    stat du df basename dirname realpath readlink which whoami id uname hostname
    groups printenv date sleep cut tr uniq tee cmp comm join paste fold fmt expand unexpand
    column seq yes rev numfmt od xxd hexdump strings base64 base32 md5sum sha1sum sha224sum
    sha256sum sha384sum sha512sum b2sum cksum sum tree jq grep egrep fgrep diff
    csplit unzip gzip gunzip zcat bzip2 bunzip2 bzcat xz unxz xzcat zstd unzstd lz4
    kill type umask ulimit shift return exit break continue nproc tput clear sync iconv
    locale
    """
)
"""Programs and builtins none of whose options runs another program or code. The bash
builtins that set variables or run commands through an option (``read``, ``printf -v``,
``mapfile -C``, ``jobs -x``, ``test -v``, ``set``, ``shopt`` …) have their own judges in
the rules."""

ALSO_RUNS: dict[str, tuple[str, ...]] = {
    "egrep": ("grep", "-E"),
    "fgrep": ("grep", "-F"),
    "zcat": ("gzip", "-cd"),
    "gunzip": ("gzip", "-d"),
}
"""Inert programs that are scripts running another program (Debian's ``egrep`` runs
``grep -E``): a rule naming that program covers them too."""


@frozen
class Risky:
    """The options through which an otherwise inert program runs another program."""

    long: tuple[str, ...] = ()
    """Long options; any abbreviation of one counts (GNU programs accept unique prefixes)."""
    short: str = ""
    """Short option letters, alone or in a cluster (``-Ds`` holds ``-s``)."""

    def refusal(self, program: str, args: tuple[str, ...]) -> str | None:
        """Why ``args`` may make ``program`` run another program, or ``None``."""
        for arg in args:
            option = arg.split("=", 1)[0]
            if arg.startswith("--"):
                if len(option) > 2 and any(r.startswith(option) for r in self.long):
                    return f"{program} {option}: runs a program or code it is given"
            elif arg.startswith("-") and any(letter in arg[1:] for letter in self.short):
                return f"{program} {arg}: runs a program or code it is given"
        return None


RISKY: dict[str, Risky] = {
    "sort": Risky(("--compress-program",)),
    "rg": Risky(("--pre", "--hostname-bin", "--search-zip"), "z"),
    "sdiff": Risky(("--diff-program",)),
    "diff3": Risky(("--diff-program",)),
    "split": Risky(("--filter",)),
    "install": Risky(("--strip", "--strip-program"), "s"),
    "file": Risky(("--uncompress", "--uncompress-noreport"), "zZ"),
}
"""Otherwise inert programs and the options through which they run a program (``rg -z``
and ``file -z`` run decompressors, ``install -s`` runs ``strip``). A word that might be
one of them is refused, after ``--`` too."""

FILE_RUNNERS: dict[str, Risky] = {
    "pylint": Risky(("--init-hook",)),
    "mypy": Risky(("--python-executable",)),
}
"""Programs that run files the rules cannot see (plugins, configuration), and the options
through which they run code or a program given on the command line."""

# --- programs that run other programs and are not vetted ----------------------------------

RUNNERS = _set(
    """
    csh tcsh fish rc es busybox toybox irb tclsh wish expect R Rscript julia ghci runghc
    runhaskell ocaml
    guile racket sbcl clisp gforth jshell java javac groovy scala kotlin elixir iex erl
    escript swift dotnet lua luajit deno bun pwsh powershell osascript
    gdb lldb pdb valgrind strace ltrace perf ldd
    vi vim nvim view vimdiff rvim ex ed red emacs emacsclient nano pico joe mcedit less more
    most man info pager editor sensible-editor sensible-pager
    ssh scp sftp rsync sshpass mosh telnet nc ncat netcat socat wget
    taskset setpriv prlimit chrt flock ionice unshare nsenter chroot setarch linux32 linux64
    numactl cgexec systemd-run run-parts start-stop-daemon daemonize at batch crontab
    sudo doas su runuser pkexec fakeroot firejail bwrap proot xvfb-run catchsegv
    tmux screen script dtach abduco watch parallel entr watchexec nodemon unbuffer rlwrap
    npx pnpx bunx uvx pipx uv poetry pipenv conda mamba tox nox hatch pdm rye
    docker podman kubectl nerdctl lxc vagrant zip 7z 7za dc bc
    gcc g++ cc c++ clang clang++ rustc ld gold lld cmake bazel xdg-open open
    sensible-browser
    """
)
"""Programs that run other programs or code and whose options are not vetted (shells,
interpreters and ``awk``-likes have their own judges in the rules; ``env``, ``timeout``
and the other vetted wrappers are in :data:`WRAPPERS`)."""

RUNNER_INFO = frozenset({"--version", "-V", "-version"})
"""The one argument with which a runner of :data:`RUNNERS_THAT_PRINT` prints its version."""
RUNNERS_THAT_PRINT = _set(
    "gcc g++ cc c++ clang clang++ rustc cmake java javac docker podman ssh rsync vim nvim "
    "emacs less man tmux uv poetry pipenv pipx conda tox nox hatch pdm rye deno bun dotnet "
    "swift gdb valgrind strace wget"
)
"""Runners whose only argument ``--version``, ``-V`` or ``-version`` prints their version
and runs nothing (an interpreter such as ``tclsh`` would run a file named ``--version``)."""

_LOADER = re.compile(r"(^ld([-.].*)?\.so.*|.*\.so(\.[\d.]+)?$)")


def is_loader(name: str) -> bool:
    """``ld.so``, ``ld-linux-x86-64.so.2`` and other shared objects run as programs."""
    return _LOADER.match(name) is not None


# --- wrappers: vetted options, then a command ----------------------------------------------

WRAPPERS: dict[str, Spec] = {
    "env": Spec("-i --ignore-environment -0 --null -v --debug -", "-u --unset -C --chdir"),
    "timeout": Spec("--preserve-status --foreground -v --verbose", "-s --signal -k --kill-after"),
    "nice": Spec("", "-n --adjustment", numeric=True),
    "nohup": Spec(),
    "stdbuf": Spec("", "-i -o -e --input --output --error"),
    "setsid": Spec("-f --fork -w --wait -c --ctty"),
    "time": Spec("-p -v -a --portability --verbose --append -q --quiet", "-o -f --output --format"),
    "command": Spec("-p -v -V"),
    "builtin": Spec(),
    "xargs": Spec(
        "-0 --null -r --no-run-if-empty -t --verbose -x --exit -o --open-tty",
        "-a --arg-file -d --delimiter -E -L --max-lines -n --max-args -P --max-procs -s "
        "--max-chars -I --replace",
        "-i -e -l --eof",
    ),
}
"""Programs that run the command given after their options."""


# --- vetted programs -----------------------------------------------------------------------


def _target(word: str) -> str | None:
    if "=" in word:
        return f"make {word}: a variable set on the command line can change what recipes run"
    return None


MAKE = Spec(
    "-k --keep-going -s --silent --quiet -n --dry-run --just-print --recon -B --always-make "
    "-i --ignore-errors -q --question -r --no-builtin-rules -R --no-builtin-variables -S "
    "--no-keep-going --stop -t --touch -w --print-directory --no-print-directory -p "
    "--print-data-base --trace --warn-undefined-variables -L --check-symlink-times -v "
    "--version -h --help -e --environment-overrides",
    "-C --directory -o --old-file --assume-old -W --what-if --new-file --assume-new -I "
    "--include-dir",
    "-j --jobs -l --load-average --max-load -O --output-sync --debug",
    check=_target,
)

FIND = Spec(
    "-print -print0 -ls -prune -quit -true -false -depth -d -empty -executable -readable "
    "-writable -nouser -nogroup -xdev -mount -follow -daystart -ignore_readdir_race "
    "-noignore_readdir_race -noleaf -not -a -and -o -or -H -L -P -O0 -O1 -O2 -O3 -help "
    "-version --help --version",
    "-name -iname -path -ipath -wholename -iwholename -regex -iregex -regextype -type -xtype "
    "-size -perm -user -group -uid -gid -links -inum -samefile -newer -anewer -cnewer -mtime "
    "-mmin -atime -amin -ctime -cmin -used -maxdepth -mindepth -fstype -lname -ilname -printf "
    "-context -files0-from -D " + _newer(),
    single_dash=True,
    dashdash=False,
)
"""``find``: ``--`` ends only its leading options, so the expression after it is judged too.
No ``-exec``, ``-execdir``, ``-ok``, ``-okdir``, ``-delete``, ``-fprint*``, ``-fls``."""

TAR = Spec(
    "-c -x -t -r -u -z -j -J -a -v -k -p -h -O -m -P -S -d -w --create --extract --get --list "
    "--append --update --gzip --gunzip --ungzip --bzip2 --xz --lzma --zstd --lzip --lzop "
    "--auto-compress --verbose --keep-old-files --overwrite --preserve-permissions "
    "--same-permissions --dereference --to-stdout --touch --no-same-owner --no-same-permissions "
    "--same-owner --absolute-names --sparse --wildcards --no-wildcards --recursion "
    "--no-recursion --numeric-owner --force-local --totals --show-transformed-names "
    "--keep-newer-files --skip-old-files --unlink-first --remove-files --diff --compare "
    "--ignore-failed-read --one-file-system --exclude-vcs --exclude-vcs-ignores --anchored "
    "--no-anchored --null --verbatim-files-from --delete --interactive --help --version",
    "-f --file -C --directory --exclude -X --exclude-from -T --files-from --strip-components "
    "--transform --xform --owner --group --mode --mtime --format -H -b --blocking-factor "
    "--label -V -N --newer --after-date --newer-mtime --suffix --sort --occurrence",
    "--backup",
)
"""``tar``; ``-I``, ``--use-compress-program``, ``--to-command``, ``--checkpoint-action``,
``--info-script``, ``--rsh-command`` and the like are not in it."""

# --- shells and interpreters: vetted options, then a script -------------------------------

SHELL = Spec(
    "-b -C -e -f -h -m -n -p -t -u -v -x -B -E -P -T -c --noprofile --norc --noediting "
    "--verbose --restricted -r --version --help",
    "-o",
)
"""A shell's options (``+x`` is read as ``-x``); ``-s``, ``-i``, ``-l``/``--login`` (which
read startup files), ``-O`` (bash's ``shopt``), ``-k``, ``-a``, ``-H``, ``--init-file``,
``--rcfile`` and ``--posix`` are not in it, and ``-o`` names only :data:`SHELL_OPTIONS`."""
SHELL_OPTIONS = _set("errexit nounset pipefail xtrace verbose noglob noclobber noexec")
"""The ``set -o`` names the rules accept (``set -o`` and a shell's ``-o``)."""
SHELL_FLAGS = "eufxvCnbhmBEPT"
"""The ``set`` letters the rules accept (``-a`` exports every assignment, ``-k`` puts
assignments anywhere in a command's environment, ``-H`` and ``-o history`` expand ``!``)."""

INTERPRETERS: dict[str, Spec] = {
    "node": Spec(
        "--test --no-warnings --enable-source-maps --trace-warnings --trace-uncaught "
        "--experimental-vm-modules --expose-gc --pending-deprecation --throw-deprecation "
        "--no-deprecation --preserve-symlinks --abort-on-uncaught-exception --version -v "
        "--help -h",
        "",
        "--max-old-space-size --stack-size --unhandled-rejections --test-reporter "
        "--test-name-pattern --input-type",
    ),
    "perl": Spec("-w -W -X -T -t -c -l -a -n -p -v -V", "-I"),
    "ruby": Spec("-w -W -c -l -a -n -p -v --verbose --version -h --help", "-I"),
    "php": Spec("-l -n -q -v --version -h --help", "-f"),
}
"""Interpreters other than Python: the options known not to take code (``-e``, ``-r``,
``--require``, ``-M``, ``-x``, ``-i`` … are not in them); the first operand is the script."""
INTERPRETER_INFO = _set("--version -v -V --help -h")
"""Options after which an interpreter given no script prints and exits (``node -v``)."""

PYTHON_FLAGS = "bBdEhIOPqsSuvVx"
"""Python's short options without a value (``-i``, which reads code after the script, is
not one of them)."""
PYTHON_MODULES = frozenset({"pytest"})
"""Modules ``python -m`` may run for an allow rule."""
PYTHON_FILE_MODULES: dict[str, Risky] = {
    **dict.fromkeys(
        _set(
            "pytest unittest venv json.tool py_compile compileall ruff black isort "
            "http.server ensurepip build twine pyflakes flake8"
        ),
        Risky(),
    ),
    **FILE_RUNNERS,
    "pip": Risky(("--python",)),
}
"""Modules that run files, not code given on the command line (a deny rule compares them),
with the options through which they do run code or a program given on it."""

HARMLESS_VARIABLES = _set(
    "LANG LANGUAGE LC_ALL LC_CTYPE LC_MESSAGES LC_COLLATE LC_NUMERIC LC_TIME TZ TERM "
    "NO_COLOR FORCE_COLOR CLICOLOR CLICOLOR_FORCE COLUMNS LINES CI PYTHONUNBUFFERED "
    "PYTHONDONTWRITEBYTECODE PYTHONHASHSEED PYTHONUTF8 PYTHONPATH RUST_BACKTRACE RUST_LOG "
    "NODE_ENV CARGO_TERM_COLOR CGO_ENABLED GOOS GOARCH"
)
"""Variables an assignment may set without hiding code from a deny rule (``GIT_*``,
``LD_PRELOAD``, ``PAGER``, ``EDITOR``, ``BASH_ENV``, ``PYTHONSTARTUP`` … are not among them)."""

EVALUATORS = _set(
    "eval exec source . trap alias unalias enable hash let fc bind complete compgen coproc "
    "select function"
)
"""Builtins that run text as code or change what a name runs (``source`` runs a file in
the line's own shell, which may change how bash reads the lines after it)."""
ASSIGNERS = _set("export declare typeset local readonly")
"""Builtins whose ``NAME=value`` operands are assignments."""

_STDIN = re.compile(
    r"(^|/)dev/+(std(in|out|err)|fd(/|$)|tty)|(^|/)proc/+[^/]+/+(fd|fdinfo|task|root|cwd)(/|$)"
)


def reads_input(word: str) -> bool:
    """``word`` names the process's own input or a way to it (``/dev/stdin``,
    ``/dev/./stdin``, ``/proc/self/../self/fd/0``, ``/proc/self/root/…``)."""
    return _STDIN.search(posixpath.normpath(word)) is not None or _STDIN.search(word) is not None


SED_FLAGS = "nErsuzb"
"""sed's short options without a value (``-i`` takes an attached suffix, ``-e`` a script,
``-l`` a number; ``-f``, a script in a file, is not vetted)."""
SED_LONG = _set(
    "--quiet --silent --regexp-extended --separate --unbuffered --null-data --posix --debug "
    "--sandbox --binary --follow-symlinks --help --version"
)


def sed_script(script: str) -> str | None:
    """Why a sed script may run a program or write a file (``e``, ``s///e``, ``w``), or
    ``None``. Commands it does not know are refused too."""
    index, size = 0, len(script)
    while index < size:
        char = script[index]
        if char in " \t\n;{}":
            index += 1
            continue
        index = _sed_address(script, index)
        if index >= size:
            return None if index == size else "an unterminated address"
        char = script[index]
        if char in "{}":
            index += 1
        elif char == "#":
            index = _line_end(script, index)
        elif char in ":bBtT":
            index = _label_end(script, index + 1)
        elif char in "aic":
            index = _text_end(script, index + 1)
        elif char in "rR":
            index = _line_end(script, index)
        elif char in "wW":
            return f"its {char} command writes a file"
        elif char == "e":
            return "its e command runs a program"
        elif char in "sy":
            index, reason = _sed_substitute(script, index)
            if reason:
                return reason
        elif char in "=dDgGhHlLnNpPqQxzF":
            index += 1
            while index < size and script[index].isdigit():
                index += 1
        elif char == "v":
            index = _label_end(script, index + 1)
        else:
            return f"its command {char!r} is not one the rules can vet"
    return None


def _sed_address(script: str, index: int) -> int:
    size = len(script)
    for part in range(2):
        while index < size and script[index] in " \t":
            index += 1
        if index >= size:
            return index
        char = script[index]
        if char.isdigit() or (part and char in "+~"):
            index += 1
            while index < size and (script[index].isdigit() or script[index] == "~"):
                index += 1
        elif char == "$":
            index += 1
        elif char == "/" or char == "\\":
            start = index + 1 if char == "/" else index + 2
            delimiter = "/" if char == "/" else script[index + 1 : index + 2]
            if not delimiter:
                return size + 1
            index = _delimited(script, start, delimiter)
            while index < size and script[index] in "IM":
                index += 1
        else:
            break
        if part == 0 and index < size and script[index] == ",":
            index += 1
            continue
        break
    while index < size and script[index] in " \t!":
        index += 1
    return index


def _delimited(script: str, index: int, delimiter: str) -> int:
    """The index after the closing ``delimiter`` (past the end when there is none)."""
    while index < len(script):
        if script[index] == "\\":
            index += 2
        elif script[index] == delimiter:
            return index + 1
        else:
            index += 1
    return len(script) + 1


def _sed_substitute(script: str, index: int) -> tuple[int, str | None]:
    command = script[index]
    delimiter = script[index + 1 : index + 2]
    if not delimiter or delimiter in "\n\\":
        return len(script), f"its {command} command has no delimiter the rules can read"
    index = _delimited(script, index + 2, delimiter)
    index = _delimited(script, index, delimiter)
    if index > len(script):
        return index, f"an unterminated {command} command"
    while index < len(script) and script[index] not in ";\n}#":
        flag = script[index]
        if command == "s" and flag in "gpiImM0123456789 \t":
            index += 1
        elif flag in "wW":
            return index, "its s///w flag writes a file"
        elif flag == "e":
            return index, "its s///e flag runs a program"
        else:
            return index, f"its {command} flag {flag!r} is not one the rules can vet"
    return index, None


def _line_end(script: str, index: int) -> int:
    end = script.find("\n", index)
    return len(script) if end < 0 else end


def _label_end(script: str, index: int) -> int:
    while index < len(script) and script[index] not in ";\n":
        index += 1
    return index


def _text_end(script: str, index: int) -> int:
    while index < len(script):
        if script[index] == "\\":
            index += 2
        elif script[index] == "\n":
            return index
        else:
            index += 1
    return len(script)
