"""Stepping through the declared machine.

Two interchangeable drivers move a run through :class:`AgentLoopMachine`:

- :class:`CompiledStepper` (the default) reads the class's declared transitions once into a
  table and, for each event, takes the first transition out of the current state whose
  guards all hold (``cond`` true, ``unless`` false), in declaration order. For a flat chart
  like this one that is exactly the selection rule of python-statemachine's engine, without
  its per-event SCXML bookkeeping (about 100 µs per event on this kind of machine).
- :class:`StatechartStepper` runs a real ``AgentLoopMachine`` instance on
  python-statemachine's synchronous engine, with a view of :class:`LoopGuards` as its
  listener: that engine selects and takes every transition, evaluating the guards itself.

The test-suite drives both with the same inputs and requires the same states.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import methodcaller
from typing import Any, Literal, Protocol, TypeAlias

from attrs import frozen
from statemachine.exceptions import StateMachineError, TransitionNotAllowed

from ._machine import AgentLoopMachine, LoopGuards

__all__ = [
    "DEFAULT_STEPPER",
    "CompiledStepper",
    "MachineTable",
    "NoTransition",
    "StatechartStepper",
    "Stepper",
    "StepperKind",
    "TransitionNotAllowed",
    "compile_machine",
    "make_stepper",
]

StepperKind: TypeAlias = Literal["compiled", "statechart"]
DEFAULT_STEPPER: StepperKind = "compiled"


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


class Stepper(Protocol):
    """What the runner needs from a machine driver."""

    @property
    def state(self) -> str:
        """The current state's id."""
        ...

    def send(self, event: str) -> str:
        """Take the event's first enabled transition; return the new state's id."""
        ...


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


@frozen
class _ChartSupport:
    """What :class:`StatechartStepper` needs per machine class, built once."""

    view: type[Any]
    """The guard view's class: one property per guard the machine names."""
    ids: dict[Any, str]
    """``state value -> state id``."""
    initial: str
    """The initial state's id."""
    final: frozenset[str]
    """The final states' ids."""


_SUPPORT: dict[type[Any], _ChartSupport] = {}


def _guard_property(name: str) -> property:
    call = methodcaller(name)

    def read(view: Any) -> Any:
        return call(view.guards)

    read.__name__ = name
    return property(read, doc=f"Evaluates the guard ``{name}``.")


def _chart_support(cls: type[Any]) -> _ChartSupport:
    cached = _SUPPORT.get(cls)
    if cached is not None:
        return cached
    table = compile_machine(cls)
    names = sorted(
        {
            name
            for by_event in table.transitions.values()
            for transitions in by_event.values()
            for transition in transitions
            for name, _ in transition.guards
        }
    )
    namespace: dict[str, Any] = {"__slots__": ("guards",)}
    namespace.update((name, _guard_property(name)) for name in names)
    support = _ChartSupport(
        view=type(f"{cls.__name__}GuardView", (), namespace),
        ids={state.value: str(state.id) for state in cls.states_map.values()},
        initial=table.initial,
        final=table.final,
    )
    _SUPPORT[cls] = support
    return support


class StatechartStepper:
    """Drives a run on a real :class:`AgentLoopMachine` with python-statemachine's engine.

    Each run builds its own machine, the public way (``AgentLoopMachine(listeners=[view])``),
    and three choices keep python-statemachine's work down without changing what it decides:

    - the listener is a view of the guards object whose guards are properties: the engine
      reads a non-callable listener attribute as a value, without binding the event's
      arguments to a signature as it does for a method. (It reads each once when it binds the
      listener; guards are pure, so that is harmless.)
    - events are sent by calling the machine's bound events, fetched once per machine,
      instead of :meth:`~statemachine.StateChart.send`, which looks the event up and binds a
      new one each time; a name the machine does not declare still goes through ``send``,
      and is refused with :class:`TransitionNotAllowed`.
    - the instance (not the declared class) updates its configuration in one step
      (``atomic_configuration_update``): that only changes what entry, exit and transition
      callbacks would see, and the machine has none; the engine then skips copying the
      configuration for each state it leaves and each it enters.

    Once the run reaches a final state the stepper lets go of its machine (``machine`` is
    ``None``), takes the run's guards out of the machine's view, and refuses every event
    with :class:`NoTransition`, as the stopped machine would. The machine itself holds
    reference cycles of python-statemachine's own (its engine, its callbacks), which the
    garbage collector reclaims; nothing of the run waits for it.

    The current state is read as ``current_state_value``, the raw value the engine stores.
    """

    __slots__ = ("_machine", "_support", "_triggers", "_view", "state")

    def __init__(self, guards: LoopGuards, cls: type[Any] = AgentLoopMachine) -> None:
        support = _chart_support(cls)
        view = support.view()
        view.guards = guards  # the machine reads each guard once as it binds the view
        machine = cls(listeners=[view])
        machine.atomic_configuration_update = True
        self._machine: Any = machine
        self._view = view
        self._triggers: dict[str, Callable[[], Any]] = {
            str(event.id): event for event in machine.events
        }
        self._support = support
        self.state: str = support.initial

    @property
    def machine(self) -> Any:
        """The machine while the run can still move it; ``None`` once it reached a final
        state."""
        return self._machine

    def send(self, event: str) -> str:
        machine = self._machine
        if machine is None:
            raise NoTransition(event, self.state)
        trigger = self._triggers.get(event)
        if trigger is None:
            machine.send(event)
        else:
            trigger()
        support = self._support
        self.state = state = support.ids[machine.current_state_value]
        if state in support.final:
            self._release()
        return state

    def _release(self) -> None:
        """Let go of the finished machine, and take the run's guards out of its view: the
        machine's own reference cycles (python-statemachine's engine and callbacks) wait for
        the garbage collector, but the run they would hold (its context, history, policies)
        does not."""
        self._view.guards = None
        self._machine = None
        self._triggers = {}


def make_stepper(kind: StepperKind, guards: LoopGuards) -> CompiledStepper | StatechartStepper:
    """Build the driver of one run."""
    if kind == "compiled":
        return CompiledStepper(guards)
    if kind == "statechart":
        return StatechartStepper(guards)
    raise ValueError(f"unknown stepper {kind!r}; expected 'compiled' or 'statechart'")


class NoTransition(TransitionNotAllowed):
    """No transition out of the current state is enabled for the event."""

    def __init__(self, event: str, state: str) -> None:
        StateMachineError.__init__(self, f"Can't {event} when in {state}.")
        self.event_id = event
        self.state_id = state
