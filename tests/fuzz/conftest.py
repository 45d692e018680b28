"""The fuzz suite's tally: how often each invariant was checked and violated, printed at
the end of the test session (``make fuzz`` runs 10,000 runs; 0 violations is the bar)."""

from __future__ import annotations

import pytest

from .invariants import ORACLE, RUNS, TALLY


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    checked = sum(row[0] for row in TALLY.values())
    if not checked:
        return
    write = terminalreporter.write_line
    terminalreporter.section("fuzz invariants")
    width = max(len(name) for name in TALLY)
    write(f"{'invariant':<{width}}  {'checked':>8}  {'violated':>8}")
    for name, (runs, violated) in TALLY.items():
        write(f"{name:<{width}}  {runs:>8}  {violated:>8}")
    write("")
    width = max(len(name) for name in RUNS)
    write(f"{'runs by configuration':<{width}}  {'runs':>8}")
    for name, runs in sorted(RUNS.items()):
        write(f"{name:<{width}}  {runs:>8}")
    write(f"{'total':<{width}}  {sum(RUNS.values()):>8}")
    write("")
    write(
        f"{ORACLE['events']} events sent to both the compiled table and python-statemachine's "
        f"engine, through {ORACLE['runs']} runs and resumes"
    )
