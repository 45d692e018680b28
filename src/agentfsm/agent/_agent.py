"""``Agent``: the front door for embedding the loop.

Built on the same machine and runner as :func:`agentfsm.run_conversation`, it adds session
recording and resume, lifecycle hooks, the frozen session preamble, streamed delta events and an
immediate interrupt.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentfsm._deprecated import warn_renamed
from agentfsm.adapters.sessions import (
    SessionHandle,
    SessionRecorder,
    SessionStore,
    read_session,
    read_session_messages,
    resolve_session,
)
from agentfsm.adapters.sessions._reader import answer_open_tool_calls, drop_trailing_user_messages
from agentfsm.engine._abort import AbortController
from agentfsm.engine._events import AgentEmitter
from agentfsm.engine._loop import build_run
from agentfsm.engine._messages import Message, UserMessage
from agentfsm.engine._params import LoopOutcome, LoopParams, evolved
from agentfsm.engine._policy import Policy, loop_policies
from agentfsm.engine._protocols import ChatFn, SupportsAbort, ToolRunner
from agentfsm.engine._stepper import DEFAULT_STEPPER, StepperKind
from agentfsm.engine._steps import run_step
from agentfsm.sandbox._process import CommandSandbox

from ._durable import gather_durable, submit_durable
from ._hooks import ExitReason, Hooks, PromptSubmit, RunStop, SessionStart, call_hook
from ._preamble import PreambleProvider, is_preamble_message, preamble_message

if TYPE_CHECKING:
    from agentfsm.adapters.telemetry import Instrumentation

__all__ = ["DEFAULT_MAX_TURNS", "Agent"]

logger = logging.getLogger("agentfsm.agent")

DEFAULT_MAX_TURNS = 50
"""Turn budget of an ``Agent`` run unless one is given."""


class Agent:
    """An agent you can run many times: model, tools, policies, sessions and hooks.

    Args:
        chat: The chat model.
        tools: The tool runner, or ``None`` for a tool-less agent.
        policies: Turn gates and final gates consulted by the machine's guards.
        system_prompt: Seeded into every run's history.
        session_dir: Record every run as a JSONL session there; ``None`` records nothing.
        hooks: Lifecycle hooks (``session_start``, ``user_prompt_submit``, ``stop``).
        preamble: Rendered once per session into its first user message (see
            ``WorkspacePreamble``). ``context=`` is its deprecated spelling.
        max_turns: LLM calls per run.
        temperature: Passed to every chat call.
        max_tokens: Passed to every chat call.
        context_budget_tokens: Compress older history past ``budget * compress_threshold``.
        compress_threshold: See ``context_budget_tokens``.
        stepper: Machine driver (``"compiled"`` or ``"statechart"``).
        sandbox: The OS sandbox of the run's commands: recorded in each session's
            ``run_start`` and used by a verify gate that was given none of its own. Without
            one, such a gate finds the OS sandbox itself and hides from it, as the
            workspace tools do, the ``.agentfsm`` folder and ``session_dir`` when it lies
            inside the gate's workspace.
        instrument: OpenTelemetry traces and metrics of every run (the ``otel`` extra):
            ``True`` uses the global tracer and meter providers; an
            ``agentfsm.adapters.telemetry.Instrumentation`` says which (docs/telemetry.md).
        durable_factory: The name this agent's factory is registered under
            (``agentfsm.adapters.durable.register_agent_factory``): :meth:`submit` then
            starts durable runs that any process with that factory can run or resume.

    Subscribe to ``engine.events`` to follow every run, streamed deltas included.
    """

    def __init__(
        self,
        chat: ChatFn,
        tools: ToolRunner | None = None,
        *,
        policies: Sequence[Policy] = (),
        system_prompt: str | None = None,
        session_dir: str | Path | None = None,
        hooks: Hooks | None = None,
        preamble: PreambleProvider | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        temperature: float | None = None,
        max_tokens: int | None = None,
        context_budget_tokens: int | None = None,
        compress_threshold: float = 0.8,
        stepper: StepperKind = DEFAULT_STEPPER,
        sandbox: CommandSandbox | None = None,
        context: PreambleProvider | None = None,
        instrument: bool | Instrumentation = False,
        durable_factory: str | None = None,
    ) -> None:
        if context is not None:
            warn_renamed("Agent(context=...)", "Agent(preamble=...)")
            if preamble is not None:
                raise TypeError("pass preamble= only (context= is its deprecated spelling)")
            preamble = context
        self.chat = chat
        self.tools = tools
        self.system_prompt = system_prompt
        self.store = SessionStore(session_dir) if session_dir is not None else None
        # The session folder: the run's commands must not reach it (see RunContext).
        self._protected_paths = (os.path.abspath(session_dir),) if session_dir is not None else ()
        self.hooks = hooks if hooks is not None else Hooks()
        self.preamble = preamble
        self.stepper: StepperKind = stepper
        self.sandbox = sandbox
        self.events = AgentEmitter()
        """Receives every event of every run."""
        # Validate once, early: the same fields build every run's LoopParams.
        self._params = LoopParams(
            max_turns,
            temperature=temperature,
            max_tokens=max_tokens,
            context_budget_tokens=context_budget_tokens,
            compress_threshold=compress_threshold,
        )
        self._policy_set = loop_policies(policies, self._params)
        self.policies = self._policy_set.all
        """The policies, checked at construction (a ``TypeError`` names an object that
        implements no hook)."""
        self._active: set[AbortController] = set()
        self.durable_factory = durable_factory
        self.instrumentation: Instrumentation | None = None
        """Where the runs' spans and metrics go (``None``: not instrumented)."""
        if instrument is not False:
            from agentfsm.adapters.telemetry import Instrumentation

            self.instrumentation = Instrumentation() if instrument is True else instrument

    # -- durable runs (the ``durable`` extra; DBOS launched by a ``DurableRuntime``) -------

    async def submit(
        self,
        prompt: str,
        *,
        run_id: str | None = None,
        on_event: Callable[[Any], None] | None = None,
    ) -> str:
        """Start a durable run of ``prompt``; returns its id (idempotent per id).

        The run is rebuilt from :attr:`durable_factory` in whichever process runs or
        resumes it, and recorded in a new session file of this agent's ``session_dir``.
        """
        return await submit_durable(self, prompt, run_id=run_id, on_event=on_event)

    async def gather(self, run_ids: Sequence[str]) -> list[LoopOutcome]:
        """The outcomes of durable runs, in order (waits for each to finish)."""
        return await gather_durable(run_ids)

    # -- sessions ------------------------------------------------------------------------

    def new_session(self, label: str | None = None) -> SessionHandle:
        """A session handle that several runs can share (pass it as ``session=``)."""
        if self.store is None:
            raise ValueError("this Agent records no sessions: give it a session_dir")
        return self.store.new_handle(label)

    def load_session(self, ref: str) -> list[Message]:
        """The messages of session ``ref`` (``latest``, an id or a unique id prefix)."""
        return read_session_messages(self._resolve(ref), keep=is_preamble_message)

    def _resolve(self, ref: str) -> Path:
        if self.store is None:
            raise ValueError("this Agent records no sessions: give it a session_dir")
        return resolve_session(self.store.session_dir, ref)

    # -- running -------------------------------------------------------------------------

    def interrupt(self, reason: object = None) -> None:
        """Stop every run in flight now: the chat call and running tools are cancelled."""
        for controller in list(self._active):
            controller.abort(reason)

    def run_sync(self, prompt_or_messages: str | Sequence[Message], **kwargs: Any) -> LoopOutcome:
        """:meth:`run` for scripts: runs its own event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(prompt_or_messages, **kwargs))
        raise RuntimeError("run_sync() cannot run inside an event loop; use await engine.run()")

    async def run(
        self,
        prompt_or_messages: str | Sequence[Message],
        *,
        history: Sequence[Message] | None = None,
        session: SessionHandle | None = None,
        signal: SupportsAbort | None = None,
        resume: str | None = None,
    ) -> LoopOutcome:
        """Run the agent on a prompt (or messages) and return the outcome.

        Args:
            prompt_or_messages: The new user input.
            history: The conversation so far. Defaults to the session's, when ``session``
                was used before, else empty.
            session: A handle to record into (shared by several runs); by default each run
                gets its own file when the engine has a ``session_dir``.
            signal: Aborting it interrupts the run at once (see :meth:`interrupt`).
            resume: Load the history from this session reference (``latest``, an id or a
                prefix); the new turns go to a fresh session seeded with it.

        Raises:
            Exception: whatever the chat call raised (after the ``stop`` hook ran).
        """
        new_input: list[Message] = (
            [UserMessage(prompt_or_messages)]
            if isinstance(prompt_or_messages, str)
            else list(prompt_or_messages)
        )
        policy_state: dict[str, Any] = {}
        resumed: Path | None = None
        if resume is not None:
            if history is not None:
                raise ValueError("pass either history or resume, not both")
            resumed = self._resolve(resume)
            log = read_session(resumed)
            history = log.transcript(keep=is_preamble_message, compressed=True)
            policy_state = log.policy_state
        handle = session
        if handle is None and self.store is not None:
            handle = self.store.new_handle()
        if history is not None:
            prior = list(history)
        elif handle is not None and not handle.first_use:
            prior = drop_trailing_user_messages(
                answer_open_tool_calls(handle.messages), keep=is_preamble_message
            )
            policy_state = dict(handle.policy_state)
        else:
            prior = []
        new_session = not prior
        path = os.fspath(handle) if handle is not None else None

        hooks = self.hooks  # a payload is built only for a hook that is there
        if new_session and hooks.session_start is not None:
            await call_hook(
                "session_start",
                hooks.session_start,
                SessionStart(handle.id if handle else None, path),
            )
        system = self.system_prompt
        if hooks.user_prompt_submit is not None:
            rewritten = await call_hook(
                "user_prompt_submit",
                hooks.user_prompt_submit,
                PromptSubmit(system, "\n".join(m.content for m in new_input)),
            )
            if isinstance(rewritten, str):
                system = rewritten
            elif rewritten is not None:
                logger.warning("agentfsm: user_prompt_submit returned %r; ignored", rewritten)

        messages = prior
        if new_session and self.preamble is not None:
            messages = [*prior, preamble_message(await self._render_preamble())]
        controller = AbortController()
        params = evolved(self._params, system_prompt=system, signal=controller.signal)
        # This run's events only (concurrent runs share ``self.events``), forwarded there.
        run_events = AgentEmitter(parent=self.events)
        chat, tools, telemetry = self.chat, self.tools, None
        if self.instrumentation is not None:
            telemetry = self.instrumentation.start_run(
                chat, run_events, conversation_id=handle.id if handle is not None else None
            )
            if telemetry is not None:
                chat, tools = telemetry.wrap_chat(chat), telemetry.wrap_tools(tools)
        runner = build_run(
            chat,
            tools,
            [*messages, *new_input],
            params,
            policies=self._policy_set,
            emitter=run_events,
            stepper=self.stepper,
            interruptible=True,
            deltas=True,
            policy_state=policy_state,
            sandbox=self.sandbox,
            protected_paths=self._protected_paths,
        )
        ctx = runner.ctx
        history_list = ctx.history
        unlink = _link(signal, controller)
        recorder = None
        if handle is not None:
            recorder = SessionRecorder(handle)
            first = handle.first_use
            recorder.start(
                run_events,
                messages=history_list
                if first
                else history_list[len(history_list) - len(new_input) :],
                input_chars=sum(len(m.content) for m in new_input),
                history_size=len(prior),
                sandbox=self.sandbox.describe() if self.sandbox is not None else None,
                history=lambda: ctx.history,
                seeded=len(history_list) - len(new_input) if first else 0,
                resumed_from=resumed,
            )
        self._active.add(controller)
        try:
            outcome = await (runner.run() if telemetry is None else telemetry.run(runner.run))
        except BaseException as exc:
            reason: ExitReason = "aborted" if isinstance(exc, asyncio.CancelledError) else "failed"
            if recorder is not None:
                recorder.finish(reason, ctx.usage, exc, ctx.policy_state)
            if hooks.stop is not None:
                await call_hook("stop", hooks.stop, RunStop(reason, ctx.usage, None, exc))
            raise
        finally:
            self._active.discard(controller)
            unlink()
        if recorder is not None:
            recorder.finish(outcome.stopped_reason, outcome.usage, policy_state=ctx.policy_state)
        outcome = evolved(outcome, session_path=path)
        if hooks.stop is not None:
            await call_hook(
                "stop", hooks.stop, RunStop(outcome.stopped_reason, outcome.usage, outcome)
            )
        return outcome

    async def _render_preamble(self) -> str:
        """The preamble's text: a step (``preamble``), so a durable run that is replayed
        gets the text its first execution rendered, not the workspace as it is now."""
        preamble = self.preamble
        assert preamble is not None

        async def render() -> str:
            text = preamble.render()
            if inspect.isawaitable(text):
                text = await text
            return str(text)

        return await run_step("preamble", render)


def _link(signal: SupportsAbort | None, controller: AbortController) -> Callable[[], None]:
    """Make ``signal`` abort ``controller``; returns an unlinker."""
    if signal is None:
        return lambda: None
    if signal.aborted:
        controller.abort(getattr(signal, "reason", None))
        return lambda: None
    add_callback = getattr(signal, "add_callback", None)
    if callable(add_callback):
        remover: Callable[[], None] = add_callback(
            lambda: controller.abort(getattr(signal, "reason", None))
        )
        return remover
    wait = getattr(signal, "wait", None)
    if callable(wait):

        async def watch() -> None:
            await wait()
            controller.abort(getattr(signal, "reason", None))

        task = asyncio.ensure_future(watch())

        def unlink() -> None:
            task.cancel()

        return unlink
    logger.warning("agentfsm: signal %r has no add_callback/wait; seen only before the run", signal)
    return lambda: None
