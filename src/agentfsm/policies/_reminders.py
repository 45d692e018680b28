"""``remind_when``: a reminder queued for the next request when a condition holds."""

from __future__ import annotations

from agentfsm.engine import Remind, RunContext

from ._stop import Condition, as_condition

__all__ = ["remind_when"]


class remind_when:
    """At a turn's top, when ``condition`` holds, send ``text`` as a ``<system-reminder>`` in
    that turn's request only (never stored). ``once=True``: at most once per run."""

    can_stop = False

    def __init__(self, condition: Condition, text: str, *, once: bool = True) -> None:
        self.condition = as_condition(condition)
        self.text = text
        self.once = once

    @property
    def name(self) -> str:
        return repr(self)

    def check_turn(self, ctx: RunContext) -> Remind | None:
        fired: list[bool] = ctx.state(self, lambda: [False])
        if self.once and fired[0]:
            return None
        if not self.condition(ctx):
            return None
        fired[0] = True
        return Remind(self.text)

    def __repr__(self) -> str:
        return f"remind_when({self.condition!r})"
