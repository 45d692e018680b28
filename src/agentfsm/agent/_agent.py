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

import attrs

from agentfsm.adapters.sessions import (
    SessionHandle,
    SessionRecorder,
    SessionStore,
    answer_open_tool_calls,
    drop_trailing_user_messages,
    read_session,
    read_session_messages,
    resolve_session,
)
from agentfsm.engine import (
    AbortController,
    AgentEmitter,
    ChatFn,
    LoopOutcome,
    LoopParams,
    LoopRunner,
    Message,
    Policy,
    SupportsAbort,
    SystemMessage,
    ToolRunner,
    Usage,
    UserMessage,
    build_run,
    check_messages,
    evolved,
    loop_policies,
    run_step,
)
from agentfsm.sandbox import CommandSandbox, check_sandbox

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
            ``WorkspacePreamble``).
        max_turns: LLM calls per run.
        temperature: Passed to every chat call.
        max_tokens: Passed to every chat call.
        context_budget_tokens: Compress older history past ``budget * compress_threshold``.
        compress_threshold: See ``context_budget_tokens``.
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
        sandbox: CommandSandbox | None = None,
        instrument: bool | Instrumentation = False,
        durable_factory: str | None = None,
    ) -> None:
        _check_chat(chat)
        _check_tools(tools)
        _check_hooks(hooks)
        _check_preamble(preamble)
        check_sandbox(sandbox, "Agent")
        self.chat = chat
        self.tools = tools
        self.system_prompt = system_prompt
        self.store = SessionStore(session_dir) if session_dir is not None else None
        # The session folder: the run's commands must not reach it (see RunContext).
        self._protected_paths = (os.path.abspath(session_dir),) if session_dir is not None else ()
        self.hooks = hooks if hooks is not None else Hooks()
        self.preamble = preamble
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
        except RuntimeError:  # no loop running: the one case run_sync is for
            pass
        else:
            raise RuntimeError("run_sync() cannot run inside an event loop; use await agent.run()")
        # Outside the except block, so that what the run raises is not chained to the
        # "no running event loop" error.
        return asyncio.run(self.run(prompt_or_messages, **kwargs))

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
        if not isinstance(prompt_or_messages, str):
            check_messages(prompt_or_messages, "Agent.run")
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
        first_use = handle is not None and handle.first_use
        hooks = self.hooks  # a payload is built only for a hook that is there
        controller = AbortController()
        unlink = _link(signal, controller)
        self._active.add(controller)
        runner: LoopRunner | None = None
        recorder: SessionRecorder | None = None
        unrecorded: OSError | None = None
        told_stop = False
        # Everything from here to the recorded end is inside one try: however the run ends
        # (a cancellation during a hook included), the stop hook, the span and the
        # session's run_end say the same.
        try:
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
                interruptible=True,
                deltas=True,
                policy_state=policy_state,
                sandbox=self.sandbox,
                protected_paths=self._protected_paths,
                pinned=_pinned([*messages, *new_input]),
            )
            ctx = runner.ctx
            if handle is not None:
                recorder = SessionRecorder(handle)
                history_list = ctx.history
                recorder.start(
                    run_events,
                    messages=history_list
                    if first_use
                    else history_list[len(history_list) - len(new_input) :],
                    input_chars=sum(len(m.content) for m in new_input),
                    history_size=len(prior),
                    sandbox=self.sandbox.describe() if self.sandbox is not None else None,
                    history=lambda: ctx.history,
                    seeded=len(history_list) - len(new_input) if first_use else 0,
                    resumed_from=resumed,
                )
                if handle.error is not None:
                    # Not even the run's start could be recorded: no model call is paid for.
                    unrecorded = OSError(
                        f"session {handle.id} could not be recorded "
                        f"({handle.error.strerror or handle.error}): {handle.path}"
                    )
                    unrecorded.errno = handle.error.errno
                    raise unrecorded

            async def body() -> LoopOutcome:
                nonlocal told_stop
                done = await runner.run()
                # A task.cancel() that came with the run's last event ends the task
                # cancelled: take it here, so that the run is recorded (its span and the stop
                # hook included) as what the caller gets.
                await asyncio.sleep(0)
                if hooks.stop is not None:  # inside the span, before the end is recorded
                    told_stop = True
                    done = evolved(done, session_path=path, session_error=_lost(handle))
                    await call_hook(
                        "stop", hooks.stop, RunStop(done.stopped_reason, done.usage, done)
                    )
                    await asyncio.sleep(0)  # one that came during the hook, likewise
                return done

            outcome = await (body() if telemetry is None else telemetry.run(body))
        except BaseException as exc:
            reason: ExitReason = (
                "cancelled" if isinstance(exc, asyncio.CancelledError) else "failed"
            )
            usage = runner.ctx.usage if runner is not None else Usage()
            if recorder is not None and runner is not None:
                recorder.finish(reason, usage, exc, runner.ctx.policy_state)
                if exc is not unrecorded:
                    _warn_incomplete(recorder.handle)
            if hooks.stop is not None and not told_stop:
                await call_hook("stop", hooks.stop, RunStop(reason, usage, None, exc))
            raise
        finally:
            self._active.discard(controller)
            unlink()
            if first_use and handle is not None:
                handle.remove_if_empty()  # a run that recorded nothing leaves no file
        session_error = None
        if recorder is not None:
            recorder.finish(outcome.stopped_reason, outcome.usage, policy_state=ctx.policy_state)
            session_error = _warn_incomplete(recorder.handle)
        return evolved(outcome, session_path=path, session_error=session_error)

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


_CHAT_SHAPE = (
    "an async callable (messages, tools, *, temperature=None, max_tokens=None, signal=None, "
    "on_delta=None) -> ChatResult, such as OpenAIChat(model) from agentfsm.adapters.providers"
)


def _check_chat(chat: object) -> None:
    """A ``TypeError`` now, naming what was probably meant, for a ``chat`` that is no chat
    model: otherwise the run fails at its first call, deep inside the runner."""
    if isinstance(chat, str):
        adapter = "AnthropicChat" if chat.startswith("claude") else "OpenAIChat"
        raise TypeError(
            f"Agent takes a chat model, not a model name: did you mean {adapter}({chat!r})? "
            "(agentfsm.adapters.providers: OpenAIChat, AnthropicChat, OpenAIResponses)"
        )
    if isinstance(chat, type):
        name = chat.__name__
        instances_call = any("__call__" in vars(k) for k in chat.__mro__)
        meant = (
            f"async with {name}() as model: Agent(model.chat(), ...)"  # LocalModel
            if callable(getattr(chat, "chat", None)) and not instances_call
            else f"{name}(...)"
        )
        raise TypeError(f"{name} is a class, not a chat model: did you mean {meant}?")
    if not callable(chat):
        if inspect.isawaitable(chat):
            if inspect.iscoroutine(chat):
                chat.close()  # never awaited: no second warning about it
            raise TypeError(
                "Agent got an awaitable as its chat model: pass the chat function itself, "
                "not what calling it returned"
            )
        if callable(getattr(chat, "chat", None)):
            raise TypeError(
                f"{type(chat).__name__} is not a chat model itself: did you mean its .chat()?"
            )
        raise TypeError(f"Agent takes a chat model ({_CHAT_SHAPE}), not {type(chat).__name__}")
    try:
        # as the runner calls it; a decorator's own signature, not the function it wraps
        inspect.signature(chat, follow_wrapped=False).bind(None, None, **_CALL_KEYWORDS)
    except TypeError as error:
        raise TypeError(
            f"the chat model {chat!r} cannot be called as chat(messages, tools, "
            f"temperature=…, max_tokens=…, signal=…, on_delta=…): {error}; a chat model is "
            f"{_CHAT_SHAPE}"
        ) from None
    except ValueError:  # no signature to read (some builtins): the first call tells
        pass


_CALL_KEYWORDS = dict.fromkeys(("temperature", "max_tokens", "signal", "on_delta"))
"""The keywords every chat call of a run passes."""


def _check_tools(tools: object) -> None:
    """A ``TypeError`` now for ``tools`` that are no tool runner."""
    if isinstance(tools, type):
        raise TypeError(
            f"{tools.__name__} is a class, not a tool runner: did you mean {tools.__name__}(...)?"
        )
    runner = callable(getattr(tools, "specs", None)) and callable(getattr(tools, "run", None))
    if tools is None or runner:
        return
    hint = ""
    if isinstance(tools, (list, tuple)) or inspect.isfunction(tools):
        hint = (
            "; did you mean ToolBox([...]) (agentfsm.adapters.tools), which runs functions? "
            "(no tools: None)"
        )
    raise TypeError(
        "Agent's tools must be a tool runner (specs() and async run(call, *, signal=None)), "
        f"not {type(tools).__name__}{hint}"
    )


_HOOK_NAMES = tuple(field.name for field in attrs.fields(Hooks))


def _check_hooks(hooks: object) -> None:
    """A ``TypeError`` now for ``hooks`` that are no :class:`Hooks` (its fields are checked
    by ``Hooks`` itself)."""
    if hooks is None or isinstance(hooks, Hooks):
        return
    listed = f"(hooks: {', '.join(_HOOK_NAMES)})"
    if hooks is Hooks:
        meant = "Hooks(stop=...)"
    elif isinstance(hooks, dict) and hooks and all(k in _HOOK_NAMES for k in hooks):
        meant = "Hooks(" + ", ".join(f"{k}={_callable_name(v)}" for k, v in hooks.items()) + ")"
    elif callable(hooks) and not isinstance(hooks, type):
        meant = f"Hooks(stop={_callable_name(hooks)})"
    else:
        meant = "Hooks(stop=...)"
    raise TypeError(
        f"Agent's hooks must be a Hooks or None, not {_kind(hooks)}: did you mean {meant}? {listed}"
    )


def _check_preamble(preamble: object) -> None:
    """A ``TypeError`` now for a ``preamble`` that is no provider (an object whose
    ``render()`` returns the text)."""
    if preamble is None:
        return
    if isinstance(preamble, type):
        name = preamble.__name__
        call = "WorkspacePreamble(root)" if name == "WorkspacePreamble" else f"{name}(...)"
        raise TypeError(f"Agent: {name} is a class, not a preamble: did you mean {call}?")
    if callable(getattr(preamble, "render", None)):
        return
    hint = ""
    if isinstance(preamble, (str, os.PathLike)):
        hint = (
            f": did you mean WorkspacePreamble({os.fspath(preamble)!r}) (a folder's name, "
            "tree and git HEAD)? For a text of your own, give an object whose render() "
            "returns it"
        )
    raise TypeError(
        "Agent's preamble must be a PreambleProvider (an object with render() returning "
        f"the text, such as WorkspacePreamble(root)) or None, not {type(preamble).__name__}"
        f"{hint}"
    )


def _kind(thing: object) -> str:
    """``thing``'s kind, for a message: ``the class Hooks``, ``a function``, ``dict``."""
    if isinstance(thing, type):
        return f"the class {thing.__name__}"
    if inspect.isfunction(thing) or inspect.ismethod(thing) or inspect.isbuiltin(thing):
        return "a function"
    return type(thing).__name__


def _callable_name(thing: object) -> str:
    """How ``thing`` is named in a hint: its ``__name__`` when it has one, else ``...``."""
    name = getattr(thing, "__name__", None)
    return name if isinstance(name, str) and name.isidentifier() else "..."


def _lost(handle: SessionHandle | None) -> str | None:
    """Why ``handle``'s file is incomplete so far, or ``None``."""
    if handle is None or handle.error is None:
        return None
    return "a record could not be written: " + " ".join(
        str(handle.error.strerror or handle.error).split()
    )


def _warn_incomplete(handle: SessionHandle) -> str | None:
    """Why ``handle``'s file is incomplete (logged once, as a warning), or ``None``."""
    why = _lost(handle)
    if why is None:
        return None
    logger.warning(
        "agentfsm: session %s is incomplete (%s); it holds the run up to there", handle.id, why
    )
    return why


def _pinned(messages: Sequence[Message]) -> int:
    """1 when the conversation opens with the frozen session context (its first message
    after the system prompt): compression keeps it, so every request's prefix stays the
    same bytes and a provider's prompt cache keeps matching."""
    first = next((m for m in messages if not isinstance(m, SystemMessage)), None)
    return 1 if first is not None and is_preamble_message(first) else 0


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
