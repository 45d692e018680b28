"""Stepping through the declared machine: the one runtime driver.

:func:`compile_machine` reads :class:`AgentLoopMachine`'s declared transitions once into a
table; :class:`CompiledStepper` then takes, for each event, the first transition out of the
current state whose guards all hold (``cond`` true, ``unless`` false), in declaration order.
For a flat chart like this one that is exactly the selection rule of python-statemachine's
engine, without its per-event SCXML bookkeeping (about 100 µs per event on this kind of
machine). python-statemachine's own engine is the oracle: the test suite drives it and the
table with the same events and guards and requires the same states.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import frozen
from statemachine.exceptions import StateMachineError, TransitionNotAllowed

from ._machine import AgentLoopMachine, LoopGuards

__all__ = ["CompiledStepper", "MachineTable", "NoTransition", "compile_machine"]


@frozen
class CompiledTransition:
    """One declared transition: its target and its guards with the value each must have."""

    target: str
    guards: tuple[tuple[str, bool], ...]


@frozen
class MachineTable:
    """A state chart class's flat transition table."""

    initial: str
    final: frozenset[str]
    transitions: dict[str, dict[str, tuple[CompiledTransition, ...]]]
    """``state id -> event id -> transitions in declaration order``."""


_TABLES: dict[type[Any], MachineTable] = {}


def compile_machine(cls: type[Any]) -> MachineTable:
    """Read a flat ``StateChart`` class into a :class:`MachineTable`.

    Only plain guard names are accepted (no boolean expressions, no callables), so every
    guard shows on the diagram under the name that implements it. Tables are cached.
    """
    cached = _TABLES.get(cls)
    if cached is not None:
        return cached
    initial = None
    final: set[str] = set()
    table: dict[str, dict[str, list[CompiledTransition]]] = {}
    for state in cls.states:
        if state.states:
            raise ValueError(f"{cls.__name__}.{state.id}: compound states are not supported")
        if state.initial:
            initial = state.id
        if state.final:
            final.add(state.id)
        by_event = table.setdefault(state.id, {})
        for transition in state.transitions:
            guards = []
            for spec in transition.cond:
                name = spec.func
                if not isinstance(name, str) or not name.isidentifier():
                    raise ValueError(
                        f"{cls.__name__}: guard {name!r} must be the plain name of a guard"
                    )
                guards.append((name, bool(spec.expected_value)))
            compiled = CompiledTransition(transition.target.id, tuple(guards))
            for event in transition.events:
                by_event.setdefault(str(event.id), []).append(compiled)
    if initial is None:
        raise ValueError(f"{cls.__name__} has no initial state")
    compiled_table = MachineTable(
        initial=initial,
        final=frozenset(final),
        transitions={s: {e: tuple(ts) for e, ts in ev.items()} for s, ev in table.items()},
    )
    _TABLES[cls] = compiled_table
    return compiled_table


class CompiledStepper:
    """Drives a run through the compiled table of :class:`AgentLoopMachine`."""

    __slots__ = ("_guards", "_transitions", "state")

    def __init__(self, guards: LoopGuards, cls: type[Any] = AgentLoopMachine) -> None:
        table = compile_machine(cls)
        self._transitions = table.transitions
        bound: dict[str, Callable[[], bool]] = {}
        for by_event in table.transitions.values():
            for transitions in by_event.values():
                for transition in transitions:
                    for name, _ in transition.guards:
                        bound[name] = getattr(guards, name)
        self._guards = bound
        self.state: str = table.initial

    def send(self, event: str) -> str:
        """Take the event's first enabled transition; the new state's id.

        Raises:
            NoTransition: no transition out of the current state is enabled for ``event``.
        """
        options = self._transitions[self.state].get(event)
        if options is not None:
            guards = self._guards
            for transition in options:
                for name, expected in transition.guards:
                    if bool(guards[name]()) is not expected:
                        break
                else:
                    self.state = transition.target
                    return self.state
        raise NoTransition(event, self.state)


class NoTransition(TransitionNotAllowed):
    """No transition out of the current state is enabled for the event."""

    def __init__(self, event: str, state: str) -> None:
        StateMachineError.__init__(self, f"Can't {event} when in {state}.")
        self.event_id = event
        self.state_id = state
