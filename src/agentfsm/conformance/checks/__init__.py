"""All the checks, by group."""

from __future__ import annotations

from ..model import Check

__all__ = ["ALL_CHECKS", "by_id"]


def _collect() -> list[Check]:
    from . import answers, control, errors, tools, usage, wire

    checks: list[Check] = []
    for module in (wire, answers, tools, usage, errors, control):
        checks.extend(module.CHECKS)
    ids = [c.id for c in checks]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise RuntimeError(f"duplicate check ids: {sorted(duplicates)}")
    return checks


ALL_CHECKS: list[Check] = _collect()


def by_id(check_id: str) -> Check:
    for check in ALL_CHECKS:
        if check.id == check_id:
            return check
    raise KeyError(check_id)
