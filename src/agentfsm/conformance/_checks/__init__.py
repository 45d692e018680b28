"""All the checks, by group.

A check (:class:`~agentfsm.conformance._model.Check`) holds its procedures: recorded mode (on
the bytes a scripted server sends), live mode, and its invariant on a recorded corpus; each
group module (``tools`` is a package) lists its own in ``CHECKS``.
"""

from .._model import Check as _Check

__all__ = ["ALL_CHECKS", "by_id"]


def _collect() -> list[_Check]:
    from . import answers, control, errors, tools, usage, wire

    checks: list[_Check] = []
    for module in (wire, answers, tools, usage, errors, control):
        checks.extend(module.CHECKS)
    ids = [c.id for c in checks]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise RuntimeError(f"duplicate check ids: {sorted(duplicates)}")
    return checks


ALL_CHECKS: list[_Check] = _collect()


def by_id(check_id: str) -> _Check:
    for check in ALL_CHECKS:
        if check.id == check_id:
            return check
    raise KeyError(check_id)
