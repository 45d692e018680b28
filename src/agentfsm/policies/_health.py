"""``loop_health``: one evaluator for the patterns of a stuck run.

A. repeated identical calls: how many of the last 10 ``name + JSON(args)`` signatures match
   the latest call;
B. stagnation: turns in a row without a successful mutating tool (reads alone are not
   "no progress": it is counted per turn, not per call); a turn that changed a file resets it;
C. oscillation: both sides of every edit are hashed in a 30-entry window and only an inverse
   edit (X→Y, later Y→X) scores; no-op and failed edits never count; the score is the number
   of reverts still in the window, so it falls again as a recovering run pushes them out;
D. reasoning similarity: word-set Jaccard between consecutive turns' reasoning.

Braking is two-tier: a breach warns, twice the threshold stops (``Loop stopped: <reason>``),
except stagnation, which only warns: at the threshold and at each further multiple of it
(8, 16, 24… turns without a file change by default), not on every turn in between.
Observations are made as tools and turns finish; the verdict is given at the top of the next
turn. All counters are per run.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Awaitable

from attrs import define, field

from agentfsm.engine import Remind, RunContext, Stop, ToolOutcome, TurnVerdict, Warn

from ._redirect import REDIRECT_TRIGGERS
from ._redirect import redirect as RedirectSettings

__all__ = ["HealthState", "loop_health"]

_WORDS = re.compile(r"\w+")


@define
class HealthState:
    """One run's counters and windows."""

    signatures: deque[str] = field(factory=lambda: deque(maxlen=10))
    repeated: int = 0
    last_signature: str = ""
    stagnant_turns: int = 0
    edits: deque[tuple[str, str, str, bool]] = field(factory=lambda: deque(maxlen=30))
    last_words: frozenset[str] | None = None
    similar_turns: int = 0
    warned: dict[str, int] = field(factory=dict)
    destructive: frozenset[str] | None = None
    """The run's destructive tool names (read once from its tool specs)."""

    @property
    def oscillation(self) -> int:
        """Reverts still inside the edit window."""
        return sum(1 for *_, revert in self.edits if revert)

    def reset(self, code: str) -> None:
        """Forget a pattern and the window it is derived from (after a redirection)."""
        if code == "repeated_identical_tool":
            self.signatures.clear()
            self.repeated = 0
        elif code == "oscillation_detected":
            self.edits.clear()
        elif code == "no_progress":
            self.stagnant_turns = 0
        elif code == "repeated_reasoning":
            self.similar_turns = 0
        self.warned.pop(code, None)


def _level(value: int, threshold: int, *, stops: bool) -> int:
    """The level a pattern has reached, warned once: its value for a pattern that stops at
    twice the threshold (it warns at each new value on the way), the multiple of the
    threshold for one that never stops (stagnation warns at 8, 16, 24… turns)."""
    return value if stops or threshold < 1 else value - value % threshold


class loop_health:
    """Watch for stuck patterns; warn at a threshold, stop at twice it.

    Args:
        repeated_calls: Identical calls among the last 10 that warn (A).
        stagnant_turns: Turns without a file change that warn (B; never stops; warns again
            at each multiple).
        oscillations: Reverts inside the 30-edit window that warn (C).
        similar_reasoning: Consecutive turns with near-identical reasoning that warn (D).
        similarity: Jaccard similarity from which two turns' reasoning count as the same.
        redirect: Redirection settings (off by default).
    """

    name = "loop_health"

    def __init__(
        self,
        *,
        repeated_calls: int = 3,
        stagnant_turns: int = 8,
        oscillations: int = 2,
        similar_reasoning: int = 3,
        similarity: float = 0.9,
        redirect: RedirectSettings | None = None,
    ) -> None:
        self.repeated_calls = repeated_calls
        self.stagnant_turns = stagnant_turns
        self.oscillations = oscillations
        self.similar_reasoning = similar_reasoning
        self.similarity = similarity
        self.redirect = redirect if redirect is not None else RedirectSettings()

    def state(self, ctx: RunContext) -> HealthState:
        """This run's counters."""
        return ctx.state(self, HealthState)

    # -- observations ----------------------------------------------------------------

    def on_tool_result(self, ctx: RunContext, outcome: ToolOutcome) -> None:
        if outcome.cancelled:
            return None
        state = ctx.state(self, HealthState)
        call = outcome.call
        signature = call.name + json.dumps(call.arguments, sort_keys=True, separators=(",", ":"))
        state.signatures.append(signature)
        state.repeated = state.signatures.count(signature)
        state.last_signature = call.name
        meta = outcome.result.metadata
        if not meta or not outcome.result.ok:  # only a successful edit reports its hashes
            return None
        before, after, path = meta.get("before_sha"), meta.get("after_sha"), meta.get("path")
        if isinstance(before, str) and isinstance(after, str) and before != after:
            where = str(path) if path is not None else ""
            revert = any(p == where and b == after and a == before for p, b, a, _ in state.edits)
            state.edits.append((where, before, after, revert))
        return None

    def on_turn_end(self, ctx: RunContext) -> None:
        state = ctx.state(self, HealthState)
        destructive = state.destructive
        if destructive is None:
            destructive = state.destructive = frozenset(
                s.name for s in ctx.tool_specs if s.destructive
            )
        changed = destructive and any(
            o.result.ok and not o.cancelled and o.call.name in destructive for o in ctx.turn_tools
        )
        state.stagnant_turns = 0 if changed else state.stagnant_turns + 1
        return None

    def on_llm_end(self, ctx: RunContext) -> None:
        result = ctx.last_result
        if result is None:
            return None
        text = result.message.reasoning
        if not text:
            return None
        words = frozenset(_WORDS.findall(text.lower()))
        if not words:
            return None
        state = ctx.state(self, HealthState)
        if state.last_words:
            jaccard = len(words & state.last_words) / len(words | state.last_words)
            state.similar_turns = state.similar_turns + 1 if jaccard >= self.similarity else 0
        state.last_words = words
        return None

    # -- verdict ---------------------------------------------------------------------

    def _measures(self, state: HealthState) -> tuple[tuple[str, int, int, bool], ...]:
        """``(code, value, threshold, stops)`` of each pattern, in verdict order."""
        return (
            ("repeated_identical_tool", state.repeated, self.repeated_calls, True),
            (
                "oscillation_detected",
                state.oscillation if state.edits else 0,
                self.oscillations,
                True,
            ),
            ("repeated_reasoning", state.similar_turns, self.similar_reasoning, True),
            ("no_progress", state.stagnant_turns, self.stagnant_turns, False),
        )

    @staticmethod
    def _detail(state: HealthState, code: str) -> str:
        if code == "repeated_identical_tool":
            return f"{state.repeated} identical {state.last_signature} calls among the last 10"
        if code == "oscillation_detected":
            return f"{state.oscillation} edits undone within the last 30"
        if code == "repeated_reasoning":
            return f"{state.similar_turns} turns in a row with near-identical reasoning"
        return f"{state.stagnant_turns} turns without changing a file"

    def _judge(
        self, state: HealthState, code: str, value: int, threshold: int, stops: bool
    ) -> Stop | Warn | None:
        """One pattern's verdict (a warning once per level reached)."""
        if stops and value >= 2 * threshold:
            return Stop(f"Loop stopped: {code}: {self._detail(state, code)}")
        if value < threshold:
            state.warned.pop(code, None)
            return None
        level = _level(value, threshold, stops=stops)
        if level <= state.warned.get(code, 0):
            return None  # already warned at this level
        state.warned[code] = level
        return Warn(self._detail(state, code), code=code)

    def check_turn(
        self, ctx: RunContext
    ) -> list[TurnVerdict] | Awaitable[list[TurnVerdict]] | None:
        """The verdicts; awaitable only when a warning asks the supervisor for advice."""
        state = ctx.state(self, HealthState)
        warned = state.warned
        stagnant, every = state.stagnant_turns, self.stagnant_turns
        if (
            state.repeated < self.repeated_calls
            and state.similar_turns < self.similar_reasoning
            and (not state.edits or state.oscillation < self.oscillations)
            and (
                not warned
                if stagnant < every
                # stagnation already warned at this level, and nothing else to take back
                else len(warned) == 1
                and warned.get("no_progress") == _level(stagnant, every, stops=False)
            )
        ):
            return None  # nothing new reached a threshold, nothing to take back
        measures = self._measures(state)
        verdicts: list[TurnVerdict] = []
        for index, (code, value, threshold, stops) in enumerate(measures):
            if value < threshold and threshold > 0:  # below: nothing to say, nothing to keep
                if warned:
                    warned.pop(code, None)
                continue
            verdict = self._judge(state, code, value, threshold, stops)
            if verdict is None:
                continue
            if isinstance(verdict, Stop):
                return [verdict]
            verdicts.append(verdict)
            if code in REDIRECT_TRIGGERS:
                advice = self.redirect.advice_now(ctx, code)
                if advice is None:  # a supervisor call: the rest of the verdict waits for it
                    return self._advised(ctx, state, measures, index, verdicts)
                verdicts.extend(advice)
        return verdicts or None

    async def _advised(
        self,
        ctx: RunContext,
        state: HealthState,
        measures: tuple[tuple[str, int, int, bool], ...],
        index: int,
        verdicts: list[TurnVerdict],
    ) -> list[TurnVerdict]:
        """:meth:`check_turn` from ``measures[index]`` (just warned) on, asking the
        supervisor for advice on each redirect trigger that warns."""
        for position in range(index, len(measures)):
            code, value, threshold, stops = measures[position]
            if position > index:
                verdict = self._judge(state, code, value, threshold, stops)
                if verdict is None:
                    continue
                if isinstance(verdict, Stop):
                    return [verdict]
                verdicts.append(verdict)
                if code not in REDIRECT_TRIGGERS:
                    continue
            warning = verdicts[-1]
            assert isinstance(warning, Warn)
            advice = await self.redirect.consider(ctx, code, warning.reason)
            verdicts.extend(advice)
            if any(isinstance(v, Remind) for v in advice):
                state.reset(code)
        return verdicts

    def __repr__(self) -> str:
        return (
            f"loop_health(repeated_calls={self.repeated_calls}, "
            f"stagnant_turns={self.stagnant_turns}, oscillations={self.oscillations}, "
            f"similar_reasoning={self.similar_reasoning})"
        )
