"""The attack suite's tally: every test records the attacks it tried and which got through.

The table is printed at the end of the run (``tried`` / ``got through`` per attack kind);
each test also asserts that none of its own attacks got through.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentfsm.sandbox import BubblewrapSandbox

from .sandboxing import require_bubblewrap
from .tally import NOTES, TALLY, AttackTally


@pytest.fixture
def attacks(request: pytest.FixtureRequest) -> Iterator[AttackTally]:
    """Record attacks; the test fails if any of them got through."""
    tally = AttackTally(TALLY)
    yield tally
    escaped = tally.escapes
    assert not escaped, f"{len(escaped)} attack(s) got through: {escaped[:10]}"


@pytest.fixture
def bubblewrap(tmp_path: Path) -> BubblewrapSandbox:
    """The OS sandbox; skipped with the install hint when it does not work here (failed
    under ``CI``)."""
    return require_bubblewrap(tmp_path)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TALLY and not NOTES:
        return
    write = terminalreporter.write_line
    terminalreporter.section("attack suite")
    if TALLY:
        width = max(len(kind) for kind in TALLY)
        write(f"{'attack':<{width}}  {'tried':>7}  {'got through':>11}")
        tried_total = escaped_total = 0
        for kind in sorted(TALLY):
            tried, escaped = TALLY[kind]
            tried_total += tried
            escaped_total += escaped
            write(f"{kind:<{width}}  {tried:>7}  {escaped:>11}")
        write(f"{'total':<{width}}  {tried_total:>7}  {escaped_total:>11}")
    for note in NOTES:
        write(note)
