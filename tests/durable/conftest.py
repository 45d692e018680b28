"""A DBOS runtime per test, on a SQLite system database in the test's folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentfsm.adapters.durable import DurableRuntime


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DurableRuntime]:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with DurableRuntime(f"sqlite:///{tmp_path / 'durable.sqlite'}", polling_interval=0.05) as rt:
        yield rt
