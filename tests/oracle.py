"""python-statemachine's own engine as the oracle of the runtime driver.

Runs step through the table compiled from :class:`AgentLoopMachine`'s declared transitions
(:class:`~agentfsm.engine._stepper.CompiledStepper`), the only driver. :class:`Lockstep`
drives that table and a real ``AgentLoopMachine`` on python-statemachine's engine with the
same events and the same guards (the run's :class:`LoopGuards`, pure predicates, as the
machine's listener), and requires the same state after each event, or that both refuse it.
:func:`held_to_the_oracle` puts every run started inside it on a :class:`Lockstep`; the
``oracle`` fixture (``tests/conftest.py``) does it for a test.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from statemachine.exceptions import TransitionNotAllowed

from agentfsm.engine import _runner
from agentfsm.engine._machine import GUARD_NAMES, AgentLoopMachine, LoopGuards
from agentfsm.engine._stepper import CompiledStepper, NoTransition

__all__ = ["ChartStepper", "Lockstep", "Oracle", "OracleDisagrees", "held_to_the_oracle"]

_STATE_IDS = {state.value: str(state.id) for state in AgentLoopMachine.states}


class OracleDisagrees(AssertionError):
    """The compiled table and python-statemachine's engine ended an event in different
    states."""


def _guard(name: str) -> Any:
    def read(view: _GuardView) -> bool:
        return bool(getattr(view.guards, name)())

    read.__name__ = name
    return read


class _GuardView:
    """The machine's listener: each guard it names, read off the run's guards object (as
    the compiled table reads them)."""

    def __init__(self, guards: object) -> None:
        self.guards = guards


for _name in GUARD_NAMES:
    setattr(_GuardView, _name, _guard(_name))


class ChartStepper:
    """A real :class:`AgentLoopMachine` on python-statemachine's engine, which selects and
    takes every transition and evaluates the guards itself."""

    def __init__(self, guards: LoopGuards | Any) -> None:
        self.machine = AgentLoopMachine(listeners=[_GuardView(guards)])

    @property
    def state(self) -> str:
        return _STATE_IDS[self.machine.current_state_value]

    def send(self, event: str) -> str:
        """The state the engine ends ``event`` in; :class:`TransitionNotAllowed` when it
        refuses it."""
        self.machine.send(event)
        return self.state


@dataclass
class Oracle:
    """What the :class:`Lockstep` drivers of a test (or a fuzzed run) compared."""

    events: int = 0
    """Events sent to both the table and the engine."""
    runs: int = 0
    """Drivers built (one per run)."""
    disagreements: list[str] = field(default_factory=list)
    """Each event on which they differed: the state, the event and both answers."""


class Lockstep:
    """The runtime driver (the compiled table) with python-statemachine's engine beside it.

    The table decides, as in every run; the engine gets the same event with the same guards,
    and the two must agree. A disagreement is recorded in :class:`Oracle` and raised as
    :class:`OracleDisagrees`, so the run fails where the two part.
    """

    def __init__(self, guards: LoopGuards | Any, oracle: Oracle) -> None:
        self.table = CompiledStepper(guards)
        self.chart = ChartStepper(guards)
        self.oracle = oracle
        oracle.runs += 1
        if self.table.state != self.chart.state:
            self._disagree(f"initial state: table {self.table.state}, engine {self.chart.state}")

    @property
    def state(self) -> str:
        return self.table.state

    def send(self, event: str) -> str:
        before = self.table.state
        try:
            mine: str | None = self.table.send(event)
        except NoTransition:
            mine = None
        try:
            theirs: str | None = self.chart.send(event)
        except TransitionNotAllowed:
            theirs = None
        self.oracle.events += 1
        if mine != theirs:
            self._disagree(
                f"{event!r} from {before}: table {mine or 'refuses'}, engine {theirs or 'refuses'}"
            )
        if mine is None:
            raise NoTransition(event, before)
        return mine

    def _disagree(self, what: str) -> None:
        self.oracle.disagreements.append(what)
        raise OracleDisagrees(what)


@contextmanager
def held_to_the_oracle() -> Iterator[Oracle]:
    """Every run started inside steps on a :class:`Lockstep` (the runner's driver is
    replaced, then put back); the :class:`Oracle` counts what was compared."""
    oracle = Oracle()

    def lockstep(guards: LoopGuards) -> Lockstep:
        return Lockstep(guards, oracle)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_runner, "CompiledStepper", lockstep)
        yield oracle
