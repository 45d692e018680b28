"""The sandbox benchmark's verdict on its goal (``benchmarks/sandbox.py``) on samples whose
answer is known without it: no timing happens here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


def _bench() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "sandbox.py"
    spec = importlib.util.spec_from_file_location("bench_sandbox", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_sandbox", module)
    spec.loader.exec_module(module)
    return module


bench = _bench()


@pytest.mark.parametrize(("factor", "held"), [(1.2, True), (1.45, True), (1.8, False)])
def test_a_ratio_the_same_in_every_round_is_the_whole_interval(factor: float, held: bool) -> None:
    bare = [4.0 + 0.1 * k for k in range(40)]  # the machine drifts; the ratio does not
    sandboxed = [factor * b for b in bare]
    low, high = bench.ratio_interval(sandboxed, bare)
    assert low == pytest.approx(factor)
    assert high == pytest.approx(factor)
    assert bench.verdict((low, high)) is held


def test_rounds_split_around_the_goal_give_no_verdict() -> None:
    bare = [5.0] * 40
    sandboxed = [5.0 * 1.3] * 20 + [5.0 * 1.7] * 20  # the median falls on either side
    low, high = bench.ratio_interval(sandboxed, bare)
    assert low == pytest.approx(1.3)
    assert high == pytest.approx(1.7)
    assert bench.verdict((low, high)) is None


def test_the_interval_is_the_same_for_the_same_samples() -> None:
    bare = [4.0, 4.4, 5.1, 3.9, 4.2, 6.0, 4.1, 4.3]
    sandboxed = [6.0, 6.9, 7.0, 5.8, 6.1, 9.5, 6.2, 6.4]
    assert bench.ratio_interval(sandboxed, bare) == bench.ratio_interval(sandboxed, bare)
