"""The import-linter contracts of ``pyproject.toml`` (``make lint`` runs them) hold, and each
catches what it is there for: a copy of the package with one bad import breaks it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the package under ``root/src``, with ``root/pyproject.toml``."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root / "src")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_contracts_hold() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert " broken" not in done.stdout.lower().replace("0 broken", "")
    print(done.stdout.strip().splitlines()[-1])


BAD_IMPORTS = {
    "a private module of another package": (
        "policies/_spend.py",
        "from agentfsm.sandbox._process import run_command",
        "Private modules are imported only inside their package",
    ),
    "the adapters from the policies, two parts of one layer": (
        "policies/_spend.py",
        "from agentfsm.adapters.tools import ToolBox",
        "Layers:",
    ),
    "a cycle between packages": (
        "adapters/sessions/_store.py",
        "from agentfsm.adapters.durable import enqueue",
        "No import cycles between packages",
    ),
    "the policies from the conformance kit": (
        "conformance/_report.py",
        "from agentfsm.policies import verify",
        "The conformance kit tests providers",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_IMPORTS))
def test_a_bad_import_breaks_its_contract(case: str, tmp_path: Path) -> None:
    module, line, contract = BAD_IMPORTS[case]
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(
        ROOT / "src" / "agentfsm",
        tmp_path / "src" / "agentfsm",
        ignore=shutil.ignore_patterns("__pycache__", "corpus_data"),
    )
    target = tmp_path / "src" / "agentfsm" / module
    target.write_text(target.read_text("utf-8") + f"\n{line}\n", "utf-8")
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    broken = [row for row in done.stdout.splitlines() if row.rstrip().endswith("BROKEN")]
    assert len(broken) == 1, done.stdout
    assert contract in done.stdout.split("Broken contracts")[1], done.stdout
