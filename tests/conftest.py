"""Shared fixtures, and ``requires_program``: tests that run a system program (Graphviz's
``dot``, ``git``) skip with a visible reason where it is absent and fail under ``CI``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

# Imported at collection on purpose: hypothesis's pytest plugin otherwise imports it lazily
# in the terminal summary, where CPython 3.11.7's AST validator can raise a spurious
# "AST constructor recursion depth mismatch" while pytest rewrites its modules.
import hypothesis  # noqa: F401
import pytest

from .helpers import Recorder
from .oracle import Oracle, held_to_the_oracle


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(params=["compiled"])
def oracle() -> Iterator[Oracle]:
    """The test's runs step through the compiled table, the one driver (its name is the test
    id's, which the stored snapshots are named by), each event held to python-statemachine's
    engine (``tests/oracle.py``)."""
    with held_to_the_oracle() as found:
        yield found
    assert found.runs, "the test started no run to hold to the oracle"
    assert not found.disagreements, found.disagreements


def _reason(program: str, package: str) -> str:
    return f"needs the {program!r} program (Debian/Ubuntu: apt-get install {package})"


def require_program(program: str, package: str) -> str:
    """The path of the system program ``program``; without it the test is skipped with a
    reason naming the program and the Debian package that provides it. Under ``CI`` (set
    by ``.ci/run``, which installs these packages) it fails instead of skipping."""
    found = shutil.which(program)
    if found is None:
        reason = _reason(program, package)
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI is set, where every test must run")
        pytest.skip(reason)
    return found


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requires_program(program, package): the test runs a system program; skipped with "
        "the Debian package to install when it is absent (failed under CI)",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip at collection (the summary names each test and why) unless ``CI`` is set."""
    if os.environ.get("CI"):
        return
    for item in items:
        for marker in item.iter_markers("requires_program"):
            program, package = marker.args
            if shutil.which(program) is None:
                item.add_marker(pytest.mark.skip(reason=_reason(program, package)))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under ``CI`` a missing program fails the test (skipped at collection otherwise)."""
    if os.environ.get("CI"):
        for marker in item.iter_markers("requires_program"):
            require_program(*marker.args)
