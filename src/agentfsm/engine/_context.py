"""``RunContext``: the one mutable state object of a run.

Guards and policies read it; only the engine writes it. Its bookkeeping is incremental so
that nothing per turn is proportional to the history's length.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from attrs import define, field

from agentfsm.sandbox import CommandSandbox

from ._messages import ChatResult, Message, SystemMessage, ToolCall, ToolResult, ToolSpec, Usage
from ._params import LoopParams, StopInfo
from ._policy import Retry, Stop
from ._protocols import ChatFn, ToolRunner
from ._steps import run_step
from ._tokens import estimate_message_tokens

__all__ = ["RECENT_EVENTS", "RunContext", "ToolOutcome", "current_run"]

T = TypeVar("T")

current_run: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar(
    "agentfsm_current_run", default=None
)
"""The run whose tools are executing (tools may read it, e.g. to see pruned results)."""

RECENT_EVENTS = 256
"""How many of the latest events a run keeps in ``RunContext.recent_events``."""


@define(frozen=True)
class ToolOutcome:
    """One tool call of the current turn and how it ended."""

    call: ToolCall
    """The call."""
    result: ToolResult
    """Its result."""
    cancelled: bool = False
    """It did not run to completion."""


@define(slots=True, eq=False)
class RunContext:
    """The run's state, read by guards and policies.

    Policies must treat it as read-only; the runner is its only writer.
    """

    params: LoopParams
    """The run's parameters."""
    history: list[Message]
    """The working history: seeded copy of the caller's messages, mutated in place."""
    tool_specs: Sequence[ToolSpec] = ()
    """The tools offered this run."""
    chat: ChatFn | None = None
    """The run's chat model (policies call it through :meth:`aux_chat`)."""
    tools: ToolRunner | None = None
    """The run's tool runner (a verifier derives its read-only tools from it)."""
    turn: int = 0
    """Current 1-based turn; 0 before the first ``turn_start``."""
    max_turns: int = 0
    """The run's turn limit: ``params.max_turns`` or a tighter policy ``turn_budget``."""
    turns_used: int = 0
    """LLM calls completed by the loop's turns."""
    usage: Usage = field(factory=Usage)
    """Run totals, auxiliary calls (compression, policies) included."""
    last_usage: Usage | None = None
    """Usage of the most recent chat call of a turn (its input is the context occupancy)."""
    last_result: ChatResult | None = None
    """The most recent turn's chat result."""
    turn_tools: list[ToolOutcome] = field(factory=list)
    """The current turn's tool calls and results, in call order. Inside ``check_turn`` (the
    top of a turn, before any call of it) it still holds the previous turn's."""
    tool_calls_total: int = 0
    """Tool calls executed so far in the run."""
    tool_counts: dict[str, int] = field(factory=dict)
    """How many times each tool ran, by name."""
    mutations: int = 0
    """Successful calls of destructive tools in this run."""
    mutated_files: list[str] = field(factory=list)
    """Paths those calls changed, first change first, each once."""
    aux_usage: Usage = field(factory=Usage)
    """The part of ``usage`` spent by auxiliary calls (compression, gates, supervisors)."""
    event_seq: int = 0
    """Sequence number of the latest event of the run (events are numbered from 1)."""
    recent_events: deque[tuple[int, Any]] = field(factory=lambda: deque(maxlen=RECENT_EVENTS))
    """The latest events with their sequence numbers (a bounded window of the run's log)."""
    pending_stop: Stop | None = None
    """A turn gate's stop verdict for the current turn top."""
    stopping_policy: str | None = None
    """The name of the gate that gave ``pending_stop``."""
    pending_retry: Retry | None = None
    """A final gate's retry verdict for the current reply."""
    retry_policy: str | None = None
    """The name of the gate that gave ``pending_retry``."""
    gate_retries: int = 0
    """How many final answers the gates refused so far."""
    reminders: list[str] = field(factory=list)
    """Reminders queued for the next request only (never stored in history)."""
    compressions: int = 0
    """Compressions that rewrote history."""
    overflow_compactions: int = 0
    """Compressions forced by a context-overflow error during the current turn."""
    compress_by: object | None = None
    """The compressor that asked to compress this turn (set at ``compress_check``)."""
    policy_keys: dict[int, str] = field(factory=dict)
    """Each policy's ``policy_state`` key by ``id()`` (set by the runner)."""
    policy_scratch: dict[int, Any] = field(factory=dict)
    """Per-run state of each policy object (see :meth:`state`, the one way to keep it)."""
    context_measured: int | None = None
    """The last call's input tokens, cleared when compression rewrites the history."""
    policy_state: dict[str, Any] = field(factory=dict)
    """Durable state of policies, one JSON-able entry per policy name (persisted by
    ``Agent`` with the session, restored on resume). A policy writes only its own entry."""
    error: BaseException | None = None
    """The error that failed the run, if any."""
    stop: StopInfo | None = None
    """Set when a policy stopped the run."""
    sandbox: CommandSandbox | None = None
    """The OS sandbox the run's commands go through (the verify gate uses it when it was
    given none of its own)."""
    protected_paths: tuple[str, ...] = ()
    """Absolute paths of the agent's own that the run's commands must neither read nor
    change (``Agent``: its session folder). A verify gate that finds a sandbox itself hides
    those inside its workspace, as the workspace tools do, besides ``.agentfsm``."""
    pinned: int = 0
    """How many of the history's first non-system messages a compression keeps verbatim,
    ahead of its summary (``Agent``: its frozen session context, so that the conversation's
    prefix stays byte for byte the same). ``0`` in the core loop: everything but the system
    messages and the recent ones is summarized."""
    interruptible: bool = False
    """An aborted signal cuts the in-flight chat call and tools at once (``Agent``), instead
    of being noticed only at the next turn's top (``run_conversation``)."""
    clock: Callable[[], float] = time.monotonic
    """Monotonic clock used for ``elapsed``."""
    started_at: float = 0.0
    """Clock reading when the run started."""
    token_estimate: int = 0
    """``estimate_messages_tokens(history)``, kept up to date incrementally."""
    system_count: int = 0
    """How many system messages the history holds."""

    def __attrs_post_init__(self) -> None:
        self.started_at = self.clock()
        if self.max_turns <= 0:
            self.max_turns = self.params.max_turns
        self._recount()

    @property
    def signal_aborted(self) -> bool:
        """Whether the run's signal is aborted."""
        signal = self.params.signal
        return signal is not None and signal.aborted

    @property
    def non_system_count(self) -> int:
        """Messages in the history that are not system messages."""
        return len(self.history) - self.system_count

    @property
    def context_tokens(self) -> int | None:
        """Context occupancy: the last call's input tokens (not a sum), when reported and
        still current (compression makes it stale)."""
        return self.context_measured

    @property
    def elapsed(self) -> float:
        """Seconds since the run started."""
        return self.clock() - self.started_at

    @property
    def is_last_turn(self) -> bool:
        """Whether the current turn is the last one the budget allows."""
        return self.turn >= self.max_turns

    def state(self, policy: object, factory: Callable[[], T]) -> T:
        """``policy``'s own state for this run, made by ``factory()`` on first use.

        The one place a policy (or a tool) keeps scratch state for a run: keyed by the
        owner object (``self``, or a module-level constant for state that several objects
        share), so two instances of one policy never share state. Not persisted (see
        :meth:`durable_state`).
        """
        entry = self.policy_scratch.get(id(policy))
        if entry is not None and entry[0] is policy:
            found: T = entry[1]
            return found
        value = factory()
        self.policy_scratch[id(policy)] = (policy, value)
        return value

    def durable_state(self, policy: object, factory: Callable[[], T]) -> T:
        """``policy``'s persisted state (JSON-able), made by ``factory()`` on first use.

        Stored in :attr:`policy_state` under the policy's key (its name; ``name#2`` … for a
        later policy of the same name), which ``Agent`` saves with the session and restores on
        resume.
        """
        key = self.policy_keys.get(id(policy))
        if key is None:
            name = getattr(policy, "name", None)
            key = name if isinstance(name, str) else type(policy).__name__
        if key not in self.policy_state:
            self.policy_state[key] = factory()
        value: T = self.policy_state[key]
        return value

    def charge(self, usage: Usage | None) -> None:
        """Count an auxiliary call's tokens in the run totals (so ``spend_limit`` sees them)."""
        if usage is not None:
            self.usage += usage
            self.aux_usage += usage

    async def aux_chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - a bound on this one call
        chat: ChatFn | None = None,
    ) -> ChatResult:
        """One auxiliary, non-streamed call (the run's model unless ``chat`` is given), with
        its usage charged to the run. Raises what the call raises, or ``TimeoutError``."""
        model = chat if chat is not None else self.chat
        if model is None:
            raise RuntimeError("this run has no chat model for auxiliary calls")
        signal = self.params.signal

        async def call() -> ChatResult:
            reply = model(messages, tools, max_tokens=max_tokens, signal=signal)
            return await (asyncio.wait_for(reply, timeout) if timeout is not None else reply)

        result = await run_step("aux_chat", call)
        self.charge(result.usage)
        return result

    def record_mutation(self, call: ToolCall, result: ToolResult) -> None:
        """Count a destructive tool's successful call and the file it changed."""
        self.mutations += 1
        path = result.metadata.get("path", call.arguments.get("path"))
        if isinstance(path, str) and path not in self.mutated_files:
            self.mutated_files.append(path)

    def append(self, message: Message) -> None:
        """Push a message onto the history, keeping the counters current."""
        self.history.append(message)
        self.token_estimate += estimate_message_tokens(message)
        if isinstance(message, SystemMessage):
            self.system_count += 1

    def replace_history(self, messages: Iterable[Message]) -> None:
        """Refill the history in place (the caller's reference stays valid)."""
        self.history[:] = list(messages)
        self.context_measured = None
        self._recount()

    def _recount(self) -> None:
        self.token_estimate = sum(estimate_message_tokens(m) for m in self.history)
        self.system_count = sum(1 for m in self.history if isinstance(m, SystemMessage))
