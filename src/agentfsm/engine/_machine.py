"""The agent loop, declared: states, ordered transitions and guard names. Topology only.

The class body is the single description of the loop. Diagrams are rendered from it, and
runs step through the table compiled from its declared transitions
(:mod:`agentfsm.engine._stepper`). Guards are named here and
implemented by :class:`LoopGuards`, which reads the run's :class:`RunContext` and never
changes it. No callback does I/O: the runner performs each state's effect, then sends the
event that leaves the state.
"""

from __future__ import annotations

from typing import Any

from statemachine import Event, State, StateChart

from ._context import RunContext
from ._errors import MAX_OVERFLOW_COMPACTIONS, is_context_overflow
from ._policy import PolicySet

__all__ = ["GUARD_NAMES", "AgentLoopMachine", "LoopGuards"]


class AgentLoopMachine(StateChart[Any]):
    """One run of the agent loop.

    Events are sent by the runner after it has done the effect of the current state:

    - ``begin`` leaves ``turn_start`` (after ``turn_start`` was emitted);
    - ``check`` leaves ``compress_check``; ``compressed`` leaves ``compress``;
    - ``replied`` / ``raised`` leave ``llm_start`` after the chat call resolved / raised
      (``raised`` ends ``aborted`` instead of ``failed`` when an immediate interrupt cut it);
    - ``route`` leaves ``llm_end``; ``tools_done`` leaves ``run_tools``;
    - ``decide`` leaves ``final_check`` after the final gates ran;
    - ``retried`` leaves ``retry`` after the refusing gate's reminder was queued.
    """

    catch_errors_as_events = False
    allow_event_without_transition = False

    turn_start = State("Turn start", initial=True)
    compress_check = State("Compress check")
    compress = State("Compress")
    llm_start = State("LLM start")
    llm_end = State("LLM end")
    run_tools = State("Run tools")
    final_check = State("Final check")
    retry = State("Retry")
    final = State("Final", final=True)
    budget = State("Budget", final=True)
    aborted = State("Aborted", final=True)
    stopped = State("Stopped", final=True)
    failed = State("Failed", final=True)

    begin = Event(
        turn_start.to(aborted, cond="abort_requested")
        | turn_start.to(stopped, cond="policy_stop")
        | turn_start.to(compress_check),
        name="begin",
    )
    check = Event(
        compress_check.to(compress, cond="compression_needed") | compress_check.to(llm_start),
        name="check",
    )
    compressed = Event(compress.to(llm_start), name="compressed")
    replied = Event(llm_start.to(llm_end), name="replied")
    raised = Event(
        llm_start.to(aborted, cond="interrupted")
        | llm_start.to(compress, cond="overflow_recoverable")
        | llm_start.to(failed),
        name="raised",
    )
    route = Event(
        llm_end.to(run_tools, cond="has_tool_calls", unless="last_turn")
        | llm_end.to(budget, cond="has_tool_calls")
        | llm_end.to(final_check),
        name="route",
    )
    tools_done = Event(
        run_tools.to(aborted, cond="interrupted") | run_tools.to(turn_start), name="tools_done"
    )
    decide = Event(
        final_check.to(aborted, cond="interrupted")
        | final_check.to(retry, cond="gate_retry", unless="last_turn")
        | final_check.to(final),
        name="decide",
    )
    retried = Event(retry.to(turn_start), name="retried")


class LoopGuards:
    """The guards named by :class:`AgentLoopMachine`, read off one :class:`RunContext`.

    Each is a pure predicate: no side effects, so evaluating a guard twice is harmless.
    """

    __slots__ = ("ctx", "policies")

    def __init__(self, ctx: RunContext, policies: PolicySet | None = None) -> None:
        self.ctx = ctx
        self.policies = policies if policies is not None else PolicySet()

    def abort_requested(self) -> bool:
        """The run's signal is aborted."""
        return self.ctx.signal_aborted

    def policy_stop(self) -> bool:
        """A turn gate asked to stop the run."""
        return self.ctx.pending_stop is not None

    def compression_needed(self) -> bool:
        """A compressor asked to compress this turn: the context reached
        ``budget * threshold`` with more than 8 non-system messages (the params'
        compression or the ``compress`` policy), or a compressor policy of your own said so."""
        return self.ctx.compress_by is not None

    def overflow_recoverable(self) -> bool:
        """The call overflowed the context window, a compressor that recovers from overflow
        is present (the ``compress`` policy), and this turn has forced fewer than
        ``MAX_OVERFLOW_COMPACTIONS`` compressions."""
        ctx = self.ctx
        return (
            is_context_overflow(ctx.error)
            and ctx.overflow_compactions < MAX_OVERFLOW_COMPACTIONS
            and any(getattr(c, "recovers_overflow", True) for c in self.policies.compressors)
        )

    def has_tool_calls(self) -> bool:
        """The last reply asked for at least one tool."""
        result = self.ctx.last_result
        return result is not None and bool(result.message.tool_calls)

    def last_turn(self) -> bool:
        """The current turn is the last one ``max_turns`` allows."""
        return self.ctx.is_last_turn

    def gate_retry(self) -> bool:
        """A final gate refused the answer."""
        return self.ctx.pending_retry is not None

    def interrupted(self) -> bool:
        """``Agent`` only: the signal fired and cut the chat call, the tools or a final gate
        short."""
        return self.ctx.interruptible and self.ctx.signal_aborted


GUARD_NAMES = (
    "abort_requested",
    "policy_stop",
    "compression_needed",
    "has_tool_calls",
    "last_turn",
    "gate_retry",
    "interrupted",
    "overflow_recoverable",
)
"""Every guard the machine names, in declaration order."""
