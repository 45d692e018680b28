"""Counting attacks: kind → [tried, got through], shared by the whole test session."""

from __future__ import annotations

__all__ = ["NOTES", "TALLY", "AttackTally"]

TALLY: dict[str, list[int]] = {}
NOTES: list[str] = []
"""Lines printed under the table (measured rates, observed executions)."""


class AttackTally:
    """One test's view of the tally."""

    def __init__(self, table: dict[str, list[int]]) -> None:
        self.table = table
        self.escapes: list[str] = []

    def record(self, kind: str, escaped: bool, detail: str = "") -> None:
        """One attack of ``kind`` was tried; ``escaped`` says it got through."""
        row = self.table.setdefault(kind, [0, 0])
        row[0] += 1
        if escaped:
            row[1] += 1
            self.escapes.append(f"{kind}: {detail}")
