"""Fuzzed runs of ``run_conversation`` and ``Agent`` (with and without the coding-agent
preset and sessions): random replies, unicode and malformed arguments, provider errors,
slow, raising and blocking tools, tiny context budgets, aborts, interrupts and outside
cancellation; the ten invariants of :mod:`tests.fuzz.invariants` on each run, the last
that every event took the compiled table and python-statemachine's engine to the same
state.

``AGENTFSM_FUZZ_RUNS`` sets the number of runs (200 by default, split between the two
tests), ``AGENTFSM_FUZZ_SEED`` a seed (otherwise the runs are the same every time), and
``AGENTFSM_FUZZ_KEEP_GOING=1`` keeps running after a violation so that every run is counted
(the test then fails at the end with the smallest reproducer per invariant); without it, the
first violation fails the test with a shrunk reproducer.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

from .harness import observe
from .invariants import check_all, describe
from .strategies import Scenario, scenarios

RUNS = int(os.environ.get("AGENTFSM_FUZZ_RUNS", "200"))
SEED = os.environ.get("AGENTFSM_FUZZ_SEED")
KEEP_GOING = os.environ.get("AGENTFSM_FUZZ_KEEP_GOING", "") not in ("", "0")

pytestmark = pytest.mark.fuzz


def _profile(runs: int) -> Callable[[Any], Any]:
    def apply(test: Any) -> Any:
        test = settings(
            max_examples=max(1, runs),
            deadline=None,
            derandomize=SEED is None,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate] if KEEP_GOING else [Phase.generate, Phase.shrink],
        )(test)
        return seed(int(SEED))(test) if SEED is not None else test

    return apply


class Findings:
    """Violations kept while running on (keep-going mode): the smallest scenario each."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.smallest: dict[str, tuple[int, Scenario, str]] = {}

    def add(self, scenario: Scenario, found: dict[str, list[str]]) -> None:
        size = len(repr(scenario))
        for name in found:
            self.counts[name] = self.counts.get(name, 0) + 1
            if name not in self.smallest or size < self.smallest[name][0]:
                self.smallest[name] = (size, scenario, describe({name: found[name]}))

    def report(self) -> str:
        lines = []
        for name, (_, scenario, text) in sorted(self.smallest.items()):
            lines.append(f"{name}: {self.counts[name]} run(s); smallest:\n{text}\n{scenario!r}")
        return "\n\n".join(lines)


def _fail_on(findings: Findings) -> None:
    # pytrace=False: no source parsing for the report (CPython 3.11.7's AST validator can
    # raise a spurious recursion-depth SystemError after a long session).
    if findings.counts:
        pytest.fail(findings.report(), pytrace=False)


def _check(scenario: Scenario, findings: Findings) -> None:
    found = check_all(observe(scenario))
    if not found:
        return
    if KEEP_GOING:
        findings.add(scenario, found)
    else:
        raise AssertionError(describe(found))


def test_run_conversation_keeps_the_invariants() -> None:
    findings = Findings()

    @_profile(RUNS // 2)
    @given(scenarios("loop"))
    def run(scenario: Scenario) -> None:
        _check(scenario, findings)

    run()
    _fail_on(findings)


def test_engine_keeps_the_invariants() -> None:
    findings = Findings()

    @_profile(RUNS - RUNS // 2)
    @given(scenarios("engine"))
    def run(scenario: Scenario) -> None:
        _check(scenario, findings)

    run()
    _fail_on(findings)
