"""``verifier``: an independent, read-only review before a final answer is accepted."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, Literal, TypeAlias

from agentfsm.engine import (
    ChatFn,
    ChatResult,
    LoopParams,
    Message,
    Notice,
    PolicyNoteEvent,
    Retry,
    RunContext,
    SupportsAbort,
    ToolCall,
    ToolResult,
    ToolRunner,
    ToolSpec,
    UserMessage,
    run_conversation,
)

__all__ = [
    "VERIFIER_SYSTEM_PROMPT",
    "ReadOnlyTools",
    "Verdict",
    "parse_verdict",
    "verifier",
]

logger = logging.getLogger("agentfsm.policies")

Verdict: TypeAlias = Literal["PASS", "FAIL", "PARTIAL"]

VERIFIER_SYSTEM_PROMPT = """\
You are an independent reviewer. Another agent says it has finished a task. Check, using \
only the read-only tools you have, whether the work it describes actually does what the \
task asked.

Judge against the task as it was asked, and nothing else:
- Missing edge cases, extra validation, more tests or different style are NOT grounds for \
FAIL, unless the task explicitly asked for them.
- Do not invent new requirements or objections. Only report problems you verified \
yourself, with the file or command that shows them.
- On a re-check, only judge whether the problems reported before were fixed. Do not raise \
the bar and do not add new objections between rounds.
- If you cannot tell, answer PARTIAL rather than guessing.

Be brief: list the verified problems (if any), then end your final message with exactly \
one line:
VERDICT: PASS
or
VERDICT: FAIL
or
VERDICT: PARTIAL"""
"""The reviewer's instructions: most of it guards against inventing objections."""

_VERDICT_LINE = re.compile(
    r"^[\s*_`>#-]*VERDICT\s*:\s*\**\s*(PASS|FAIL|PARTIAL)\s*[*_`.]*\s*$", re.I
)


def parse_verdict(text: str) -> Verdict:
    """The verdict on the last non-empty line; anything missing or garbled is ``PARTIAL``
    (never a false ``PASS``)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return "PARTIAL"
    match = _VERDICT_LINE.match(lines[-1])
    if match is None:
        return "PARTIAL"
    verdict = match.group(1).upper()
    return "PASS" if verdict == "PASS" else "FAIL" if verdict == "FAIL" else "PARTIAL"


class ReadOnlyTools:
    """Only the tools of a runner that read (concurrency-safe and not destructive)."""

    def __init__(self, tools: ToolRunner) -> None:
        self.inner = tools
        self._specs = tuple(s for s in tools.specs() if s.concurrency_safe and not s.destructive)
        self._names = frozenset(s.name for s in self._specs)

    def specs(self) -> Sequence[ToolSpec]:
        return self._specs

    async def run(self, call: ToolCall, *, signal: SupportsAbort | None = None) -> ToolResult:
        if call.name not in self._names:
            allowed = ", ".join(sorted(self._names)) or "none"
            return ToolResult(
                False,
                "",
                f"{call.name!r} is not available to a reviewer: read-only tools only ({allowed})",
            )
        return await self.inner.run(call, signal=signal)


def _task(history: Sequence[Message]) -> str:
    for message in reversed(history):
        if isinstance(message, UserMessage) and not message.content.startswith(
            ("<", "[context summary")
        ):
            return message.content
    return "(the task text is not available)"


class verifier:
    """A final gate: an independent read-only sub-run reviews the work; ``FAIL`` refuses the
    answer with the reviewer's reasons.

    Args:
        chat: The reviewer's model; the run's own by default.
        max_turns: The reviewer's turn budget.
        only_if_mutated: Review only runs that changed files.
        max_rounds: Reviews per run, after which answers are accepted.
    """

    def __init__(
        self,
        chat: ChatFn | None = None,
        *,
        max_turns: int = 15,
        only_if_mutated: bool = False,
        max_rounds: int = 3,
    ) -> None:
        self.chat = chat
        self.max_turns = max_turns
        self.only_if_mutated = only_if_mutated
        self.max_rounds = max_rounds

    @property
    def name(self) -> str:
        return repr(self)

    def _prompt(self, ctx: RunContext, previous: str | None) -> str:
        assert ctx.last_result is not None
        parts = [
            f"The task:\n{_task(ctx.history)}",
            f"The agent's final answer:\n{ctx.last_result.message.content}",
        ]
        if ctx.mutated_files:
            parts.append("Files it changed:\n" + "\n".join(f"- {p}" for p in ctx.mutated_files))
        if previous:
            parts.append(
                "This is a re-check. Your previous review reported these problems; judge only "
                f"whether they are fixed:\n{previous}"
            )
        return "\n\n".join(parts)

    def _verdict_note(self, ctx: RunContext, verdict: str, rounds: int, why: str = "") -> Notice:
        """The verdict as a ``policy_note`` (code ``verifier_verdict``): in the CLI's output,
        the session file and ``agentfsm trace``."""
        reason = f"VERDICT: {verdict} (review {rounds} of at most {self.max_rounds}){why}"
        return Notice(
            PolicyNoteEvent(turn=ctx.turn, policy=self.name, reason=reason, code="verifier_verdict")
        )

    async def check_final(self, ctx: RunContext) -> list[Retry | Notice] | None:
        """Nothing to review without an answer, or (``only_if_mutated``) when the run changed
        no file; else the review, its verdict reported as a note: ``FAIL`` also refuses the
        answer with the reviewer's reasons."""
        if ctx.last_result is None or (self.only_if_mutated and ctx.mutations == 0):
            return None
        state: dict[str, Any] = ctx.state(self, lambda: {"rounds": 0})
        if state["rounds"] >= self.max_rounds:
            return None
        model = self.chat if self.chat is not None else ctx.chat
        if model is None:
            return None

        async def charged(
            messages: Sequence[Message], tools: Sequence[ToolSpec], **kwargs: Any
        ) -> ChatResult:
            result = await model(messages, tools, **kwargs)
            ctx.charge(result.usage)
            return result

        state["rounds"] += 1
        try:
            outcome = await run_conversation(
                charged,
                ReadOnlyTools(ctx.tools) if ctx.tools is not None else None,
                [UserMessage(self._prompt(ctx, state.get("previous")))],
                LoopParams(
                    self.max_turns, system_prompt=VERIFIER_SYSTEM_PROMPT, signal=ctx.params.signal
                ),
            )
        except Exception as exc:  # a reviewer that fails cannot pass the work, nor block it
            logger.warning("agentfsm: verifier failed, verdict PARTIAL: %s", exc)
            state["verdict"] = "PARTIAL"
            failed = f"; the review itself failed: {type(exc).__name__}"
            return [self._verdict_note(ctx, "PARTIAL", state["rounds"], failed)]
        text = outcome.result.message.content if outcome.result is not None else ""
        verdict = parse_verdict(text)
        state["verdict"] = verdict
        note = self._verdict_note(ctx, verdict, state["rounds"])
        if verdict != "FAIL":
            return [note]
        reasons = (
            text.strip().rsplit("\n", 1)[0].strip()
            if "\n" in text.strip()
            else "(no reasons given)"
        )
        state["previous"] = reasons[:4000]
        return [
            note,
            Retry(
                "An independent review of your work found problems (VERDICT: FAIL). Fix them, "
                f"then finish:\n{reasons[:4000]}"
            ),
        ]

    def __repr__(self) -> str:
        return f"verifier(max_turns={self.max_turns})"
