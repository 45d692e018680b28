"""Every CLI test keeps its sessions in its own state folder, never the user's."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentfsm.sandbox import detect_sandbox
from agentfsm.sandbox._process import SandboxUnavailable


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$XDG_STATE_HOME`` for the test: where ``agentfsm run`` keeps sessions by default."""
    folder = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(folder))
    return folder


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A small project folder to run the agent in."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("hello world\n", "utf-8")
    return root


def sandbox_options() -> list[str]:
    """Nothing where the OS sandbox works; ``--no-sandbox`` where it does not (these tests
    are about the command line; tests/security holds the sandbox's own tests)."""
    try:
        detect_sandbox(Path.cwd())
    except SandboxUnavailable:
        return ["--no-sandbox"]
    return []
