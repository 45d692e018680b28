"""``wrap_up``: the last allowed turn asks the model to finish (the budget itself is the
run's ``max_turns``)."""

from __future__ import annotations

from agentfsm.engine import AssistantMessage, LoopOutcome, Remind, RunContext, evolved

__all__ = ["WRAP_UP_REMINDER", "wrap_up"]

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
