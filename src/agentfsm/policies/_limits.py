"""``wrap_up``: the last allowed turn asks the model to finish (the budget itself is the
run's ``max_turns``); ``max_turns`` is its deprecated predecessor that also set the budget."""

from __future__ import annotations

from agentfsm._deprecated import warn_renamed
from agentfsm.engine import AssistantMessage, LoopOutcome, Remind, RunContext, evolved

__all__ = ["WRAP_UP_REMINDER", "max_turns", "wrap_up"]

WRAP_UP_REMINDER = (
    "This is your last turn: the turn limit is reached. Do not call any more tools. "
    "Summarize what you did and what is left, and give your answer now."
)
"""Sent on the last allowed turn when wrap-up is on."""


class wrap_up:
    """Wrap up on the last turn the run's budget allows.

    The budget is the run's own (``Agent(max_turns=...)``, ``LoopParams(max_turns=...)``).
    The last allowed turn's request carries :data:`WRAP_UP_REMINDER`, and a run that answers
    on that turn returns the model's own last response with ``note`` appended as its
    ``final`` (by default ``[Stopped at the limit of N turns.]``). A run that still asked for
    tools there stops ``budget`` with ``final`` left ``None``; its last words are the latest
    assistant message of ``outcome.messages`` (also ``outcome.result.message``).
    """

    can_stop = False

    def __init__(self, *, note: str | None = None) -> None:
        self.note = note

    @property
    def name(self) -> str:
        """``wrap_up()``."""
        return repr(self)

    def _applies(self, ctx: RunContext) -> bool:
        return ctx.turn == ctx.max_turns

    def check_turn(self, ctx: RunContext) -> Remind | None:
        """The wrap-up reminder on the last allowed turn."""
        return Remind(WRAP_UP_REMINDER) if self._applies(ctx) else None

    def shape_outcome(self, ctx: RunContext, outcome: LoopOutcome) -> LoopOutcome | None:
        """Append the note to a final answer given on the last allowed turn."""
        if not (self._applies(ctx) and outcome.stopped_reason == "final"):
            return None
        if outcome.final is None:
            return None
        note = self.note if self.note is not None else _note(ctx.max_turns)
        text = outcome.final.content.rstrip()
        return evolved(outcome, final=AssistantMessage(f"{text}\n\n{note}" if text else note))

    def __repr__(self) -> str:
        return "wrap_up()"


def _note(turns: int) -> str:
    return f"[Stopped at the limit of {turns} turns.]"


class max_turns(wrap_up):
    """Deprecated: give the budget as the run's ``max_turns`` and add :class:`wrap_up`.

    Limits a run to ``n`` LLM calls (tightening the run's own budget), with wrap-up on the
    last one unless ``wrap_up=False``.
    """

    def __init__(self, n: int, *, wrap_up: bool = True, note: str | None = None) -> None:
        warn_renamed(
            "the max_turns(n) policy",
            "the run's max_turns (Agent(max_turns=n), LoopParams(max_turns=n)) and wrap_up()",
        )
        if n < 1:
            raise ValueError("max_turns needs n >= 1")
        super().__init__(note=note if note is not None else _note(n))
        self.n = n
        self.wrap_up = wrap_up

    @property
    def turn_budget(self) -> int:
        """``n``."""
        return self.n

    def _applies(self, ctx: RunContext) -> bool:
        return self.wrap_up and ctx.turn == ctx.max_turns == self.n

    def __repr__(self) -> str:
        return f"max_turns({self.n})" if self.wrap_up else f"max_turns({self.n}, wrap_up=False)"
