"""The hostile suite: servers, files and arguments that try to hang, bloat or crash the agent.

Every case is measured (``measure``) and listed at the end of the run with its outcome, its
seconds and the peak RSS it reached; each test asserts its own bounds.
"""

from __future__ import annotations

import pytest

from .table import ROWS


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not ROWS:
        return
    write = terminalreporter.write_line
    terminalreporter.section("hostile cases")
    width = max(len(f"{row.group}: {row.name}") for row in ROWS)
    outcome_width = min(60, max(len(row.outcome) for row in ROWS))
    write(
        f"{'case':<{width}}  {'outcome':<{outcome_width}}  {'seconds':>7}  "
        f"{'peak RSS MiB':>12}  {'growth':>6}"
    )
    for row in ROWS:
        mark = "" if row.reset else "*"
        write(
            f"{f'{row.group}: {row.name}':<{width}}  {row.outcome[:outcome_width]:<{outcome_width}}"
            f"  {row.seconds:>7.2f}  {row.peak_rss_mb:>11.0f}{mark or ' '}  {row.growth_mb:>6.0f}"
        )
    write(f"{len(ROWS)} hostile cases")
