"""The sandbox benchmark's verdict on its goal (``benchmarks/sandbox.py``) on samples whose
answer is known without it: no timing happens here."""

from __future__ import annotations

import importlib.util
import math
import random
import statistics
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
GOAL = 1.5

# 40 rounds of a noisy machine: bare bwrap 4-6 ms, the sandbox about 1.45 times it
_noise = random.Random(7)
BARE = [4.0 + 2.0 * _noise.random() for _ in range(40)]
SANDBOXED = [b * (1.45 + 0.2 * (_noise.random() - 0.5)) for b in BARE]


def test_the_interval_holds_the_middle_ninety_percent_of_the_resampled_ratios() -> None:
    """Against every ratio of medians the same resampling gives, counted here: 5 % of them
    lie below the interval and 5 % above (up to ties), none of its bounds is a min or max."""
    draw = random.Random(0).choices
    rounds = list(zip(SANDBOXED, BARE, strict=True))
    ratios = [
        statistics.median(s for s, _ in drawn) / statistics.median(b for _, b in drawn)
        for drawn in (draw(rounds, k=len(rounds)) for _ in range(2000))
    ]
    low, high = bench.ratio_interval(SANDBOXED, BARE)
    below = sum(r < low for r in ratios) / len(ratios)
    above = sum(r > high for r in ratios) / len(ratios)
    assert 0.04 <= below <= 0.05
    assert 0.04 <= above <= 0.05
    assert min(ratios) < low < statistics.median(ratios) < high < max(ratios)
    assert low == math.floor(low * 1000) / 1000  # as reported, rounded outward
    assert high == math.ceil(high * 1000) / 1000


def test_the_interval_does_not_depend_on_the_global_random_state() -> None:
    first = bench.ratio_interval(SANDBOXED, BARE)
    random.seed(12345)
    random.random()
    assert bench.ratio_interval(SANDBOXED, BARE) == first


@pytest.mark.parametrize(("factor", "held"), [(1.2, True), (1.5, True), (1.8, False)])
def test_a_ratio_the_same_in_every_round_is_the_whole_interval(factor: float, held: bool) -> None:
    bare = [4.0 + 0.1 * k for k in range(40)]  # the machine drifts; the ratio does not
    sandboxed = [factor * b for b in bare]
    assert bench.ratio_interval(sandboxed, bare) == (factor, factor)
    assert bench.verdict((factor, factor), len(bare)) is held


def test_a_ratio_just_past_the_goal_reads_past_it() -> None:
    bare = [5.0] * 40
    interval = bench.ratio_interval([5.0 * 1.5004] * 40, bare)
    assert interval == (1.5, 1.501)  # printed as it is judged
    assert bench.verdict(interval, 40) is None


def test_rounds_split_around_the_goal_give_no_verdict() -> None:
    bare = [5.0] * 40
    sandboxed = [5.0 * 1.3] * 20 + [5.0 * 1.7] * 20  # the median falls on either side
    low, high = bench.ratio_interval(sandboxed, bare)
    assert low == pytest.approx(1.3)
    assert high == pytest.approx(1.7)
    assert bench.verdict((low, high), 40) is None


@pytest.mark.parametrize(
    ("interval", "held"),
    [((1.0, 1.5), True), ((1.5, 2.0), None), ((1.501, 2.0), False), ((1.2, 1.501), None)],
)
def test_the_verdict_at_the_goal_s_edges(interval: tuple[float, float], held: bool | None) -> None:
    assert bench.verdict(interval, 40) is held


@pytest.mark.parametrize("rounds", [1, 2, 9])
def test_too_few_rounds_give_no_verdict(rounds: int) -> None:
    assert bench.verdict((1.1, 1.1), rounds) is None
    assert bench.verdict((1.9, 1.9), rounds) is None
    assert bench.verdict((1.1, 1.1), 10) is True
