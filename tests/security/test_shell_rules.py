"""Shell permission rules against a shell: every bypass of the issue, variants, and the
harmless lines that must stay usable."""

from __future__ import annotations

import os
import random
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentfsm.adapters.tools import Permissions
from agentfsm.adapters.tools._shell_rules import MAX_LINE, parse_command_line
from agentfsm.adapters.tools._shell_tables import sed_script

from .tally import AttackTally

DENY_RM = Permissions.of(deny=["shell(rm *)"])
ALLOW_GIT = Permissions.of(allow=["shell(git *)"])
NOT_VETTED = "not an option the rules can vet"

CHILD_MEMORY = 512 * 1024 * 1024
"""Address space and file size a child of these tests may use: a line that runs away
(``yes``, a brace expansion) ends there, not in this process's memory."""


def _bounded_child() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))
    resource.setrlimit(resource.RLIMIT_FSIZE, (CHILD_MEMORY, CHILD_MEMORY))


def run_bash(
    line: str, cwd: str | Path, env: dict[str, str] | None = None
) -> tuple[int, bytes, bytes]:
    """Run ``line`` with bash, bounded: memory, time (5 s) and output, which goes to files
    read back up to 1 MiB each. Returns the exit code (-1: killed at the time limit), the
    output and the errors."""
    with tempfile.TemporaryFile() as output, tempfile.TemporaryFile() as errors:
        try:
            code = subprocess.run(
                ["bash", "--norc", "--noprofile", "-c", line],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=errors,
                preexec_fn=_bounded_child,
                timeout=5,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            code = -1
        output.seek(0)
        errors.seek(0)
        return code, output.read(1 << 20), errors.read(1 << 20)


ISSUE_DENY = [
    "sh +e -c 'rm x'",
    "sh -o errexit -c 'rm x'",
    "/usr/bin/r[m] x",
    "bash -c '{rm,x}'",
    "env '-Srm x'",
    "timeout -s KILL 5 rm x",
    "taskset 1 rm x",
    "taskset -c 0 rm x",
    "setpriv --reuid=1000 rm x",
    "prlimit --nofile=64 rm x",
    "chrt -f 1 rm x",
    "flock /tmp/lock rm x",
    "flock -c 'rm x' /tmp/lock",
    "/lib64/ld-linux-x86-64.so.2 /bin/rm x",
    "python3 -W ignore -c 'import os; os.remove(\"x\")'",
    "python3 -m timeit 'import os; os.remove(\"x\")'",
    "echo 'rm x' | sh /dev/stdin",
    "echo 'import os' | python3 /dev/stdin",
    "echo 'BEGIN { system(\"rm x\") }' | awk -f /dev/stdin",
    "sed -n '1e rm x' f",
    "make --eva='x:;rm x' x",
    "printf 'x:\\n\\trm x\\n' | make -f /dev/stdin x",
    "gdb -batch -ex '!rm x'",
    "vi -c ':!rm x' -c ':q' f",
    "zip -TT 'rm x' a.zip f",
    "ssh -oProxyCommand='rm x' host",
    "tar --checkpoint=1 --checkpoint-act=exec='rm x' -cf a.tar f",
    "tar -I'sh -c \"rm x\"' -cf a.tar f",
    "git grep -O'rm x' foo",
    "git ls-remote --upload-pac='rm x' .",
    "GIT_SSH_COMMAND='rm x' git fetch origin",
    "git difftool -x 'rm x' HEAD",
    "git rebase -x 'rm x' HEAD~1",
    "git clone -u 'rm x' a b",
    "git archive --exec='rm x' --remote=. HEAD",
]
"""Every form the issue lists, against ``deny=["shell(rm *)"]``."""

ISSUE_GIT = ["git grep -O less foo", *(command for command in ISSUE_DENY if "git " in command)]
"""The git forms of the issue, against ``allow=["shell(git *)"]``."""

VARIANTS_DENY = [
    "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 /bin/rm x",
    "/lib/ld-linux-aarch64.so.1 /bin/rm x",
    "ld.so /bin/rm x",
    "busybox rm x",
    "busybox sh -c 'rm x'",
    "toybox rm x",
    "command -p rm x",
    "/usr/bin/env rm x",
    "env - rm x",
    "env -u HOME rm x",
    "env -i PATH=/tmp rm x",
    "exec -a name rm x",
    "python3 <<< 'import os'",
    "sh <<< 'rm x'",
    "sh <<EOF\nrm x\nEOF",
    "sh -s < script",
    "bash -s",
    "bash --init-file /dev/stdin",
    "bash --rcfile x -i",
    "BASH_ENV=x bash script.sh",
    "ENV=x sh -i",
    "xargs -a list rm",
    "xargs -a list sh -c",
    "echo rm x | xargs env",
    "echo rm x | xargs -0 nice",
    "echo 'grep -O less x' | xargs git",
    "xargs -I{} sh -c '{}' < list",
    "watch rm x",
    "nice rm x",
    "nice -n 5 rm x",
    "nice --adjust=5 sh -c 'rm x'",
    "stdbuf -o0 rm x",
    "ionice -c3 rm x",
    "script -c 'rm x' /dev/null",
    "perl -x script",
    "perl -e 'unlink \"x\"'",
    "perl -Mstrict script.pl",
    "python3 -I -c 'import os'",
    "python3 -X dev -c 'import os'",
    "python3 -Ic 'import os'",
    "python3 -i script.py",
    "python3 -",
    "python3 /proc/self/fd/0",
    "python3 /dev/fd/0",
    'node --eval \'require("fs").rmSync("x")\'',
    "node -r ./x.js app.js",
    "node -p 'x'",
    "env -S 'rm x'",
    "env --split-string='rm x'",
    "env --split-str='rm x'",
    "timeout --sig=KILL 5 rm x",
    "git -C . grep -O less foo",
    "git -C . grep --open-files-in-pager=less foo",
    "git grep --open-files-in-p=less foo",
    "git grep -nO less foo",
    "make -f- x",
    "make -f - x",
    "make --file=/dev/stdin x",
    "make --fil=x x",
    "make CC='rm x' all",
    "make -E 'x:;rm x' x",
    "find . -fls /tmp/x",
    "find . -exec rm {} +",
    "find . -execdir rm {} ';'",
    "find . -ok rm {} ';'",
    "find . -fprint /tmp/x",
    "find . -delete",
    "tar --to-command='rm x' -xf a.tar",
    "tar --use-compress-prog='rm x' -cf a.tar f",
    "tar -Irm -cf a.tar f",
    "tar -cI/bin/sh -f a.tar f",
    "tar cIf 'rm x' a.tar f",
    "tar -cf 'host:a.tar' f",
    "tar --info-script='rm x' -cf a.tar f",
    "rsync -e 'sh -c \"rm x\"' a b",
    "less +'!rm x' f",
    "man -P 'rm x' ls",
    "git -p log",
    "git config core.pager 'rm x'",
    "git -c core.pager='rm x' log",
    "git -ccore.pager='rm x' log",
    "git --config-env=core.pager=X log",
    "git --exec-path=/tmp log",
    "git log --ext-diff",
    "git submodule foreach 'rm x'",
    "git bisect run rm x",
    "sort --compress-program='rm x' f",
    "sort --compress-p='rm x' f",
    "rg --pre 'rm x' foo",
    "rg --pr='rm x' foo",
    "sed 's/x/y/e' f",
    "sed -e 'w /tmp/x' f",
    "sed --expression='1e rm x' f",
    "sed -f /dev/stdin f",
    "sed -i 's/a/b/' *.py",
    "sed -n '$!{e rm x\n}' f",
    "sed '/a/,/b/ { s/a/b/ ; e rm x\n}' f",
    "awk 'BEGIN { system(\"rm x\") }'",
    "awk 'BEGIN { print | \"sh\" }'",
    "gawk -e 'BEGIN { system(\"rm x\") }'",
    "awk --source='BEGIN { system(\"rm x\") }'",
    "LD_PRELOAD=./x.so ls",
    "PAGER='rm x' git log",
    "EDITOR='rm x' git commit",
    "PYTHONSTARTUP=x python3",
    "PERL5OPT=-Mx perl s.pl",
    "NODE_OPTIONS='--require ./x' node a.js",
    "export GIT_SSH_COMMAND='rm x'; git fetch",
    "declare -x GIT_EXTERNAL_DIFF='rm x'",
    "declare -n LANG='a[$(rm x)]'",
    "printf -v 'a[$(rm x)]' x",
    "test -v 'a[$(rm x)]'",
    "let 'x=$(rm x)'",
    "hash -p /bin/rm ls; ls x",
    "alias ls=rm; ls x",
    "r''m x",
    "$'\\x72m' x",
    '"${RM}" x',
    "~/rm x",
    "./rm x",
    "x=$(printf rm); $x x",
    "*m x",
    "r? x",
    "{rm,} x",
    "time rm x",
    "/usr/bin/time rm x",
    "setsid rm x",
    "nohup rm x",
    "python3 -m pytest --pdb",
    "python3 -m pytest --pdbc=x:y",
    "cargo --config 'target.x.runner=\"rm x\"' run",
    "cargo +nightly build",
    "cargo clippy -- -C linker=rm",
    "go test -exec 'rm x' ./...",
    "go build -toolexec='rm x' .",
    "go build -ldflags=-extld=rm .",
    "npm exec rm x",
    "npx rm x",
    "npm run build --script-shell=/bin/sh",
    "npm test -- '$(rm x)'",
    "yarn node -e 'x'",
    "docker run img rm x",
    "gcc -wrapper rm,x a.c",
    "cmake -E rm x",
    "unshare rm x",
    "chroot / rm x",
    "sudo rm x",
    "su -c 'rm x'",
    "dash -c 'rm x'",
    "zsh -c 'rm x'",
    "fish -c 'rm x'",
    'bash -c "bash -c \'sh -c \\"rm x\\"\'"',
    "echo x && `printf rm` x",
    "echo $((1 + $(rm x)))",
    "f() { rm x; }; f",
    "echo $\\\n(rm x)",
    'echo "$\\\n(rm x)"',
    "echo $\\\n{y:-$\\\n(rm x)}",
    "cat <\\\n(rm x)",
    "echo ~\\\nroot",
    "shopt -qs expand_aliases",
    "shopt -s -q expand_aliases",
    "shopt -os history",
    "shopt -qs extdebug",
    "time -- rm x",
    "time -p -- rm x",
    "time\t--\trm x",
    "-- rm x",
]
"""Variants of our own, against ``deny=["shell(rm *)"]``."""

VARIANTS_GIT = [
    "git -c alias.x='!rm x' x",
    "git -ccore.pager=less log",
    "git --exec-path=/tmp log",
    "git -p log",
    "git --paginate log",
    "git --pag log",
    "git config core.pager 'rm x'",
    "git config --global core.sshCommand 'rm x'",
    "git -C . grep -O less foo",
    "git grep --open-files-in-pager=less foo",
    "git log --ext-diff",
    "git log --textconv",
    "git diff --output=/tmp/x",
    "git diff --outp=/tmp/x",
    "git submodule foreach 'rm x'",
    "git bisect run rm x",
    "git help log",
    "git fetch --upload-pack='rm x' origin",
    "git push --receive-pack='rm x' origin",
    "git push --exec='rm x' origin",
    "git clone --upload-pack='rm x' a b",
    "git clone --config core.sshCommand='rm x' a b",
    "git clone --template=/tmp/t a b",
    "git merge -s ours x",
    "git commit -e",
    "git log $(cat secret)",
    "git log *",
    "git grep foo | sh",
    "git status && rm x",
    "env git status",
    "nice git status",
    "sh -c 'git status'",
    "g\\it grep -O less foo",
    "git mergetool -t x",
    "git filter-branch --tree-filter 'rm x'",
    "git rebase --exe='rm x' HEAD~1",
    "git rebase -i HEAD~1",
]
"""Variants of our own, against ``allow=["shell(git *)"]``."""

HARMLESS_DENY_RM = [
    "ls -la",
    "ls \\\n  -la",
    "echo '$\\\n(rm x)'",
    "shopt -qs nullglob",
    "shopt -s globstar dotglob",
    "git status",
    "git log --oneline -5",
    "git diff HEAD~1 -- src",
    "git add -A && git commit -m 'drop rm x from the docs'",
    "make test",
    "make -j4 lint",
    "python -m pytest -q",
    "python3 script.py",
    "PYTHONPATH=src python3 -m pytest -q tests",
    "sh ./build.sh",
    "bash -c 'ls -la && make test'",
    "grep -rn foo src",
    "cat README.md | head",
    "echo rm is a word",
    "./gradlew build",
    "cargo test",
    "go test ./...",
    "npm test",
    "npm run build",
    "find . -name '*.py' -type f",
    "sed -n '1,5p' f",
    "sed -i 's/a/b/g' f.py",
    "sed -e 's/a/b/' -e '/^#/d' f",
    "awk '{print $1}' f",
    "awk -F: '{ print $1 }' /etc/passwd",
    "tar -xzf a.tgz -C out",
    "tar xzf a.tgz",
    "timeout 60 make test",
    "env LANG=C sort f",
    "LANG=C ls",
    "nice -n 5 make",
    "xargs grep foo < list",
    "cd src && ls",
    'for f in *.py; do wc -l "$f"; done',
    "[ -f x ] && cat x",
    "sort -u f | uniq -c",
    "rg -n foo src",
    "mkdir -p build && cp a build/",
    "git log --format='%h %s' | head -20",
    "node app.js",
    "perl script.pl",
]
"""Lines a deny rule for ``rm`` must not refuse."""

ALLOW_RULES = Permissions.of(
    allow=[
        "shell(git *)",
        "shell(make *)",
        "shell(make)",
        "shell(ls *)",
        "shell(python -m pytest*)",
        "shell(pytest*)",
        "shell(grep *)",
        "shell(npm *)",
        "shell(cargo *)",
        "shell(go *)",
        "shell(sed *)",
        "shell(find *)",
        "shell(tsc*)",
        "shell(mkdir *)",
        "shell(cp *)",
        "shell(echo *)",
        "shell(tail *)",
        "shell(wc *)",
    ]
)
HARMLESS_ALLOW = [
    "git status",
    "git log --oneline -5",
    "git log -n5 --stat",
    "git diff HEAD~1",
    "git diff --cached -- src",
    "git show",
    "git show HEAD:README.md",
    "git branch",
    "git branch --show-current",
    "git grep foo",
    "git grep -n -e foo -- src",
    "git -C . status",
    "git --no-pager log -3",
    "git add -A",
    "git commit -m 'fix: a thing'",
    "git config --get user.name",
    "git rev-parse --abbrev-ref HEAD",
    "make",
    "make test",
    "make -j4 lint",
    "make -j 4 lint",
    "make -C sub test",
    "ls -la",
    "python -m pytest -q",
    "python -m pytest -x -k 'not slow' tests",
    "pytest -q tests",
    "grep -rn foo src",
    "npm run build",
    "npm test",
    "cargo test --release",
    "cargo clippy -- -D warnings",
    "go test ./...",
    "go test -run TestX -count=1 ./pkg",
    "sed -n '1,5p' f",
    "sed 's/a/b/g' f",
    "find . -name '*.py' -type f",
    "tsc --noEmit",
    "mkdir -p x",
    "cp a b",
    "echo hi",
    "tail -n 20 f",
    "wc -l f",
]
"""Lines the allow rules above must admit."""


@pytest.mark.parametrize(
    ("deny", "allow"),
    [(ISSUE_DENY, ISSUE_GIT), (VARIANTS_DENY, VARIANTS_GIT)],
    ids=["issue forms", "variants"],
)
def test_bypasses_are_denied(attacks: AttackTally, deny: list[str], allow: list[str]) -> None:
    for command in deny:
        attacks.record("shell deny rule", DENY_RM.check("shell", command) is None, command)
    for command in allow:
        attacks.record("shell allow rule", ALLOW_GIT.check("shell", command) is None, command)


@pytest.mark.parametrize("command", HARMLESS_DENY_RM)
def test_harmless_lines_pass_a_deny_rule(command: str) -> None:
    assert DENY_RM.check("shell", command) is None


@pytest.mark.parametrize("command", HARMLESS_ALLOW)
def test_harmless_lines_are_admitted_by_allow_rules(command: str) -> None:
    assert ALLOW_RULES.check("shell", command) is None


ALLOWED_ONLY = "permission denied: shell is only allowed for shell(git *)"
DENIED_BY = "permission denied by rule 'shell(rm *)'"
REFUSALS = [
    (ALLOW_GIT, "git grep -O less foo", f"{ALLOWED_ONLY} (git grep -O: {NOT_VETTED})"),
    (ALLOW_GIT, "git ls-remote --upload-pac=x .", f"(git ls-remote --upload-pac: {NOT_VETTED})"),
    (ALLOW_GIT, "git difftool HEAD", "(git difftool: not a subcommand the rules can vet)"),
    (
        Permissions.of(allow=["shell(./gradlew *)"]),
        "./gradlew build",
        "(gradlew has no entry in the tables of vetted commands)",
    ),
    (
        Permissions.of(allow=["shell(python3 *)"]),
        "python3 x.py",
        "(python3 runs the script x.py, which the rules cannot see)",
    ),
    (ALLOW_GIT, "git status | cat", "(cat: no allow rule matches it)"),
    (ALLOW_GIT, "git status > out", "no redirection but to /dev/null"),
    # A vetted command the pattern does not cover: no extra reason.
    (ALLOW_GIT, "ls", ALLOWED_ONLY),
    (
        DENY_RM,
        "env -S 'rm x'",
        f"{DENIED_BY}: env -S: {NOT_VETTED} (so the rule cannot check what the line runs)",
    ),
    (DENY_RM, "/usr/bin/r[m] x", "the command name '/usr/bin/r[m]' is not a plain name written"),
    (DENY_RM, "GIT_SSH_COMMAND=x git fetch", "assigning GIT_SSH_COMMAND can make programs run"),
    (DENY_RM, "taskset 1 rm x", "taskset can run other programs and its options are not vetted"),
    (DENY_RM, "rm x", DENIED_BY),
    (DENY_RM, "ls ${x:-$(rm x)}", "a parameter expansion with an operator (${…})"),
    (DENY_RM, "cat <<EOF\n$(rm x)\nEOF", "a here-document, whose body the rules do not read"),
    (DENY_RM, "ls ~$(rm x)", "a ~ expansion other than ~ and ~/…"),
    (DENY_RM, "echo ${1@P}", "a parameter expansion with an operator"),
    (DENY_RM, "$'\\x72m' x", "ANSI-C quoting ($'…')"),
    (DENY_RM, "sh -c 'ls &> f'", "&> means something else to sh than to bash"),
    (DENY_RM, "split --filter='rm x' f", "split --filter: runs a program or code it is given"),
    (DENY_RM, "install --strip-program=rm -s a b", "install --strip-program: runs a program"),
    (DENY_RM, "jobs -x rm x", "jobs -x runs a command"),
    (DENY_RM, "mapfile -C 'rm x' a < f", "mapfile -C runs a command"),
    (DENY_RM, "find -- . -exec rm {} +", "find -exec: not an option the rules can vet"),
    (DENY_RM, "sh /dev/./stdin", "sh reads code from its input"),
    (DENY_RM, "python3 /proc/self/../self/fd/0", "python3 reads code from its input"),
    (DENY_RM, "pylint --init-hook='x' f", "pylint --init-hook: runs a program or code"),
    (DENY_RM, "read PATH < f; ls", "assigning PATH can make programs run code"),
    (
        Permissions.of(allow=["shell(ls *)"]),
        "ls ${x:-$(rm x)}",
        "(${x:-$(rm x)}: a parameter expansion with an operator (${…}), which can run commands)",
    ),
]
"""Refused lines and what the reason says: the whole reason where it starts with
"permission denied", its end where it starts with "(", else a part of it."""


@pytest.mark.parametrize(("rules", "command", "expected"), REFUSALS)
def test_refusals_name_the_rule_the_word_and_the_reason(
    rules: Permissions, command: str, expected: str
) -> None:
    reason = rules.check("shell", command) or ""
    if expected.startswith("permission denied"):
        assert reason == expected
    elif expected.startswith("("):
        assert reason.endswith(expected)
    else:
        assert expected in reason


def test_a_deny_pattern_for_a_name_covers_its_expanded_arguments() -> None:
    rules = Permissions.of(deny=["shell(rm -rf *)"])
    assert rules.check("shell", "rm -rf x") is not None
    reason = rules.check("shell", "rm -r{f,} x") or ""
    assert "the arguments of rm are expanded when the line runs" in reason
    assert rules.check("shell", "rm x") is None
    assert rules.check("shell", "ls *.py") is None
    # git runs programs: any expanded word makes it opaque, whatever the pattern.
    reason = Permissions.of(deny=["shell(git push *)"]).check("shell", "git pu{sh,} o") or ""
    assert "git pu{sh,}: a word expanded when the line runs" in reason


def test_the_sed_script_reader() -> None:
    for script in ("1,5p", "s/a/b/g", "/x/d", "$!N;P;D", "s|a|b|2", "y/abc/xyz/", ":a;N;ba"):
        assert sed_script(script) is None, script
    for script in ("1e rm x", "s/a/b/e", "w out", "s/a/b/w out", "e", "s/a", "k"):
        assert sed_script(script) is not None, script


def test_parsed_lines_keep_their_public_shape() -> None:
    line = parse_command_line("git status")
    assert line.simple
    assert [command.words for command in line.commands] == [("git", "status")]
    assert line.commands[0].unvetted is None
    assert line.matches("git *")
    assert not line.touches("rm *")
    wrapped = parse_command_line("timeout 5 rm x")
    assert [command.name for command in wrapped.commands] == ["timeout", "rm"]
    assert wrapped.structure == ("timeout",)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("rm -cxs'\"\\$`;|&(){}[]*?~\n\u2028\udcff=/ab"))))
@example("echo $'${' }")
@example("printf '%s\\0' /\" \"$'\" \"${%@$'")
def test_any_text_parses_without_raising(source: str) -> None:
    line = parse_command_line(source)
    assert isinstance(DENY_RM.check("shell", source), (str, type(None)))
    assert isinstance(ALLOW_GIT.check("shell", source), (str, type(None)))
    if any(command.name == "rm" for command in line.commands):
        assert DENY_RM.check("shell", source) is not None


UNCLOSED = [
    "echo $'${' }",
    "echo a$'${'",
    "printf '%s\\0' /\" \"$'\" \"${%@$'",
    "ls $'${x' && rm x",
    "time -p echo $'${'",
]
"""Lines holding a ``${`` the parser's lexer lets through (inside ``$'…'``) with no ``}``
after it in the word: once read on without end, growing memory without bound."""

BOUNDED_PARSE = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from agentfsm.adapters.tools import Permissions
deny = Permissions.of(deny=["shell(rm *)"])
for line in sys.stdin.read().split("\\0"):
    print(deny.check("shell", line))
"""


def test_an_unclosed_parameter_expansion_is_refused_in_bounded_memory() -> None:
    """Read in a child held to 1 GiB and 60 s: each line is refused, in one line that says
    the parser could not read it, instead of the memory of the agent's process running
    out."""
    done = subprocess.run(
        [sys.executable, "-c", BOUNDED_PARSE],
        input="\0".join(UNCLOSED),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    reasons = done.stdout.splitlines()
    assert len(reasons) == len(UNCLOSED)
    for line, reason in zip(UNCLOSED, reasons, strict=True):
        assert reason.startswith("permission denied by rule 'shell(rm *)'"), (line, reason)
        assert "bad substitution: no closing '}'" in reason, (line, reason)


def test_a_line_longer_than_the_rules_read_is_refused_unread() -> None:
    """The parser's time grows faster than the line, in the agent's own process: a line
    past :data:`MAX_LINE` characters is opaque without being parsed (a deny rule refuses
    it, saying why), one at the bound is read."""
    pipeline = "ls|" * (MAX_LINE // 3) + "rm x"
    assert len(pipeline) > MAX_LINE
    line = parse_command_line(pipeline)
    assert line.commands == ()
    assert line.opaque == (
        f"the command line is {len(pipeline)} characters long, longer than the rules read "
        f"({MAX_LINE}); write it to a script file and run that",
    )
    assert "longer than the rules read" in (DENY_RM.check("shell", pipeline) or "")
    assert "longer than the rules read" in (ALLOW_GIT.check("shell", "git status " * 2000) or "")
    at_bound = "ls|" * ((MAX_LINE - 4) // 3) + "rm x"
    assert len(at_bound) <= MAX_LINE
    read = parse_command_line(at_bound)
    assert read.opaque == ()
    assert [command.name for command in read.commands][-2:] == ["ls", "rm"]
    assert DENY_RM.check("shell", at_bound) == "permission denied by rule 'shell(rm *)'"
    assert Permissions().check("shell", pipeline) is None  # no rule: nothing to read it for


WORD_ALPHABET = [
    *"ab -_/.=:~*?[]{},$'\"\\`@!#%&;|<>()\n\t",
    *["${", "$(", "${x}", "$'", "~/", "..", "' '", '" "', "{a,", "}", "\\{", "\\,", "'{'"],
    "\\\n",
]


@pytest.mark.requires_program("bash", "bash")
@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(WORD_ALPHABET), min_size=1, max_size=10))
@example(["--fil", "{a,", "' '", "}"])
@example(["{a,", '" "', "}"])
@example(["x", "{a,", "..", "}"])
def test_words_read_as_literal_are_what_bash_passes(pieces: list[str]) -> None:
    """The arguments the rules read in a line they accept, all literal, are to the letter
    the arguments bash passes: read a second way, by bash itself."""
    source = "printf '%s\\0' " + "".join(pieces)
    line = parse_command_line(source)
    if line.opaque or len(line.commands) != 1 or not all(line.commands[0].literal):
        return
    if "redirection" in line.structure:
        return  # the words go elsewhere
    if "background job" in line.structure:
        return  # printf may print after bash has exited
    with tempfile.TemporaryDirectory() as folder:
        code, output, errors = run_bash(source, folder)
    assert b"syntax error" not in errors, source  # bash reads the line as the rules do
    if code != 0:
        return  # a redirection from a missing file: printf did not run
    printed = output.decode("utf-8", "surrogateescape").split("\0")[:-1]
    words = list(line.commands[0].words[2:])
    assert printed == (words or [""]), source


CONTINUED = [
    "time -p -- rm x",
    "time -- rm x",
    "echo $(rm x)",
    'echo "$(rm x)"',
    "echo ${y:-$(rm x)}",
    "cat <(rm x)",
    "ls >(rm x)",
    "echo `rm x`",
    "coproc rm x",
    "echo ~$(rm x)",
    "x=$(rm x) ls",
    "f() { rm x; }; f",
    "ls && rm x",
    "echo a # b\nrm x",
]
"""Lines that run ``rm x``, cut by line continuations at every place below."""


@pytest.mark.requires_program("bash", "bash")
def test_line_continuations_anywhere_hide_nothing(attacks: AttackTally) -> None:
    """bash drops a backslash-newline outside single quotes and comments before it reads a
    line: cut anywhere by one or two, each line above still runs ``rm x`` when bash runs
    it (checked), and the deny rule refuses it."""
    with tempfile.TemporaryDirectory() as folder:
        for base in CONTINUED:
            for index in range(len(base) + 1):
                for cut in ("\\\n", "\\\n\\\n"):
                    line = base[:index] + cut + base[index:]
                    admitted = DENY_RM.check("shell", line) is None
                    ran = False
                    if admitted:
                        open(f"{folder}/x", "w").close()
                        run_bash(line, folder)
                        ran = not os.path.exists(f"{folder}/x")
                    attacks.record("shell deny rule: line continuations", ran, line)


def test_a_deny_pattern_covers_the_program_under_its_versioned_names() -> None:
    """``python3.11`` is the program ``python3`` (on Debian, ``/usr/bin/python3`` links to
    it): a deny rule for ``python3`` refuses it, folder or not; ``pip3`` is ``pip``."""
    rules = Permissions.of(deny=["shell(python3 *)", "shell(pip *)", "shell(gcc *)"])
    for line in (
        "python3.11 scripts/report.py",
        "/usr/bin/python3.11 scripts/report.py",
        "ls && python3.12 -m pytest",
        "pip3 install x",
        "gcc-12 --version",
    ):
        assert rules.check("shell", line) is not None, line
    for line in ("python scripts/report.py", "python3-config --cflags", "sha256sum x"):
        assert rules.check("shell", line) is None, line


MUTATED = [
    "echo $(touch PWNED)",
    "echo `touch PWNED`",
    "ls <(touch PWNED)",
    "echo ${x:-$(touch PWNED)}",
    'echo "$(touch PWNED)"',
    "time -p touch PWNED",
    "sh -c 'touch PWNED'",
    "echo x # $(touch PWNED)",
    "echo a\\ $(touch PWNED)",
    "f() { touch PWNED; }; f",
    "nice touch PWNED",
    "cat <<< $(touch PWNED)",
]
"""Lines that run ``touch``, mutated below."""
PIECES = [
    *"\\'\"\n\r\t #${}();&|`@!*?[]~=<>-:,",
    "\\\n",
    "''",
    '""',
    "$'",
    "${",
    "--",
    "\u00a0",
    "\u2028",
]


@pytest.mark.requires_program("bash", "bash")
def test_mutated_attack_lines_run_nothing_a_deny_rule_admitted(
    attacks: AttackTally, tmp_path: Path
) -> None:
    """Attack lines with characters inserted or dropped at random (seeded): a line the
    deny rule for ``touch`` admits runs no ``touch`` when bash runs it — seen by a
    ``touch`` first on ``PATH`` that leaves a mark (a redirection making a file is not
    one)."""
    deny = Permissions.of(deny=["shell(touch *)"])
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    mark = tmp_path / "ran"
    (bin_folder / "touch").write_text(f"#!/bin/sh\n: > '{mark}'\n", "utf-8")
    (bin_folder / "touch").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PATH": f"{bin_folder}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    rng = random.Random(20261207)
    for _ in range(600):
        line = rng.choice(MUTATED)
        for _ in range(rng.randint(1, 3)):
            index = rng.randint(0, len(line))
            if rng.random() < 0.2:
                line = line[:index] + line[index + 1 :]
            else:
                line = line[:index] + rng.choice(PIECES) + line[index:]
        ran = False
        if deny.check("shell", line) is None:
            mark.unlink(missing_ok=True)
            run_bash(line, work, env)
            ran = mark.exists()
        attacks.record("shell deny rule: mutated attack lines", ran, line)
