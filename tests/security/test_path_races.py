"""The path tools against a background job that swaps a folder (and a file) for a symlink out.

A separate process exchanges, as fast as it can, a real folder ``d/`` (holding a harmless
``f``) with a symlink ``d -> <outside>`` whose ``f`` holds a secret, and a real file ``g``
with a symlink ``g -> ../outside/f`` (``renameat2(RENAME_EXCHANGE)``: the name always
exists, it is just not always what was checked). Meanwhile every path tool is called over
and over. An attack got through when the secret or an outside name shows up, or a file
outside the workspace changed: a check on a string followed by a use of the string would
lose this race within a few hundred calls.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentfsm import ToolResult
from agentfsm.adapters.tools import WorkspaceTools

from .tally import AttackTally

pytestmark = pytest.mark.race

CALLS = 2_000
SECRET = "SECRET-RACE-CONTENT"
KIND = "race: a folder swapped for a symlink out"

FLIPPER = r"""
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
swaps = 0
def stop(*_):
    print(swaps, flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
os.chdir(sys.argv[1])
pairs = [(b"d", b"d_link"), (b"g", b"g_link")]
while True:
    for a, b in pairs:
        if libc.renameat2(-100, a, -100, b, 2) != 0:
            print("renameat2 failed:", os.strerror(ctypes.get_errno()), flush=True)
            os._exit(3)
        swaps += 1
    if swaps == 1000:
        print("ready", flush=True)
"""


class Race:
    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "ws"
        self.outside = tmp / "outside"
        (self.root / "d").mkdir(parents=True)
        (self.root / "d" / "f").write_text("harmless RACE\n", "utf-8")
        (self.root / "g").write_text("harmless RACE\n", "utf-8")
        self.outside.mkdir()
        (self.outside / "f").write_text(f"{SECRET} RACE\n", "utf-8")
        (self.outside / "XNAME-SECRET").write_text(f"{SECRET} RACE\n", "utf-8")
        (self.root / "d_link").symlink_to(self.outside)
        (self.root / "g_link").symlink_to("../outside/f")
        self.before = self.state()

    def state(self) -> dict[str, tuple[int, bytes]]:
        return {
            entry.name: (entry.inode(), Path(entry.path).read_bytes())
            for entry in os.scandir(self.outside)
        }

    def escaped(self, result: ToolResult) -> bool:
        text = f"{result.output}\n{result.error or ''}"
        return "SECRET" in text or self.state() != self.before


@contextlib.contextmanager
def flipping(root: Path, calls: int = CALLS) -> Iterator[None]:
    """The swapping job, running in ``root`` (``d``/``d_link`` and ``g``/``g_link``)."""
    flipper = subprocess.Popen(
        [sys.executable, "-c", FLIPPER, str(root)], stdout=subprocess.PIPE, text=True
    )
    assert flipper.stdout is not None
    try:
        first = flipper.stdout.readline().strip()
        assert first == "ready", first
        yield
        assert flipper.poll() is None, "the swapping job stopped early"
    finally:
        if flipper.poll() is None:
            flipper.send_signal(signal.SIGTERM)
        swaps = flipper.stdout.read().strip()
        flipper.wait(10)
        flipper.stdout.close()
    assert int(swaps.splitlines()[-1]) > 10 * calls


@pytest.fixture
def race(tmp_path: Path) -> Iterator[Race]:
    setup = Race(tmp_path)
    with flipping(setup.root):
        yield setup


def hammer(
    attacks: AttackTally, race: Race, name: str, call: Callable[[], ToolResult]
) -> tuple[int, float]:
    """Call ``call`` CALLS times; record each. Returns (successes, seconds)."""
    started = time.monotonic()
    successes = 0
    for _ in range(CALLS):
        result = call()
        successes += result.ok
        attacks.record(KIND, race.escaped(result), f"{name}: {result.output[:80]!r}")
    return successes, time.monotonic() - started


def test_a_folder_swapped_for_a_symlink_out(race: Race, attacks: AttackTally) -> None:
    tools = WorkspaceTools(race.root)
    calls: dict[str, Callable[[], ToolResult]] = {
        "read_file d/f": lambda: tools.read_file("d/f"),
        "list_dir d": lambda: tools.list_dir("d"),
        "write_file d/f": lambda: tools.write_file("d/f", "harmless RACE\n"),
        "edit_file d/f": lambda: tools.edit_file("d/f", "RACE", "RACE"),
        "grep in d": lambda: tools.grep("RACE|SECRET", "d"),
        "grep d/* from the root": lambda: tools.grep("RACE|SECRET", ".", glob="d/*"),
        "glob d/*": lambda: tools.glob("d/*"),
        "glob * in d": lambda: tools.glob("*", "d"),
        "read_file g": lambda: tools.read_file("g"),
        "write_file g": lambda: tools.write_file("g", "harmless RACE\n"),
        "edit_file g": lambda: tools.edit_file("g", "RACE", "RACE"),
        "grep g": lambda: tools.grep("RACE|SECRET", "g"),
    }
    for name, call in calls.items():
        successes, _ = hammer(attacks, race, name, call)
        # The race is real: the tools got through to the real folder some of the time.
        assert successes > 0, name


INSTALL_KIND = "race: a folder swapped for a symlink into the agent's install"
INSTALL_CALLS = 1_000


def test_a_folder_swapped_for_a_symlink_into_the_agents_install(
    tmp_path: Path, attacks: AttackTally
) -> None:
    """The same swaps, with the symlinks leading into the agent's own (read-only)
    site-packages inside the workspace instead of out of it."""
    root = tmp_path / "ws"
    site_packages = root / ".venv" / "lib" / "python3.11" / "site-packages"
    site_packages.mkdir(parents=True)
    (site_packages / "mod.py").write_text("harmless RACE\n", "utf-8")
    (root / "d").mkdir()
    (root / "d" / "f").write_text("harmless RACE\n", "utf-8")
    (root / "g").write_text("harmless RACE\n", "utf-8")
    (root / "d_link").symlink_to(".venv/lib/python3.11/site-packages")
    (root / "g_link").symlink_to(".venv/lib/python3.11/site-packages/mod.py")

    def installed() -> dict[str, tuple[int, bytes]]:
        return {
            entry.name: (entry.inode(), Path(entry.path).read_bytes())
            for entry in os.scandir(site_packages)
        }

    before = installed()
    tools = WorkspaceTools(root, readonly=[".venv"])
    calls: dict[str, Callable[[], ToolResult]] = {
        "write_file d/evil.pth": lambda: tools.write_file("d/evil.pth", "import os\n"),
        "write_file d/mod.py": lambda: tools.write_file("d/mod.py", "PWNED RACE\n"),
        "write_file g": lambda: tools.write_file("g", "PWNED RACE\n"),
        "edit_file g": lambda: tools.edit_file("g", "RACE", "RACE"),
    }
    with flipping(root, INSTALL_CALLS):
        for name, call in calls.items():
            successes = 0
            for _ in range(INSTALL_CALLS):
                result = call()
                successes += result.ok
                changed = installed() != before
                attacks.record(INSTALL_KIND, changed, f"{name}: {result.output[:80]!r}")
            # The race is real: some calls reached the real folder or file.
            assert successes > 0, name
    assert installed() == before
