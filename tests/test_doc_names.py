"""The guides name only what exists: every ``agentfsm.…`` path in README.md, docs/ and
examples/ (or ``engine.…``, written without it) resolves to a public name, every class-like name, ``MAX_…`` constant and
``snake_case(…)`` call in backticks is exported by a public package, and every source file
named is in the repository. (CHANGELOG.md names old things on purpose: not checked here.)"""

from __future__ import annotations

import builtins
import importlib
import pkgutil
import re
from pathlib import Path

import agentfsm
from agentfsm.engine._policy_check import HOOK_NAMES

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "agentfsm"
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "examples").rglob("*.py")),
]

NOT_OURS = {
    # other projects' names the guides mention
    "StateChart",  # python-statemachine
    "TracerProvider",  # OpenTelemetry
    "MeterProvider",
    "BatchSpanProcessor",
    "CancelledError",  # asyncio
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED",  # DBOS
    "Makefile",
    "Authorization",  # HTTP
    "Bearer",
    "NaN",  # a JSON number the wires may carry
    # methods and the model's tools, named as calls
    *HOOK_NAMES,
    "as_dict",
    "read_file",
    "read_output",
}
METRICS = {"agentfsm.agent.turns", "agentfsm.agent.tool_calls"}
"""OpenTelemetry metric names that look like module paths."""
EXAMPLE_FILES = {"lib/python3.X/os.py", "sitecustomize.py"}  # files of an environment, not ours

DOTTED = re.compile(r"\bagentfsm(?:\.[A-Za-z_]\w*)+")
TICKED = re.compile(r"`([^`\n]+)`")
NAME_FORMS = (
    re.compile(r"^([A-Z][a-z]\w*)(?:\(|\.\w|$)"),  # a class: Agent, LoopParams(...), X.attr
    re.compile(r"^(MAX_[A-Z_]+)$"),  # a constant
    re.compile(r"^([a-z]\w*_\w*)\("),  # a function call: read_session(path)
)
SOURCE_FILE = re.compile(r"^[\w./-]+\.py$")
SHORT_PATH = re.compile(r"^((?:engine|adapters|policies|conformance|testing)(?:\.\w+)+)(?:\(|$)")
"""A path written without its ``agentfsm.`` (``engine.reminders.RETRY_TURN``); ``agent.``,
``sandbox.`` and ``cli.`` are left out: ``agent.run(...)`` is a variable's method and
``sandbox.read`` a settings key."""


def _public_packages() -> list[str]:
    found = ["agentfsm", "agentfsm.policies.presets"]
    for info in pkgutil.walk_packages([str(SRC)], prefix="agentfsm."):
        if info.ispkg and not any(part.startswith("_") for part in info.name.split(".")):
            found.append(info.name)
    return found


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` names a public module, or a public module's attribute."""
    parts = dotted.split(".")
    if any(part.startswith("_") for part in parts):
        return False
    for end in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for attr in parts[end:]:
            if not hasattr(target, attr):
                return False
            target = getattr(target, attr)
        return True
    return False


def _repository_files() -> set[str]:
    return {
        path.relative_to(ROOT).as_posix()
        for top in ("src", "tests", "scripts", "examples", "benchmarks")
        for path in (ROOT / top).rglob("*.py")
    }


def test_the_guides_name_only_what_imports() -> None:
    packages = _public_packages()
    exported: set[str] = set()
    for name in packages:
        exported |= set(importlib.import_module(name).__all__)
    parts = {name.split(".")[1] for name in packages if "." in name}
    files = _repository_files()
    wrong: list[str] = []
    checked = 0
    for page in PAGES:
        for number, line in enumerate(page.read_text("utf-8").splitlines(), 1):
            where = f"{page.relative_to(ROOT)}:{number}"
            for dotted in DOTTED.findall(line):
                first = dotted.split(".")[1]
                if dotted in METRICS or not (
                    first in parts or first in agentfsm.__all__ or first.startswith("_")
                ):
                    continue  # a logger, span attribute or metric named agentfsm.…
                checked += 1
                if not _resolves(dotted):
                    wrong.append(f"{where}: {dotted}")
            for ticked in TICKED.findall(line):
                ticked = ticked.strip()
                for form in NAME_FORMS:
                    match = form.match(ticked)
                    if match is None:
                        continue
                    name = match.group(1)
                    checked += 1
                    if (
                        name not in exported
                        and name not in NOT_OURS
                        and not hasattr(builtins, name)
                    ):
                        wrong.append(f"{where}: {name} ({ticked})")
                short = SHORT_PATH.match(ticked)
                if short is not None and not SOURCE_FILE.match(ticked):
                    checked += 1
                    if not _resolves(f"agentfsm.{short.group(1)}"):
                        wrong.append(f"{where}: agentfsm.{short.group(1)} ({ticked})")
                if SOURCE_FILE.match(ticked) and ticked not in EXAMPLE_FILES:
                    checked += 1
                    if not any(f == ticked or f.endswith("/" + ticked) for f in files):
                        wrong.append(f"{where}: no file {ticked}")
    assert wrong == []
    print(f"\n{checked} names and paths in {len(PAGES)} pages resolve")
