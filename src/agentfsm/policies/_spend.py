"""``spend_limit``: the circuit breaker on tokens spent by a run."""

from __future__ import annotations

from agentfsm.engine import RunContext, Stop

__all__ = ["spend_limit"]


class spend_limit:
    """Stop the run at a turn's top once input plus output tokens reach ``tokens``.

    Counts every call of the run, including auxiliary calls made for policies (compression
    summaries, supervisors), since they are part of ``RunContext.usage``.
    """

    def __init__(self, tokens: int) -> None:
        if tokens < 1:
            raise ValueError("spend_limit needs tokens >= 1")
        self.tokens = tokens

    @property
    def name(self) -> str:
        return repr(self)

    def check_turn(self, ctx: RunContext) -> Stop | None:
        spent = ctx.usage.input_tokens + ctx.usage.output_tokens
        if spent >= self.tokens:
            return Stop(f"spend limit reached: {spent} of {self.tokens} tokens")
        return None

    def __repr__(self) -> str:
        return f"spend_limit({self.tokens})"
