"""``redirect``: turn a loop-health warning into advice, with one small supervisor call.

Advisory only: one non-streamed call of the run's own model (400 tokens, 15 s), no tools.
It can neither end a run nor extend a budget, and it fails closed: on an error, a timeout,
an empty or unparseable answer, or an empty evidence packet, nothing is injected and a
``redirect_skipped`` event says why.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from typing import Any

from attrs import frozen

from agentfsm.engine import (
    LlmEndEvent,
    Notice,
    PolicyWarnEvent,
    RedirectEvent,
    RedirectSkippedEvent,
    Remind,
    RunContext,
    SystemMessage,
    ToolCallEndEvent,
    TurnVerdict,
    UserMessage,
)

__all__ = [
    "DISABLE_ENV",
    "REDIRECT_TRIGGERS",
    "SUPERVISOR_PROMPT",
    "Evidence",
    "build_evidence",
    "parse_directions",
    "redirect",
]

DISABLE_ENV = "AGENTFSM_DISABLE_REDIRECT"
"""Set to ``1`` to turn redirection off whatever the settings say."""

REDIRECT_TRIGGERS = frozenset({"repeated_identical_tool", "oscillation_detected", "no_progress"})
"""Only these warnings can trigger a redirection (never a stop, never the turn budget)."""

SUPERVISOR_PROMPT = """\
You supervise a coding agent that appears to be stuck. From the evidence, suggest up to \
three materially different next directions it could take (not small variations of what \
it is already doing). One numbered line each, at most 40 words per line, nothing else."""


@frozen
class Evidence:
    """What the supervisor sees: rendered text and the ids of the events it came from."""

    event_ids: tuple[int, ...]
    text: str


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def build_evidence(
    events: Sequence[tuple[int, Any]],
    trigger: str,
    detail: str,
    *,
    max_events: int = 20,
    max_chars: int = 4000,
) -> Evidence:
    """A bounded evidence packet from numbered events (a pure function of its inputs).

    Keeps the latest tool results, assistant turns and warnings; ``text`` is empty when the
    events hold no tool activity (then there is nothing to reason about).
    """
    picked = [
        (seq, event)
        for seq, event in events
        if isinstance(event, (ToolCallEndEvent, LlmEndEvent, PolicyWarnEvent))
    ][-max_events:]
    if not any(isinstance(event, ToolCallEndEvent) for _, event in picked):
        return Evidence((), "")
    lines: list[str] = []
    ids: list[int] = []
    budget = max_chars
    for seq, event in reversed(picked):  # newest first, so the budget keeps the latest
        if isinstance(event, ToolCallEndEvent):
            args = json.dumps(event.call.arguments, ensure_ascii=False, sort_keys=True)
            status = "ok" if event.result.ok else f"error: {event.result.error}"
            output = _clip(event.result.output, 200)
            line = f"#{seq} tool {event.call.name}({_clip(args, 200)}) -> {status}: {output}"
        elif isinstance(event, LlmEndEvent):
            said = _clip(event.result.message.content, 300) or "(tool calls only)"
            line = f"#{seq} assistant: {said}"
        else:
            line = f"#{seq} warning: {event.reason}"
        if len(line) + 1 > budget:
            break
        budget -= len(line) + 1
        lines.append(line)
        ids.append(seq)
    header = f"Warning: {trigger}: {detail}"
    return Evidence(tuple(reversed(ids)), "\n".join([header, *reversed(lines)]))


_DIRECTION = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.+?)\s*$")


def parse_directions(text: str) -> list[str]:
    """Up to three directions from numbered or bulleted lines; ``[]`` if there are none."""
    found = [m.group(1) for line in text.splitlines() if (m := _DIRECTION.match(line))]
    return [d for d in found if d][:3]


class redirect:
    """Redirection settings; used by :class:`loop_health`.

    Args:
        enabled: Off by default; ``AGENTFSM_DISABLE_REDIRECT=1`` overrides it.
        max_per_run: Redirections per run.
        max_tokens: The supervisor's answer budget.
        timeout: Seconds the supervisor may take.
    """

    def __init__(
        self,
        enabled: bool = False,
        max_per_run: int = 2,
        *,
        max_tokens: int = 400,
        timeout: float = 15.0,
    ) -> None:
        self.enabled = enabled
        self.max_per_run = max_per_run
        self.max_tokens = max_tokens
        self.timeout = timeout

    @property
    def active(self) -> bool:
        """Enabled, and not disabled by the environment."""
        return self.enabled and os.environ.get(DISABLE_ENV, "") != "1"

    def advice_now(self, ctx: RunContext, trigger: str) -> list[TurnVerdict] | None:
        """What :meth:`consider` answers without asking the supervisor (redirection off, or
        its budget spent), or ``None`` when the supervisor must be asked."""
        state: dict[str, Any] = ctx.state(self, lambda: {"fired": 0})
        if not self.active:
            if state.get("recorded_disabled"):
                return []
            state["recorded_disabled"] = True
            return [Notice(RedirectSkippedEvent(turn=ctx.turn, trigger=trigger, reason="disabled"))]
        if state["fired"] >= self.max_per_run:
            reason = "max_per_run"
            return [Notice(RedirectSkippedEvent(turn=ctx.turn, trigger=trigger, reason=reason))]
        return None

    async def consider(self, ctx: RunContext, trigger: str, detail: str) -> list[TurnVerdict]:
        """Advice for a warning ``trigger``: a reminder and a ``redirect`` notice, or a
        ``redirect_skipped`` notice. Never raises."""
        state: dict[str, Any] = ctx.state(self, lambda: {"fired": 0})

        def skipped(reason: str) -> list[TurnVerdict]:
            return [Notice(RedirectSkippedEvent(turn=ctx.turn, trigger=trigger, reason=reason))]

        answered = self.advice_now(ctx, trigger)
        if answered is not None:
            return answered
        evidence = build_evidence(list(ctx.recent_events), trigger, detail)
        if not evidence.text:
            return skipped("empty_evidence")
        started = time.monotonic()
        try:
            result = await ctx.aux_chat(
                [SystemMessage(SUPERVISOR_PROMPT), UserMessage(evidence.text)],
                max_tokens=self.max_tokens,
                timeout=self.timeout,
            )
        except TimeoutError:
            return skipped("timeout")
        except Exception:
            return skipped("error")
        latency_ms = int((time.monotonic() - started) * 1000)
        text = result.message.content.strip()
        if not text:
            return skipped("empty")
        directions = parse_directions(text)
        if not directions:
            return skipped("unparseable")
        state["fired"] += 1
        advice = "\n".join(f"{i}. {d}" for i, d in enumerate(directions, start=1))
        reminder = (
            f"You appear to be stuck ({trigger}). Step back and take a materially different "
            f"approach, for example:\n{advice}"
        )
        notice = RedirectEvent(
            turn=ctx.turn,
            reason=trigger,
            directions=len(directions),
            directions_chars=sum(len(d) for d in directions),
            latency_ms=latency_ms,
            usage=result.usage,
            evidence_event_ids=evidence.event_ids,
        )
        return [Remind(reminder), Notice(notice)]

    def __repr__(self) -> str:
        return f"redirect(enabled={self.enabled}, max_per_run={self.max_per_run})"
