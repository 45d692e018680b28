"""The hostile suite's table: each case with its outcome, seconds and peak RSS.

Peak RSS is the process's resident-set high-water mark during the case: it is reset before
the case (``/proc/self/clear_refs``, Linux) and read after it (``VmHWM``). Where the reset is
not possible the figure is the high-water mark so far, marked with ``*``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from attrs import define, field

__all__ = ["ROWS", "CaseRow", "measure", "peak_rss_mb", "reset_peak_rss"]


@define
class CaseRow:
    """One hostile case."""

    group: str
    name: str
    outcome: str = "?"
    seconds: float = 0.0
    peak_rss_mb: float = 0.0
    rss_before_mb: float = 0.0
    reset: bool = True
    notes: list[str] = field(factory=list)

    @property
    def growth_mb(self) -> float:
        """How far the high-water mark rose above the RSS at the start of the case."""
        return max(0.0, self.peak_rss_mb - self.rss_before_mb)


ROWS: list[CaseRow] = []


def _status(field_name: str) -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def reset_peak_rss() -> bool:
    """Reset the RSS high-water mark to the current RSS; ``False`` where that is refused."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


def peak_rss_mb() -> float:
    """The RSS high-water mark, in MiB."""
    return _status("VmHWM")


@contextlib.contextmanager
def measure(group: str, name: str) -> Iterator[CaseRow]:
    """Time one case and watch its memory; the caller sets ``row.outcome``."""
    row = CaseRow(group, name)
    ROWS.append(row)
    row.reset = reset_peak_rss()
    row.rss_before_mb = _status("VmRSS")
    started = time.monotonic()
    try:
        yield row
    finally:
        row.seconds = time.monotonic() - started
        row.peak_rss_mb = peak_rss_mb()
