"""Runs one fuzzed :class:`~tests.fuzz.strategies.Scenario` and observes everything the
invariants need: events, every request the model received, the outcome or the exception,
the usage of every reply, the caller's lists, the session file and a resumed request."""

from __future__ import annotations

import asyncio
import copy
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from attrs import define, field

from agentfsm import (
    AbortController,
    Agent,
    AgentEmitter,
    AgentEvent,
    AssistantMessage,
    ChatResult,
    LoopOutcome,
    LoopParams,
    Message,
    SystemMessage,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
    UserMessage,
    run_conversation,
    seed_system_prompt,
)
from agentfsm.adapters.providers import ProviderError
from agentfsm.adapters.sessions import read_session_messages
from agentfsm.adapters.sessions._lines import iter_session_records
from agentfsm.adapters.tools import FunctionTool, ToolBox, tool
from agentfsm.engine._compression import COMPRESSION_SYSTEM_PROMPT
from agentfsm.engine._policy import Policy
from agentfsm.engine._protocols import SupportsAbort
from agentfsm.policies import presets
from agentfsm.sandbox._process import Unsandboxed
from agentfsm.testing import ScriptedChat, ScriptedTools

from ..oracle import Oracle, held_to_the_oracle
from .strategies import Reply, Scenario

__all__ = ["HANG_GUARD", "Observation", "observe"]

HANG_GUARD = 30.0
"""Seconds a run may take before it counts as hung."""


@define
class Observation:
    """What one run did."""

    scenario: Scenario
    seed: list[Message] = field(factory=list)
    events: list[AgentEvent] = field(factory=list)
    requests: list[tuple[Message, ...]] = field(factory=list)
    summarizer_requests: list[tuple[Message, ...]] = field(factory=list)
    main_calls: int = 0
    returned_usage: Usage = field(factory=Usage)
    last_usage: Usage = field(factory=Usage)
    """Of the last reply: an outside cancel may land while it is handed over."""
    outcome: LoopOutcome | None = None
    error: BaseException | None = None
    hung: bool = False
    fired: str | None = None
    caller: list[tuple[str, Any, Any]] = field(factory=list)
    stray_warnings: list[str] = field(factory=list)
    session_path: Path | None = None
    session_messages: list[Message] | None = None
    session_error: BaseException | None = None
    session_run_end_usage: Any = None
    resume_requests: list[tuple[Message, ...]] = field(factory=list)
    resume_error: BaseException | None = None
    oracle: Oracle = field(factory=Oracle)
    """What the run (and its resume) compared with python-statemachine's engine."""


def _clip(value: Any, low: float, high: float, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return float(min(max(value, low), high))


def _echo(text: str = "", times: int = 1) -> str:
    return str(text) * int(_clip(times, 0, 3000, 1))


async def _nap(seconds: float = 0.0, text: str = "") -> str:
    await asyncio.sleep(_clip(seconds, 0, 0.01, 0))
    return f"slept {text}"


async def _look(text: str = "") -> str:
    await asyncio.sleep(0.001)
    return f"looked at {text}"


def _boom(text: str = "") -> str:
    raise RuntimeError(f"boom {text}")


def _fail(text: str = "") -> ToolResult:
    return ToolResult(False, f"partial {text}", f"failed {text}")


def _write(path: str = "", text: str = "") -> ToolResult:
    return ToolResult(True, f"wrote {path}", metadata={"path": str(path)})


def _block(text: str = "") -> str:
    time.sleep(0.002)
    return f"blocked {text}"


async def _self_cancel(text: str = "") -> str:
    await asyncio.sleep(0)
    raise asyncio.CancelledError(f"tool cancelled itself {text}")


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "echo": _echo,
    "nap": _nap,
    "look": _look,
    "boom": _boom,
    "fail": _fail,
    "write": _write,
    "block": _block,
    "self_cancel": _self_cancel,
}
_SAFE = frozenset({"look", "nap"})
_DESTRUCTIVE = frozenset({"write"})
_SPECS = tuple(
    ToolSpec(
        name, f"The {name} tool.", concurrency_safe=name in _SAFE, destructive=name in _DESTRUCTIVE
    )
    for name in _FUNCTIONS
)
_FUNCTION_TOOLS: list[FunctionTool] = [
    tool(name=name, concurrency_safe=name in _SAFE, destructive=name in _DESTRUCTIVE)(fn)
    for name, fn in _FUNCTIONS.items()
]


def _tools(scenario: Scenario) -> ScriptedTools | ToolBox:
    if scenario.toolbox:
        return ToolBox(_FUNCTION_TOOLS, max_output_chars=2000)
    return ScriptedTools(_FUNCTIONS, specs=_SPECS)


class FuzzChat:
    """The fuzzed model: a :class:`ScriptedChat` whose function answers from the scenario
    (and answers the summarizer's calls with the scenario's summary). It keeps the signal of
    the current call so slow replies end like a real adapter's when it fires."""

    def __init__(self, obs: Observation) -> None:
        self.obs = obs
        self.replies = list(obs.scenario.replies)
        self.signal: SupportsAbort | None = None
        self.scripted = ScriptedChat(self._answer)
        self._ids = 0

    async def __call__(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        signal: SupportsAbort | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.signal = signal
        return await self.scripted(messages, tools, signal=signal, **kwargs)

    def _returned(self, result: ChatResult) -> ChatResult:
        self.obs.last_usage = result.usage or Usage()
        if result.usage is not None:
            self.obs.returned_usage += result.usage
        return result

    async def _sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        signal = self.signal
        wait = getattr(signal, "wait", None)
        if signal is None or not callable(wait):
            await asyncio.sleep(seconds)
            return
        waiter = asyncio.ensure_future(wait())
        try:
            await asyncio.wait((waiter,), timeout=seconds)
        finally:
            waiter.cancel()
        if signal.aborted:
            raise ProviderError("aborted", "the request was aborted")

    async def _answer(self, messages: Sequence[Message]) -> ChatResult:
        scenario = self.obs.scenario
        if (
            messages
            and isinstance(messages[0], SystemMessage)
            and messages[0].content == COMPRESSION_SYSTEM_PROMPT
        ):
            self.obs.summarizer_requests.append(tuple(messages))
            if scenario.summary_fails:
                raise ProviderError("server", "summarizer unavailable")
            summary = AssistantMessage(scenario.summary)
            return self._returned(ChatResult(summary, Usage(7, 3), "stop"))
        self.obs.requests.append(tuple(messages))
        self.obs.main_calls += 1
        reply = self.replies.pop(0) if self.replies else Reply("text", "done")
        await self._sleep(reply.delay)
        if reply.kind == "error":
            raise ProviderError(reply.error_kind, f"fuzzed {reply.error_kind}: {reply.text}")  # type: ignore[arg-type]
        calls: list[ToolCall] = []
        for plan in reply.calls:
            self._ids += 1
            raw = plan.raw_arguments
            arguments = {} if raw is not None else dict(plan.arguments)
            calls.append(ToolCall(f"call_{self._ids}{plan.id_suffix}", plan.name, arguments, raw))
        message = AssistantMessage(reply.text, tuple(calls), reply.reasoning)
        reason = "tool_calls" if calls else "stop"
        return self._returned(ChatResult(message, reply.usage, reason, "fuzz"))


def _policies(scenario: Scenario, workspace: Path) -> list[Policy]:
    if not scenario.preset:
        return []
    return presets.coding_agent(
        workspace=workspace,
        context_budget_tokens=scenario.context_budget,
        spend_tokens=scenario.spend_tokens,
        tool_result_budget_chars=scenario.prune_chars,
        review=False,
        sandbox=Unsandboxed(),
    )


def _snapshot(obs: Observation, label: str, value: Any) -> Callable[[], None]:
    before = copy.deepcopy(value)

    def check() -> None:
        obs.caller.append((label, before, value))

    return check


async def _guarded(
    obs: Observation, start: Callable[[], Awaitable[LoopOutcome]], fire: Callable[[], None]
) -> None:
    scenario = obs.scenario
    loop = asyncio.get_running_loop()
    disturbance = scenario.disturbance
    task = asyncio.ensure_future(start())
    handle = None
    if disturbance.kind != "none":
        if disturbance.after is not None:
            handle = loop.call_later(disturbance.after, fire)
        elif disturbance.at_event == 0 and disturbance.kind != "interrupt":
            fire()
    try:
        done, _ = await asyncio.wait((task,), timeout=HANG_GUARD)
    finally:
        if handle is not None:
            handle.cancel()
    if not done:
        obs.hung = True
        task.cancel()
        await asyncio.wait((task,), timeout=5)
        return
    if task.cancelled():
        obs.error = asyncio.CancelledError()
    elif task.exception() is not None:
        obs.error = task.exception()
    else:
        obs.outcome = task.result()


def _on_events(
    obs: Observation, emitter: AgentEmitter, fire: Callable[[], None]
) -> Callable[[], None]:
    disturbance = obs.scenario.disturbance
    at = disturbance.at_event
    if disturbance.kind == "interrupt" and at == 0:
        at = 1

    def record(event: AgentEvent) -> None:
        obs.events.append(event)
        if disturbance.kind != "none" and disturbance.after is None and len(obs.events) == at:
            if disturbance.deferred:
                asyncio.get_running_loop().call_soon(fire)
            else:
                fire()

    return emitter.on("*", record)


async def _run_loop(obs: Observation) -> None:
    scenario = obs.scenario
    chat = FuzzChat(obs)
    controller = AbortController()
    messages = [*scenario.history, UserMessage(scenario.prompt)]
    obs.seed = seed_system_prompt(messages, scenario.system_prompt)
    check_caller = _snapshot(obs, "messages", messages)
    params = LoopParams(
        scenario.max_turns,
        system_prompt=scenario.system_prompt,
        context_budget_tokens=scenario.context_budget,
        signal=controller.signal,
    )
    emitter = AgentEmitter()
    task: list[asyncio.Future[Any]] = []

    def fire() -> None:
        obs.fired = obs.fired or scenario.disturbance.kind
        if scenario.disturbance.kind == "abort":
            controller.abort("fuzz")
        elif task:
            task[0].cancel()

    _on_events(obs, emitter, fire)

    async def start() -> LoopOutcome:
        task.append(asyncio.current_task())  # type: ignore[arg-type]
        return await run_conversation(chat, _tools(scenario), messages, params, emitter=emitter)

    if scenario.disturbance.kind == "cancel" and scenario.disturbance.at_event == 0:
        obs.fired = "cancel"
        obs.error = asyncio.CancelledError()
        check_caller()
        return
    await _guarded(obs, start, fire)
    check_caller()


def _engine(scenario: Scenario, chat: Any, root: Path) -> Agent:
    return Agent(
        chat,
        _tools(scenario),
        policies=_policies(scenario, root / "workspace"),
        system_prompt=scenario.system_prompt,
        session_dir=root / "sessions" if scenario.sessions else None,
        max_turns=scenario.max_turns,
        context_budget_tokens=scenario.context_budget,
        sandbox=Unsandboxed() if scenario.preset else None,
    )


async def _run_engine(obs: Observation, root: Path) -> None:
    scenario = obs.scenario
    (root / "workspace").mkdir()
    chat = FuzzChat(obs)
    engine = _engine(scenario, chat, root)
    controller = AbortController()
    history = list(scenario.history)
    new_input: list[Message] = [UserMessage(scenario.prompt)]
    prompt: str | list[Message] = new_input if scenario.prompt_as_messages else scenario.prompt
    obs.seed = seed_system_prompt([*history, *new_input], scenario.system_prompt)
    checks = [_snapshot(obs, "history", history), _snapshot(obs, "prompt", prompt)]
    task: list[asyncio.Future[Any]] = []

    def fire() -> None:
        obs.fired = obs.fired or scenario.disturbance.kind
        kind = scenario.disturbance.kind
        if kind == "abort":
            controller.abort("fuzz")
        elif kind == "interrupt":
            engine.interrupt("fuzz")
        elif task:
            task[0].cancel()

    _on_events(obs, engine.events, fire)

    async def start() -> LoopOutcome:
        task.append(asyncio.current_task())  # type: ignore[arg-type]
        return await engine.run(prompt, history=history, signal=controller.signal)

    if scenario.disturbance.kind == "cancel" and scenario.disturbance.at_event == 0:
        obs.fired = "cancel"
        obs.error = asyncio.CancelledError()
    else:
        await _guarded(obs, start, fire)
    for check in checks:
        check()
    if scenario.sessions and not obs.hung:
        await _read_session(obs, root)


async def _read_session(obs: Observation, root: Path) -> None:
    files = sorted((root / "sessions").glob("*.jsonl"))
    if not files:
        return
    path = files[0]
    obs.session_path = path
    try:
        obs.session_messages = read_session_messages(path)
        for record in iter_session_records(path):
            meta = record.get("meta") if isinstance(record, dict) else None
            if isinstance(meta, dict) and meta.get("event") == "run_end":
                obs.session_run_end_usage = meta.get("usage")
    except Exception as exc:
        obs.session_error = exc
        return
    resumed = ScriptedChat(lambda messages: "resumed")
    engine = _engine(obs.scenario, resumed, root)
    try:
        await asyncio.wait_for(engine.run(obs.scenario.resume_prompt, resume=path.stem), HANG_GUARD)
    except Exception as exc:
        obs.resume_error = exc
    obs.resume_requests = [request.messages for request in resumed.requests]


def observe(scenario: Scenario) -> Observation:
    """Run ``scenario`` on a fresh event loop, each event held to python-statemachine's engine;
    never raises for what the run did."""
    obs = Observation(scenario)
    with (
        tempfile.TemporaryDirectory(prefix="agentfsm-fuzz-") as tmp,
        warnings.catch_warnings(record=True) as caught,
        held_to_the_oracle() as obs.oracle,
    ):
        warnings.simplefilter("always")
        if scenario.driver == "loop":
            asyncio.run(_run_loop(obs))
        else:
            asyncio.run(_run_engine(obs, Path(tmp)))
    obs.stray_warnings = [f"{w.category.__name__}: {w.message}" for w in caught]
    return obs
