"""A fake home for the security tests: every listed secret, the agent's own files, a project.

``HOME`` and the ``XDG_*`` variables of the test point into a temporary folder; the real
home is never touched. Each planted file holds a canary (in its content, never its name:
error messages repeat names).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentfsm.sandbox._hidden import HOME_SECRET_DIRS, HOME_SECRET_FILES

__all__ = ["CANARY", "FakeHome", "use_home"]

CANARY = f"agentfsm-canary-{time.monotonic_ns()}"


class FakeHome:
    """A home holding every listed secret, the agent's own files and a project."""

    def __init__(self, base: Path) -> None:
        self.home = base / "home"
        self.secrets: list[Path] = []
        for name in HOME_SECRET_DIRS:
            self.plant(self.home / name / "key")
        for name in HOME_SECRET_FILES:
            self.plant(self.home / name)
        self.settings = self.home / ".config" / "agentfsm" / "settings.json"
        self.trust = self.home / ".local" / "state" / "agentfsm" / "trusted-settings.json"
        self.session = self.home / ".local" / "state" / "agentfsm" / "sessions" / "p-1" / "s.jsonl"
        for path in (self.settings, self.trust, self.session):
            self.plant(path)
        self.project = self.home / "src" / "project"
        self.project.mkdir(parents=True)

    def plant(self, path: Path) -> None:
        """Write a canary file at ``path`` (its folders made) and count it as a secret."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'{{"canary": "{CANARY}-{path.name}"}}\n', "utf-8")
        self.secrets.append(path)

    def untouched(self) -> bool:
        """Every planted secret is still there with its canary."""
        return all(CANARY in path.read_text("utf-8") for path in self.secrets)


def use_home(fake: FakeHome, monkeypatch: pytest.MonkeyPatch) -> FakeHome:
    """Point ``HOME`` at ``fake`` and clear the variables that would name other places."""
    monkeypatch.setenv("HOME", str(fake.home))
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("HISTFILE", raising=False)
    return fake
