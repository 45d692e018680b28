"""What the sandbox tests share: bubblewrap or a visible skip, and the processes left alive."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentfsm.sandbox import BubblewrapSandbox, SandboxUnavailable, detect_sandbox

__all__ = ["alive", "kill_all", "require_bubblewrap", "run_python"]


def require_bubblewrap(root: Path) -> BubblewrapSandbox:
    """The bubblewrap sandbox for ``root``; without one the test is skipped with the hint
    (and fails under CI, where ``.ci/run`` installs bubblewrap)."""
    try:
        sandbox = detect_sandbox(root)
    except SandboxUnavailable as error:
        if os.environ.get("CI"):
            pytest.fail(str(error))
        pytest.skip(str(error))
    assert isinstance(sandbox, BubblewrapSandbox)
    return sandbox


def alive(marker: str) -> list[int]:
    """The processes (on the host's /proc) whose command line contains ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in entry.joinpath("cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return [pid for pid in pids if pid != os.getpid()]


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError, ValueError):
            found += [int(c) for c in task.joinpath("children").read_text().split()]
    return found


def kill_all(marker: str) -> None:
    """Clean up after processes that got away: the marked ones and everything under them."""
    pids = alive(marker)
    for pid in pids:
        pids += _children(pid)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def run_python(
    script: str,
    *args: str,
    timeout: float = 120,
    python: str = sys.executable,
    env: dict[str, str] | None = None,
    **options: Any,
) -> subprocess.CompletedProcess[str]:
    """``script`` run by a Python of its own (its own signal dispositions, forks and exit
    handlers) with this process's ``sys.path`` and ``env`` over its environment; the
    output as text."""
    return subprocess.run(
        [python, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **(env or {})},
        **options,
    )
