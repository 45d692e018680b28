"""The step runner of a durable run: each effect is a DBOS step, recorded or replayed.

:class:`DbosStepRunner` is what a durable run sets as
:data:`agentfsm.engine._steps.current_step_runner`. Each effect runs through
``DBOS.run_step_async`` (no retries: the providers and tools retry inside their effect);
a step recorded by an earlier execution of the same workflow returns its recorded result
(or raises its recorded error) and the effect does not run.

Replay marking: DBOS replays a prefix of the run, so the runner is *replaying* until the
first effect actually runs. Events are held back while replaying and released when the
next step resolves: marked replayed when that step was replayed, live when its effect ran
(released as it starts, so streamed deltas are not delayed). Events after the last step of
a run that never went live are replayed too.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from dbos import DBOS

from agentfsm.engine import AgentEvent

__all__ = ["DbosStepRunner", "StepFailed"]

T = TypeVar("T")


class StepFailed(Exception):
    """A step's error that cannot be recorded as itself (it does not pickle): its class
    name and message. Raised in the live run too, so a replay sees the same error."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(name, message)
        self.name = name
        self.message = message

    def __str__(self) -> str:
        return f"{self.name}: {self.message}"


def _portable(error: Exception) -> Exception:
    """``error`` itself when it survives a pickle round trip, else a :class:`StepFailed`."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return StepFailed(type(error).__name__, str(error))
    return error


class DbosStepRunner:
    """Runs each step of one workflow execution through DBOS and marks replayed events.

    Args:
        deliver: Receives each event of the run with ``replayed`` (in the run's order).
    """

    def __init__(self, deliver: Callable[[AgentEvent, bool], None] | None = None) -> None:
        self._deliver = deliver
        self._lock = threading.Lock()
        self._held: list[AgentEvent] = []
        self.live = False
        """An effect has run in this execution: every later event is live."""
        self.replayed_steps = 0
        """Steps whose recorded result was returned without running the effect."""
        self.live_steps = 0
        """Steps whose effect ran in this execution."""

    async def __call__(self, name: str, effect: Callable[[], Awaitable[T]]) -> T:
        ran = False

        async def step() -> T:
            nonlocal ran
            ran = True
            self._go_live()
            try:
                return await effect()
            except Exception as error:
                portable = _portable(error)
                if portable is error:
                    raise
                raise portable from None

        try:
            return await DBOS.run_step_async({"name": name, "retries_allowed": False}, step)
        finally:
            if ran:
                self.live_steps += 1
            else:
                self.replayed_steps += 1
                self._release(replayed=True)

    def on_event(self, event: AgentEvent) -> None:
        """Subscribe this to the run's events (``emitter.on("*", runner.on_event)``)."""
        with self._lock:
            if not self.live:
                self._held.append(event)
                return
        self._send(event, replayed=False)

    def finish(self) -> None:
        """Release the events still held: replayed unless an effect ran."""
        self._release(replayed=not self.live)

    def _go_live(self) -> None:
        with self._lock:
            already = self.live
            self.live = True
        if not already:
            self._release(replayed=False)

    def _release(self, *, replayed: bool) -> None:
        with self._lock:
            held, self._held = self._held, []
        for event in held:
            self._send(event, replayed=replayed)

    def _send(self, event: AgentEvent, *, replayed: bool) -> None:
        if self._deliver is not None:
            self._deliver(event, replayed)
