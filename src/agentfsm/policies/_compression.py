"""``compress``: history compression as a policy, with recovery from context overflow."""

from __future__ import annotations

from agentfsm.engine import Compression

__all__ = ["compress"]


class compress(Compression):
    """Compress older history once the context reaches ``budget_tokens * threshold``.

    The context is the last call's measured input tokens when known (a provider's own count),
    else the history's estimate. Being a compressor, this policy also arms overflow recovery:
    when a call fails with a ``context_overflow`` error, the history is compressed and the
    call sent once more, at most ``MAX_OVERFLOW_COMPACTIONS`` times in one turn.

    It is the same compression that ``LoopParams(context_budget_tokens=...)`` builds with
    the core loop's rules; configure compression one way per run.
    """

    def __init__(self, budget_tokens: int, threshold: float = 0.8) -> None:
        super().__init__(budget_tokens, threshold)
