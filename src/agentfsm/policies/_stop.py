"""Composable stop conditions, ``stop_when`` and ``require``.

Conditions are predicates over the run's :class:`~agentfsm.engine._context.RunContext` that
combine like tenacity's stop strategies::

    stop_when(tool_called("submit") | tokens_over(200_000))
    require(text_matches(r"VERDICT: \\w+"), reminder="End with a verdict line.")

Any ``Callable[[RunContext], bool]`` is a condition too.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Union

from agentfsm.engine import Retry, RunContext, Stop, call_hint, hooks_of

__all__ = [
    "Condition",
    "StopCondition",
    "as_condition",
    "elapsed_over",
    "require",
    "stop_all",
    "stop_any",
    "stop_not",
    "stop_when",
    "text_matches",
    "tokens_over",
    "tool_called",
    "turns_at_least",
]

Condition = Union["StopCondition", Callable[[RunContext], bool]]
"""A stop condition or any predicate over the run context."""


class StopCondition(ABC):
    """A predicate over the run context, combinable with ``|``, ``&`` and ``~``."""

    precedence = 4

    @abstractmethod
    def __call__(self, ctx: RunContext) -> bool:
        """Whether the condition holds now."""

    def __or__(self, other: Condition) -> StopCondition:
        return stop_any(self, other)

    def __ror__(self, other: Condition) -> StopCondition:
        return stop_any(other, self)

    def __and__(self, other: Condition) -> StopCondition:
        return stop_all(self, other)

    def __rand__(self, other: Condition) -> StopCondition:
        return stop_all(other, self)

    def __invert__(self) -> StopCondition:
        return stop_not(self)

    def _wrapped(self, parent: int) -> str:
        text = repr(self)
        return f"({text})" if self.precedence < parent else text


class _FromCallable(StopCondition):
    def __init__(self, fn: Callable[[RunContext], bool]) -> None:
        self.fn = fn

    def __call__(self, ctx: RunContext) -> bool:
        return bool(self.fn(ctx))

    def __repr__(self) -> str:
        return getattr(self.fn, "__name__", None) or repr(self.fn)


def as_condition(condition: Condition) -> StopCondition:
    """``condition`` as a :class:`StopCondition` (plain callables are wrapped).

    Raises:
        TypeError: ``condition`` is not callable, or is a class (``tool_called`` where
            ``tool_called("submit")`` was meant; a policy such as ``wrap_up``), or is a
            policy instance.
    """
    if isinstance(condition, StopCondition):
        return condition
    if isinstance(condition, type):
        kind = "a policy" if hooks_of(condition) else "a class"
        raise TypeError(
            f"{condition.__name__} is {kind}, not a stop condition: did you mean "
            f"{call_hint(condition)}?"
            + (" (a policy goes in policies=[...] itself)" if hooks_of(condition) else "")
        )
    if hooks_of(condition):
        raise TypeError(
            f"{condition!r} is a policy, not a stop condition: put it in policies=[...] itself"
        )
    if callable(condition):
        return _FromCallable(condition)
    raise TypeError(f"a stop condition must be callable, got {condition!r}")


class stop_any(StopCondition):
    """Holds when any of its conditions holds."""

    precedence = 1
    conditions: tuple[StopCondition, ...]

    def __init__(self, *conditions: Condition) -> None:
        flat: list[StopCondition] = []
        for condition in map(as_condition, conditions):
            flat.extend(condition.conditions if isinstance(condition, stop_any) else [condition])
        self.conditions = tuple(flat)

    def __call__(self, ctx: RunContext) -> bool:
        return any(c(ctx) for c in self.conditions)

    def __repr__(self) -> str:
        return " | ".join(c._wrapped(self.precedence) for c in self.conditions)


class stop_all(StopCondition):
    """Holds when all of its conditions hold."""

    precedence = 2
    conditions: tuple[StopCondition, ...]

    def __init__(self, *conditions: Condition) -> None:
        flat: list[StopCondition] = []
        for condition in map(as_condition, conditions):
            flat.extend(condition.conditions if isinstance(condition, stop_all) else [condition])
        self.conditions = tuple(flat)

    def __call__(self, ctx: RunContext) -> bool:
        return all(c(ctx) for c in self.conditions)

    def __repr__(self) -> str:
        return " & ".join(c._wrapped(self.precedence) for c in self.conditions)


class stop_not(StopCondition):
    """Holds when its condition does not."""

    precedence = 3

    def __init__(self, condition: Condition) -> None:
        self.condition = as_condition(condition)

    def __call__(self, ctx: RunContext) -> bool:
        return not self.condition(ctx)

    def __repr__(self) -> str:
        return f"~{self.condition._wrapped(self.precedence + 1)}"


class tool_called(StopCondition):
    """The model ran the tool ``name`` at least once in this run (whatever its result)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, ctx: RunContext) -> bool:
        return ctx.tool_counts.get(self.name, 0) > 0

    def __repr__(self) -> str:
        return f"tool_called({self.name!r})"


class text_matches(StopCondition):
    """The visible text of the model's latest reply matches ``pattern`` (``re.search``).

    The text is ``ctx.last_result.message.content`` after any reply shapers: the answer
    text of the most recent LLM call only, not its reasoning, not its tool calls' names or
    arguments, not tool results and not earlier replies. It is empty when that reply only
    called tools, and there is none before the first reply (the condition is then false).
    In ``require(...)`` it is the final answer being checked; in ``stop_when(...)``, checked
    at the start of a turn, it is the previous turn's reply.
    """

    def __init__(self, pattern: str | re.Pattern[str], flags: int = 0) -> None:
        self.pattern = re.compile(pattern, flags) if isinstance(pattern, str) else pattern

    def __call__(self, ctx: RunContext) -> bool:
        result = ctx.last_result
        return result is not None and self.pattern.search(result.message.content) is not None

    def __repr__(self) -> str:
        return f"text_matches({self.pattern.pattern!r})"


class turns_at_least(StopCondition):
    """At least ``n`` LLM calls were made."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self, ctx: RunContext) -> bool:
        return ctx.turns_used >= self.n

    def __repr__(self) -> str:
        return f"turns_at_least({self.n})"


class tokens_over(StopCondition):
    """The run spent more than ``n`` tokens (input plus output, auxiliary calls included)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self, ctx: RunContext) -> bool:
        return ctx.usage.total_tokens > self.n

    def __repr__(self) -> str:
        return f"tokens_over({self.n})"


class elapsed_over(StopCondition):
    """More than ``seconds`` passed since the run started."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, ctx: RunContext) -> bool:
        return ctx.elapsed > self.seconds

    def __repr__(self) -> str:
        return f"elapsed_over({self.seconds})"


class stop_when:
    """A turn gate: stop the run at the next turn's top once ``condition`` holds."""

    def __init__(self, condition: Condition, *, reason: str | None = None) -> None:
        self.condition = as_condition(condition)
        self.reason = reason

    @property
    def name(self) -> str:
        return repr(self)

    def check_turn(self, ctx: RunContext) -> Stop | None:
        if self.condition(ctx):
            return Stop(self.reason or f"{self.condition!r} holds")
        return None

    def __repr__(self) -> str:
        return f"stop_when({self.condition!r})"


class require:
    """A final gate: refuse a final answer until ``condition`` holds, at most ``max_retries``
    times per run; each refusal sends ``reminder`` with one more turn."""

    def __init__(self, condition: Condition, *, reminder: str, max_retries: int = 3) -> None:
        if max_retries < 1:
            raise ValueError("max_retries must be at least 1")
        self.condition = as_condition(condition)
        self.reminder = reminder
        self.max_retries = max_retries

    @property
    def name(self) -> str:
        return repr(self)

    async def check_final(self, ctx: RunContext) -> Retry | None:
        if self.condition(ctx):
            return None
        refused: list[int] = ctx.state(self, lambda: [0])
        if refused[0] >= self.max_retries:
            return None
        refused[0] += 1
        return Retry(self.reminder)

    def __repr__(self) -> str:
        return f"require({self.condition!r}, max_retries={self.max_retries})"
