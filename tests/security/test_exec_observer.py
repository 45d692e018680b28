"""The shell rules' verdicts checked against what really runs (``make test-exec``).

Each line of the attack corpus, its literal look-alikes and the everyday corpus runs as the
``shell`` tool runs it — bash in the bubblewrap sandbox, in a fresh copy of a small project
— under ``strace -f``, and every ``execve`` of the process tree is read back
(:mod:`.execwatch`). Then, for each rule set:

* a line a **deny** rule admitted executed no program its patterns name, anywhere in the
  tree (``touch PWNED`` run by ``find``, a substitution, a builtin's callback …);
* a line an **allow** rule admitted executed, itself, only commands the allow rules admit
  when their observed argv is judged as written, and its programs executed no program the
  line names (``find -exec touch``, ``split --filter``): what they ran on their own is
  their implementation (``npm`` runs ``node``, a ``pyenv`` shim runs ``pyenv``).

The attack lines also count as *live* when, run, they did execute the denied program: the
corpus is made of attacks that work once admitted. Tried / admitted / violations are
printed per rule set.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from agentfsm.adapters.tools import Permissions
from agentfsm.adapters.tools._globs import rule_matches

from .execwatch import Exec, trace_line
from .sandboxing import require_bubblewrap
from .shell_corpus import (
    ALLOW_ATTACKS,
    ALLOW_EVERYDAY,
    ATTACKS,
    DENY_ATTACKS,
    DENY_EVERYDAY,
    EVERYDAY,
    LOOK_ALIKES,
)
from .tally import NOTES

pytestmark = [pytest.mark.execobserve, pytest.mark.requires_program("strace", "strace")]

PROJECT = {
    "README.md": "# Demo\n\nA greeting app. TODO: more docs.\n",
    "src/app.py": (
        'def greet(name):\n    return f"Hello {name}"\n\n\ndef main():\n    print(greet("you"))\n'
    ),
    "src/util.py": "def shout(text):\n    return text.upper()\n",
    "tests/test_app.py": (
        'from app import greet\n\n\ndef test_greet():\n    assert greet("x") == "Hello x"\n'
    ),
    "pyproject.toml": '[tool.pytest.ini_options]\npythonpath = ["src"]\n',
    "package.json": (
        '{"name": "demo", "version": "1.0.0", "scripts": '
        '{"test": "node --version", "lint": "node --version", "build": "node --version"}}\n'
    ),
    "Makefile": "test:\n\tpython3 -m pytest -q\nlint:\n\t@echo lint ok\n",
    "requirements.txt": "",
    "scripts/check.sh": "#!/bin/sh\necho ok\n",
    "scripts/report.py": 'print("report")\n',
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small project in a git repository, copied afresh for each line."""
    root = tmp_path_factory.mktemp("project")
    for name, text in PROJECT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, "utf-8")
    (root / "scripts/check.sh").chmod(0o755)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@e", "-C", str(root)]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return root


def _observe(project: Path, scratch: Path, line: str) -> tuple[list[Exec], tuple[Path, ...]]:
    """What ``line`` executed in a fresh copy of the project, and the toolchain folders the
    sandbox showed."""
    workspace = scratch / "ws"
    if workspace.exists():
        shutil.rmtree(workspace)
    shutil.copytree(project, workspace, symlinks=True)
    sandbox = require_bubblewrap(workspace)
    return trace_line(sandbox, line), tuple(sandbox.toolchains.read)


def _patterns(rules: Permissions) -> list[str]:
    return [rule.pattern for rule in rules.deny if rule.pattern is not None]


def _denied(run: Exec, patterns: list[str]) -> bool:
    texts = {" ".join((run.name, *run.argv[1:])), " ".join(run.argv), run.path}
    return any(
        rule_matches(text, pattern) or rule_matches(text + " ", pattern)
        for text in texts
        for pattern in patterns
    )


def _allow_violation(
    run: Exec, line: str, rules: Permissions, toolchains: tuple[Path, ...]
) -> str | None:
    """Why an execution under a line ``rules`` admitted breaks their promise, or ``None``.

    The line's own commands must be admitted as they ran. A program they started may run
    its own parts (the same program, or a file of the toolchain folder it came from: a
    ``pyenv`` shim's hooks), never a program the line names."""
    if run.direct:
        reason = rules.check("shell", shlex.join(run.argv))
        return None if reason is None else f"the line ran {shlex.join(run.argv)!r}: {reason}"
    named = set(re.findall(r"[\w.+-]+", line))
    above = {os.path.basename(argv[0]) for argv in run.chain[1:]}
    home = [t for t in toolchains if any(Path(p).is_relative_to(t) for p in run.above[1:])]
    if any(Path(run.path).is_relative_to(folder) for folder in home):
        return None
    for word in (run.name, os.path.basename(run.argv[0]) if run.argv else ""):
        if word in named and word not in above:
            return f"{run.chain[-1][0]} ran {shlex.join(run.argv)!r}, a program the line names"
    return None


def _report(name: str, tried: int, admitted: int, violations: list[str], extra: str = "") -> None:
    NOTES.append(
        f"exec observer, {name}: tried {tried}, admitted {admitted}, "
        f"violations {len(violations)}{extra}"
    )


def test_attack_lines_run_no_denied_program_once_admitted(project: Path, tmp_path: Path) -> None:
    deny = _patterns(DENY_ATTACKS)
    violations: list[str] = []
    groups = {**ATTACKS, "literal look-alikes": LOOK_ALIKES}
    live_total = 0
    for kind, lines in groups.items():
        live = 0
        admitted = {"deny": 0, "allow": 0}
        found = {"deny": 0, "allow": 0}
        for line in lines:
            runs, toolchains = _observe(project, tmp_path, line)
            ran_denied = [run for run in runs if _denied(run, deny)]
            live += bool(ran_denied)
            if DENY_ATTACKS.check("shell", line) is None:
                admitted["deny"] += 1
                for run in ran_denied:
                    found["deny"] += 1
                    violations.append(f"deny: {line!r} ran {shlex.join(run.argv)!r}")
            if ALLOW_ATTACKS.check("shell", line) is None:
                admitted["allow"] += 1
                for run in runs:
                    why = _allow_violation(run, line, ALLOW_ATTACKS, toolchains)
                    if why:
                        found["allow"] += 1
                        violations.append(f"allow: {line!r}: {why}")
        NOTES.append(
            f"exec observer, {kind}: tried {len(lines)}, admitted {admitted['deny']} (deny "
            f"rules) / {admitted['allow']} (allow rules), violations {found['deny']} / "
            f"{found['allow']}, ran the denied program when run {live}"
        )
        live_total += live if kind in ATTACKS else 0
    attacks = sum(len(lines) for lines in ATTACKS.values())
    assert live_total >= attacks // 2, "the attack corpus should mostly run what it claims"
    assert not violations, "\n".join(violations)


def test_everyday_lines_run_only_what_the_rules_admitted(project: Path, tmp_path: Path) -> None:
    deny = _patterns(DENY_EVERYDAY)
    violations: list[str] = []
    admitted = {"deny": 0, "allow": 0}
    ran = 0
    for line in EVERYDAY:
        runs, toolchains = _observe(project, tmp_path, line)
        ran += bool(runs)
        if DENY_EVERYDAY.check("shell", line) is None:
            admitted["deny"] += 1
            violations += [
                f"deny: {line!r} ran {shlex.join(r.argv)!r}" for r in runs if _denied(r, deny)
            ]
        if ALLOW_EVERYDAY.check("shell", line) is None:
            admitted["allow"] += 1
            for run in runs:
                why = _allow_violation(run, line, ALLOW_EVERYDAY, toolchains)
                violations += [f"allow: {line!r}: {why}"] if why else []
    deny_v = [v for v in violations if v.startswith("deny")]
    allow_v = [v for v in violations if v.startswith("allow")]
    _report("everyday corpus under the deny list", len(EVERYDAY), admitted["deny"], deny_v)
    _report("everyday corpus under the allow list", len(EVERYDAY), admitted["allow"], allow_v)
    assert ran > len(EVERYDAY) // 2, "most everyday lines run a program"
    assert not violations, "\n".join(violations)


def test_the_observer_sees_what_a_line_hides(project: Path, tmp_path: Path) -> None:
    """The observer is not blind: the forms the rules refuse do run ``touch`` through a
    parameter default, a builtin's callback and ``find`` after ``--``."""
    for line in (
        "ls ${x:-$(touch PWNED)}",
        "mapfile -C 'touch PWNED' -c 1 x < README.md",
        "find -- . -exec touch PWNED \\;",
    ):
        runs, _ = _observe(project, tmp_path, line)
        assert any(run.name == "touch" for run in runs), (line, runs)
        assert any(run.name == "touch" and run.direct for run in runs) != ("find" in line)
