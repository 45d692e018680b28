"""The async runner: performs each state's effect, then sends the event that leaves it.

:func:`run_conversation` is the core contract. The runner owns all I/O (chat calls, tool
runs, gates); the machine decides where to go next from its guards; policies are consulted
at the fixed points listed in :mod:`agentfsm.engine._policy`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from ._batching import plan_tool_batches
from ._cancellation import open_calls
from ._compression import CompressionResult
from ._context import RunContext, ToolOutcome, current_run
from ._errors import AbortError, ContextOverflowUnresolved, is_context_overflow
from ._events import (
    AgentEmitter,
    AgentEvent,
    BudgetExhaustedEvent,
    CompressEndEvent,
    CompressStartEvent,
    ErrorEvent,
    FinalEvent,
    GateEvent,
    LlmEndEvent,
    LlmStartEvent,
    PolicyStopEvent,
    PolicyWarnEvent,
    ReminderEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from ._history import budget_exhausted_result, images_message, tool_message_from_result
from ._interrupt import Interrupter, activate, deactivate, interrupt
from ._machine import AgentLoopMachine, LoopGuards
from ._messages import ChatResult, Message, ToolCall, ToolResult
from ._params import LoopOutcome, StopInfo, StoppedReason
from ._policy import (
    Notice,
    Policy,
    PolicySet,
    Remind,
    Retry,
    Stop,
    Warn,
    consult,
    hook_failed,
    loop_policies,
    policy_name,
)
from ._protocols import ChatDelta, ChatFn, ToolRunner
from ._reminders import render_reminders, retry_message, with_reminders
from ._stepper import CompiledStepper
from ._steps import run_step
from ._tool_run import run_tool

__all__ = ["INTERRUPTED", "LoopRunner", "render_reminders", "retry_message", "with_reminders"]

logger = logging.getLogger("agentfsm.engine")
_PASS = (AbortError,)

_Effect = Callable[["LoopRunner"], Awaitable["str | LoopOutcome"]]
T = TypeVar("T")

INTERRUPTED = "interrupted"
"""Error of the result that closes a tool call cut short by an immediate interrupt."""


class LoopRunner:
    """Drives one run of :class:`~agentfsm.engine._machine.AgentLoopMachine`.

    Build one per run. ``run()`` returns the outcome, or re-raises the chat error that
    failed the run (after emitting ``error``).

    With ``ctx.interruptible`` set, an aborted signal cancels the in-flight chat call or tool
    at once (the run ends ``aborted``); otherwise it is noticed at the next turn's top.
    ``deltas=True`` turns streamed pieces into ``text_delta`` / ``thinking_delta`` events.
    """

    def __init__(
        self,
        chat: ChatFn,
        tools: ToolRunner | None,
        ctx: RunContext,
        *,
        emitter: AgentEmitter | None = None,
        policies: Sequence[Policy] | PolicySet = (),
        deltas: bool = False,
    ) -> None:
        self.chat = chat
        self.tools = tools
        self.ctx = ctx
        self.emitter = emitter if emitter is not None else AgentEmitter()
        self.deltas = deltas
        self.policies = (
            policies if isinstance(policies, PolicySet) else loop_policies(policies, ctx.params)
        )
        ctx.max_turns = self.policies.max_turns(ctx.params.max_turns)
        ctx.policy_keys = self.policies.keys
        if ctx.chat is None:
            ctx.chat = chat
        if ctx.tools is None:
            ctx.tools = tools
        self._destructive = frozenset(s.name for s in ctx.tool_specs if s.destructive)
        self._started: set[int] = set()
        """Positions in the reply of the turn's calls whose tool started (ids may repeat)."""
        self._reported: BaseException | None = None
        """The error the ``error`` event already reported."""
        self._interrupter: Interrupter | None = None
        self.stepper = CompiledStepper(LoopGuards(ctx, self.policies))
        self.hooked = self.policies.by_hook
        """The policies implementing each hook, in the set's order."""

    async def run(self) -> LoopOutcome:
        """Run the loop to a final state.

        Cancelled from outside (``task.cancel()``), the run still closes: each tool call of
        the current turn left open gets a cancelled ``tool_call_end`` (and its tool message),
        then ``error`` is emitted and the ``CancelledError`` re-raised.
        """
        stepper = self.stepper
        effects = _EFFECTS
        interrupter = self._interrupter = Interrupter.arm(self.ctx.params.signal)
        token = activate(interrupter)
        try:
            while True:
                step = await effects[stepper.state](self)
                if isinstance(step, str):
                    stepper.send(step)
                    continue
                return step
        except asyncio.CancelledError as exc:
            self._close_open_calls()
            self._emit(ErrorEvent(error=exc))
            raise
        except Exception as exc:
            if exc is not self._reported:  # a policy failed (the chat's errors end ``failed``)
                logger.error("agentfsm: run failed on turn %d: %s", self.ctx.turn, exc)
                self._close_open_calls()
                self._emit(ErrorEvent(error=exc))
            raise
        finally:
            deactivate(token)
            if interrupter is not None:
                interrupter.close()
            self._interrupter = None

    def _close_open_calls(self) -> None:
        """Answer the calls of the current turn an ending run left open (cancelled
        ``tool_call_end``, observers not told)."""
        ctx = self.ctx
        if self.stepper.state == "run_tools" and ctx.last_result is not None:
            calls = ctx.last_result.message.tool_calls
            for call, result in open_calls(calls, ctx.turn_tools, self._started):
                self._record(call, result, True)

    # -- helpers ------------------------------------------------------------------------

    def _emit(self, event: AgentEvent) -> None:
        ctx = self.ctx
        ctx.event_seq += 1
        ctx.recent_events.append((ctx.event_seq, event))
        self.emitter.emit(event)

    @property
    def on_delta(self) -> Callable[[ChatDelta], None] | None:
        """The chat call's ``on_delta``, bound per call (kept, it would be a reference cycle)."""
        return self._emit_delta if self.deltas else None

    def _emit_delta(self, delta: ChatDelta) -> None:
        turn = self.ctx.turn
        if delta.kind == "thinking":
            self._emit(ThinkingDeltaEvent(turn=turn, text=delta.text))
        else:
            self._emit(TextDeltaEvent(turn=turn, text=delta.text))

    async def _hook(
        self, policy: object, hook: str, *args: Any, cut: Any = None, interruptible: bool = True
    ) -> Any:
        """``policy.<hook>(*args)``, sync or async, its answer checked: how every state calls
        a policy hook.

        A hook that raises fails the run with a :class:`PolicyError` naming the policy (see
        :func:`consult`). An async answer is awaited through :meth:`_interruptible`: when an
        immediate interrupt cuts it short, the hook answers ``cut`` (nothing) and the machine
        ends the run ``aborted`` at its next edge that looks at the signal.
        """
        wait = self._interruptible if interruptible else None
        try:
            return await consult(policy, hook, *args, wait=wait, passthrough=_PASS)
        except AbortError as exc:
            if self.ctx.interruptible and self.ctx.signal_aborted:
                return cut
            hook_failed(policy, hook, exc)

    async def _observe(self, hook: str, *args: Any) -> None:
        """Tell each observer of ``hook``; push the reminders they answer."""
        for observer in self.hooked[hook]:
            self._remind(observer, await self._hook(observer, hook, self.ctx, *args))

    def _remind(self, policy: object, verdict: Remind | None) -> None:
        if verdict is not None:
            self.ctx.reminders.append(verdict.text)
            self._emit(
                ReminderEvent(turn=self.ctx.turn, policy=policy_name(policy), text=verdict.text)
            )

    def _interruptible(self, awaitable: Awaitable[T], *, in_run_task: bool = True) -> Awaitable[T]:
        """``awaitable``; with an immediate interrupt, cancelled when the signal fires (the
        run's interrupter serves a call made in the run's own task)."""
        signal: Any = self.ctx.params.signal
        if not self.ctx.interruptible or signal is None:
            return awaitable
        interrupter = self._interrupter
        if in_run_task and interrupter is not None and interrupter.ready():
            return interrupter.call(awaitable, INTERRUPTED)
        return interrupt(awaitable, signal, interrupter, INTERRUPTED)

    async def _interruptible_chat(self, *args: Any, **kwargs: Any) -> ChatResult:
        chat = self.chat
        return await self._interruptible(run_step("chat", lambda: chat(*args, **kwargs)))

    # -- states -------------------------------------------------------------------------

    async def _turn_start(self) -> str:
        """Next turn number, emit ``turn_start``, ask the turn gates."""
        ctx = self.ctx
        ctx.turn += 1
        ctx.pending_stop = None
        ctx.stopping_policy = None
        ctx.pending_retry = None
        ctx.retry_policy = None
        ctx.overflow_compactions = 0
        ctx.error = None
        self._emit(TurnStartEvent(turn=ctx.turn))
        gates = () if ctx.signal_aborted else self.hooked["check_turn"]
        for gate in gates:
            answer = await self._hook(gate, "check_turn", ctx)
            verdicts = answer if isinstance(answer, (list, tuple)) else (answer,)
            for verdict in verdicts:
                if isinstance(verdict, Stop):
                    ctx.pending_stop = verdict
                    ctx.stopping_policy = policy_name(gate)
                elif isinstance(verdict, Warn):
                    self._emit(
                        PolicyWarnEvent(
                            turn=ctx.turn,
                            policy=policy_name(gate),
                            reason=verdict.reason,
                            code=verdict.code,
                        )
                    )
                elif isinstance(verdict, Notice):
                    self._emit(verdict.event)
                elif isinstance(verdict, Remind):
                    self._remind(gate, verdict)
            if ctx.pending_stop is not None:
                break
        ctx.turn_tools = []  # the gates saw the previous turn's calls
        return "begin"

    async def _compress_check(self) -> str:
        """Ask each compressor whether this turn compresses (the first yes decides)."""
        ctx = self.ctx
        ctx.compress_by = None
        for compressor in self.hooked["should_compress"]:
            if await self._hook(compressor, "should_compress", ctx, cut=False):
                ctx.compress_by = compressor
                break
        return "check"

    async def _compress(self) -> str:
        """``compress_start``, summarize older history, ``compress_end``."""
        ctx = self.ctx
        self._emit(CompressStartEvent(estimated_tokens=ctx.token_estimate))
        compressor = ctx.compress_by
        if ctx.error is not None:  # forced by a context overflow
            ctx.overflow_compactions += 1
            ctx.error = None
            compressor = next(
                c for c in self.policies.compressors if getattr(c, "recovers_overflow", True)
            )
        ctx.compress_by = None
        assert compressor is not None
        unchanged = CompressionResult(list(ctx.history), 0)
        compressed: CompressionResult = await self._hook(
            compressor, "compress", ctx, self._interruptible_chat, cut=unchanged
        )
        if compressed.usage is not None:
            ctx.usage += compressed.usage
        if compressed.summary_chars > 0:
            ctx.replace_history(compressed.messages)
            ctx.compressions += 1
        self._emit(CompressEndEvent(summary_chars=compressed.summary_chars))
        return "compressed"

    async def _llm_start(self) -> str:
        """Emit ``llm_start``, make one chat call."""
        ctx = self.ctx
        params = ctx.params
        self._emit(LlmStartEvent(turn=ctx.turn))
        request: Sequence[Message] = ctx.history
        for shaper in self.hooked["shape_request"]:
            request = await self._hook(shaper, "shape_request", ctx, request, cut=request)
        if ctx.reminders:
            request = with_reminders(request, render_reminders(ctx.reminders))
            ctx.reminders = []
        try:
            reply: object = await self._interruptible(
                run_step(
                    "chat",
                    lambda: self.chat(
                        request,
                        ctx.tool_specs,
                        temperature=params.temperature,
                        max_tokens=params.max_tokens,
                        signal=params.signal,
                        on_delta=self.on_delta,
                    ),
                )
            )
            if not isinstance(reply, ChatResult):
                raise TypeError(f"chat function returned {type(reply).__name__}, not ChatResult")
            result = reply
        except Exception as exc:
            ctx.error = exc
            return "raised"
        for shaper in self.hooked["shape_reply"]:
            result = await self._hook(shaper, "shape_reply", ctx, result) or result
        ctx.last_result = result
        ctx.turns_used += 1
        if result.usage is not None:
            ctx.usage += result.usage
            ctx.last_usage = result.usage
            ctx.context_measured = result.usage.input_tokens
        return "replied"

    async def _llm_end(self) -> str:
        """Push the assistant message, emit ``llm_end``."""
        ctx = self.ctx
        result = ctx.last_result
        assert result is not None
        ctx.append(result.message)
        self._emit(LlmEndEvent(turn=ctx.turn, result=result))
        await self._observe("on_llm_end")
        return "route"

    async def _run_tools(self) -> str:
        """Each call in order (concurrency-safe ones together): ``tool_call_start``, run,
        push the result, ``tool_call_end``."""
        ctx = self.ctx
        assert ctx.last_result is not None
        self._started = set()
        token = current_run.set(ctx)
        try:
            first = 0  # the position of the batch's first call in the reply
            for batch in plan_tool_batches(ctx.last_result.message.tool_calls, ctx.tool_specs):
                if len(batch) == 1:
                    await self._run_alone(batch[0], first)
                else:
                    await self._run_batch(batch, first)
                first += len(batch)
        finally:
            current_run.reset(token)
        images = images_message(ctx.turn_tools)
        if images is not None:
            ctx.append(images)
        await self._observe("on_turn_end")
        return "tools_done"

    async def _run_alone(self, call: ToolCall, position: int) -> None:
        ctx = self.ctx
        cut = ctx.interruptible and ctx.signal_aborted
        result = ToolResult(ok=False, output="", error=INTERRUPTED)
        if not cut:
            self._emit(ToolCallStartEvent(turn=ctx.turn, call=call))
            self._started.add(position)
            try:
                result = await self._interruptible(run_tool(self.tools, call, ctx.params.signal))
            except AbortError:
                cut = True
                result = ToolResult(ok=False, output="", error=INTERRUPTED)
        await self._post(call, result, cut)

    async def _run_batch(self, batch: tuple[ToolCall, ...], first: int) -> None:
        """Run concurrency-safe calls together (the first at ``first``); post in order."""
        ctx = self.ctx
        if ctx.interruptible and ctx.signal_aborted:
            for call in batch:
                await self._post(call, ToolResult(ok=False, output="", error=INTERRUPTED), True)
            return
        for position, call in enumerate(batch, start=first):
            self._emit(ToolCallStartEvent(turn=ctx.turn, call=call))
            self._started.add(position)
        # One coroutine per call, created only when its task starts: a batch cancelled
        # before then leaves no tool coroutine un-awaited.
        results = await asyncio.gather(
            *(self._run_tool_interruptibly(call) for call in batch), return_exceptions=True
        )
        for call, result in zip(batch, results, strict=True):
            if isinstance(result, ToolResult):
                await self._post(call, result, False)
            elif isinstance(result, AbortError):
                await self._post(call, ToolResult(ok=False, output="", error=INTERRUPTED), True)
            elif isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result
            else:
                await self._post(call, ToolResult(ok=False, output="", error=f"{result!r}"), False)

    async def _post(self, call: ToolCall, result: ToolResult, cancelled: bool) -> None:
        await self._observe("on_tool_result", self._record(call, result, cancelled))

    def _record(self, call: ToolCall, result: ToolResult, cancelled: bool) -> ToolOutcome:
        ctx = self.ctx
        if not cancelled:
            ctx.tool_calls_total += 1
            ctx.tool_counts[call.name] = ctx.tool_counts.get(call.name, 0) + 1
            if result.ok and call.name in self._destructive:
                ctx.record_mutation(call, result)
        ctx.append(tool_message_from_result(call, result))
        outcome = ToolOutcome(call, result, cancelled=cancelled)
        ctx.turn_tools.append(outcome)
        self._emit(ToolCallEndEvent(turn=ctx.turn, call=call, result=result, cancelled=cancelled))
        return outcome

    async def _run_tool_interruptibly(self, call: ToolCall) -> ToolResult:
        tool = run_tool(self.tools, call, self.ctx.params.signal)
        return await self._interruptible(tool, in_run_task=False)

    async def _final_check(self) -> str:
        """Ask the final gates (the first ``Retry`` refuses the answer; a gate's ``Notice``
        is emitted as it answers)."""
        ctx = self.ctx
        await self._observe("on_turn_end")
        for gate in self.hooked["check_final"]:
            answer = await self._hook(gate, "check_final", ctx)
            retry = None
            for verdict in answer if isinstance(answer, (list, tuple)) else (answer,):
                if isinstance(verdict, Notice):
                    self._emit(verdict.event)
                elif isinstance(verdict, Retry) and retry is None:
                    retry = verdict
            if retry is not None:
                ctx.pending_retry = retry
                ctx.retry_policy = policy_name(gate)
                break
        return "decide"

    async def _retry(self) -> str:
        """Push a neutral user turn into the history, queue the refusing gate's reminder for
        the next request, emit ``gate``."""
        ctx = self.ctx
        retry = ctx.pending_retry
        assert retry is not None
        assert ctx.retry_policy is not None
        ctx.gate_retries += 1
        # The refused answer stays in the history: a neutral user turn follows it (the next
        # answer must not be a second assistant message in a row), and the reminder, like
        # every reminder, reaches the next request only.
        ctx.append(retry_message())
        ctx.reminders.append(retry.reminder)
        self._emit(GateEvent(turn=ctx.turn, policy=ctx.retry_policy, reminder=retry.reminder))
        return "retried"

    async def _final(self) -> LoopOutcome:
        """Emit ``final``, ``turn_end``."""
        ctx = self.ctx
        result = ctx.last_result
        assert result is not None
        self._emit(FinalEvent(message=result.message, result=result))
        self._emit(TurnEndEvent(turn=ctx.turn))
        return await self._outcome("final", final=True)

    async def _budget(self) -> LoopOutcome:
        """Close each requested call as ``turn_budget_exhausted`` (a cancelled
        ``tool_call_end``, no start), emit ``budget_exhausted``, ``turn_end``."""
        ctx = self.ctx
        assert ctx.last_result is not None
        emit = self._emit
        for call in ctx.last_result.message.tool_calls:
            result = budget_exhausted_result()
            ctx.append(tool_message_from_result(call, result))
            ctx.turn_tools.append(ToolOutcome(call, result, cancelled=True))
            emit(ToolCallEndEvent(turn=ctx.turn, call=call, result=result, cancelled=True))
        emit(BudgetExhaustedEvent(turns_used=ctx.turns_used))
        emit(TurnEndEvent(turn=ctx.turn))
        return await self._outcome("budget")

    async def _aborted(self) -> LoopOutcome:
        """Emit ``error`` with ``AbortError("agent loop aborted")``."""
        self._emit(ErrorEvent(error=AbortError()))
        self.ctx.last_result = None
        return await self._outcome("aborted")

    async def _stopped(self) -> LoopOutcome:
        """Emit ``policy_stop``, ``turn_end``."""
        ctx = self.ctx
        stop = ctx.pending_stop
        assert stop is not None
        assert ctx.stopping_policy is not None
        ctx.stop = StopInfo(ctx.stopping_policy, stop.reason)
        self._emit(PolicyStopEvent(turn=ctx.turn, policy=ctx.stopping_policy, reason=stop.reason))
        self._emit(TurnEndEvent(turn=ctx.turn))
        return await self._outcome("policy")

    async def _failed(self) -> LoopOutcome:
        """Log, emit ``error``, re-raise the chat call's error."""
        ctx = self.ctx
        error = ctx.error
        assert error is not None
        if is_context_overflow(error) and any(
            getattr(c, "recovers_overflow", True) for c in self.policies.compressors
        ):
            unresolved = ContextOverflowUnresolved(ctx.overflow_compactions)
            unresolved.__cause__ = error
            error = unresolved
        logger.error("agentfsm: chat call failed on turn %d: %s", ctx.turn, error)
        self._emit(ErrorEvent(error=error))
        self._reported = error
        raise error

    async def _outcome(self, reason: StoppedReason, *, final: bool = False) -> LoopOutcome:
        ctx = self.ctx
        result = ctx.last_result
        outcome = LoopOutcome(
            messages=ctx.history,
            final=result.message if final and result is not None else None,
            result=result,
            turns_used=ctx.turns_used,
            stopped_reason=reason,
            usage=ctx.usage,
            stop=ctx.stop,
        )
        for shaper in self.hooked["shape_outcome"]:  # the run is over: nothing to interrupt
            shaped = await self._hook(shaper, "shape_outcome", ctx, outcome, interruptible=False)
            outcome = shaped or outcome
        return outcome


_EFFECTS: dict[str, _Effect] = {
    state.id: getattr(LoopRunner, f"_{state.id}") for state in AgentLoopMachine.states
}
"""The effect of each state: the runner's method named after it."""
