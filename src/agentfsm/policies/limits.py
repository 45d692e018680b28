"""``max_turns``: the turn budget, with a wrap-up turn before the cap."""

from __future__ import annotations

from attrs import evolve

from agentfsm.engine.context import RunContext
from agentfsm.engine.messages import AssistantMessage
from agentfsm.engine.params import LoopOutcome
from agentfsm.engine.policy import Remind

__all__ = ["WRAP_UP_REMINDER", "max_turns"]

WRAP_UP_REMINDER = (
    "This is your last turn: the turn limit is reached. Do not call any more tools. "
    "Summarize what you did and what is left, and give your answer now."
)
"""Sent on the last allowed turn when wrap-up is on."""


class max_turns:
    """Limit a run to ``n`` LLM calls (the core budget semantics).

    With ``wrap_up`` (the default), the last allowed turn's request carries
    :data:`WRAP_UP_REMINDER`, and a run that answers on that turn returns the model's own
    last response with a note appended as its ``final``. A run that still asked for tools
    there stops ``budget`` with ``final`` left ``None``; its last words are the latest
    assistant message of ``outcome.messages`` (also ``outcome.result.message``).
    """

    can_stop = False

    def __init__(self, n: int, *, wrap_up: bool = True, note: str | None = None) -> None:
        if n < 1:
            raise ValueError("max_turns needs n >= 1")
        self.n = n
        self.wrap_up = wrap_up
        self.note = note if note is not None else f"[Stopped at the limit of {n} turns.]"

    @property
    def name(self) -> str:
        return repr(self)

    @property
    def turn_budget(self) -> int:
        return self.n

    def check_turn(self, ctx: RunContext) -> Remind | None:
        if self.wrap_up and ctx.turn == ctx.max_turns == self.n:
            return Remind(WRAP_UP_REMINDER)
        return None

    def shape_outcome(self, ctx: RunContext, outcome: LoopOutcome) -> LoopOutcome | None:
        capped = ctx.turn == self.n == ctx.max_turns
        if not (self.wrap_up and capped and outcome.stopped_reason == "final"):
            return None
        if outcome.final is None:
            return None
        text = outcome.final.content.rstrip()
        final = AssistantMessage(f"{text}\n\n{self.note}" if text else self.note)
        return evolve(outcome, final=final)

    def __repr__(self) -> str:
        return f"max_turns({self.n})" if self.wrap_up else f"max_turns({self.n}, wrap_up=False)"
