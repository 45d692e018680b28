"""agentfsm's side of benchmarks/peers.py, in the project's environment: one variant a run.

- ``core_default``: ``run_conversation``;
- ``statemachine_alone``: python-statemachine with nothing else, its ``AsyncEngine``, four
  sends per turn whose async callbacks call the model and the tool;
- ``statemachine_alone_5``: the same with the five sends a tool turn of agentfsm's machine
  (``begin``, ``check``, ``replied``, ``route``, ``tools_done``): what a turn costs on
  python-statemachine's own engine (the tests' oracle), send for send;
- ``plain_loop``: a plain asyncio loop over dicts, the limit any engine is measured against;
- ``agent_coding_session``: ``Agent`` with the coding-agent preset and a session file;
- ``agent_coding_session_memory``: the same with its workspace and session files on a memory
  file system (``/dev/shm``), to show the file system's share.

The agentfsm variants run the tool through a ``ToolBox`` (arguments validated by pydantic,
as the peers' function tools are).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from statemachine import State, StateChart

from agentfsm import (
    Agent,
    AssistantMessage,
    ChatResult,
    LoopOutcome,
    LoopParams,
    Message,
    ToolCall,
    ToolSpec,
    Usage,
    UserMessage,
    run_conversation,
)
from agentfsm.adapters.tools import ToolBox
from agentfsm.engine._policy_check import HOOK_NAMES
from agentfsm.policies import loop_health, presets

if TYPE_CHECKING:  # the type checker sees the folder as a package; the script runs beside it
    from benchmarks.peers._harness import Counter, main, work_folder
else:
    from _harness import Counter, main, work_folder

PROMPT = "You are a benchmark."
HEADROOM = 5
"""Turns the budget allows beyond the N + 1 calls a run makes (``max_turns = N + 5``, as the
Agents SDK workload's): the answer comes before the last allowed turn, as in a run that does
not end on its budget, so the coding preset's wrap-up (its reminder on the last allowed turn,
its note on an answer given there) does not fire."""
DONE = ChatResult(AssistantMessage("done"), Usage(1200, 5), "stop")
TURNS = [0]


async def echo(text: str) -> str:
    """Return the text."""
    return text


async def model(messages: Sequence[Message], tools: Sequence[ToolSpec], **_: Any) -> ChatResult:
    Counter.calls += 1
    if Counter.calls > TURNS[0]:
        return DONE
    call = ToolCall(f"c{Counter.calls}", "echo", {"text": f"m{Counter.calls}"})
    return ChatResult(AssistantMessage("", tool_calls=(call,)), Usage(1200, 30), "tool_calls")


TOOLS = ToolBox([echo])


async def core_default(turns: int) -> int:
    TURNS[0] = turns
    outcome = await run_conversation(
        model,
        TOOLS,
        [UserMessage("go")],
        LoopParams(max_turns=turns + HEADROOM, system_prompt=PROMPT),
    )
    assert outcome.stopped_reason == "final", outcome.stopped_reason
    return Counter.calls


WORKSPACE = work_folder("agentfsm-bench-")
"""The workspace and session folder of the agent variant: it exists before the runs, as a
user's does (each run adds its session file)."""
MEMORY_FOLDER = "/dev/shm"
"""Where ``agent_coding_session_memory`` keeps its workspace and session files: a memory file
system, so that the file system's share of the full product's cost shows by difference."""
AGENTS: dict[tuple[int, str], Agent] = {}
"""One agent per turn count and folder, built once like the peers' agents (each run is its
own)."""


def coding_preset(folder: str) -> list[Any]:
    """The coding-agent preset for a workspace ``folder``, its budgets out of the way."""
    return list(
        presets.coding_agent(workspace=folder, context_budget_tokens=10**9, spend_tokens=10**12)
    )


_HOLLOW: dict[str, Callable[..., Any]] = {
    "check_turn": lambda ctx: None,
    "should_compress": lambda ctx: False,
    "shape_request": lambda ctx, messages: messages,
    "shape_reply": lambda ctx, result: None,
    "on_llm_end": lambda ctx: None,
    "on_tool_result": lambda ctx, outcome: None,
    "on_turn_end": lambda ctx: None,
    "check_final": lambda ctx: None,
    "shape_outcome": lambda ctx, outcome: None,
}
"""What a hollowed policy's hooks become (set on the instance, before an agent binds them)."""


def _hollowed(policy: Any) -> Any:
    for hook in HOOK_NAMES:
        if hook in _HOLLOW and hasattr(policy, hook):
            setattr(policy, hook, _HOLLOW[hook])
    return policy


def product_variant(name: str, folder: str) -> tuple[list[Any], str | None]:
    """The policies and session folder of a variant of the full product, for the part-by-part
    measurements of ``instructions.py`` and ``ablate.py``: ``full``; ``bare`` (neither preset
    nor session), ``no_policies``, ``no_session``; ``without_<policy class>`` (the preset less
    that policy); ``hollow_<policy class>`` (that policy kept, its hooks doing nothing) and
    ``hollow`` (every policy so); ``quiet_loop_health`` (stagnation never warns)."""
    policies = coding_preset(folder)
    names = {type(p).__name__ for p in policies}
    session: str | None = folder
    if name in ("no_policies", "bare"):
        policies = []
    if name in ("no_session", "bare"):
        session = None
    if name == "hollow":
        policies = [_hollowed(p) for p in policies]
    elif name == "quiet_loop_health":
        policies = [
            loop_health(stagnant_turns=10**6) if type(p).__name__ == "loop_health" else p
            for p in policies
        ]
    elif name.startswith(("without_", "hollow_")):
        kind, _, policy = name.partition("_")
        if policy not in names:
            raise SystemExit(f"no policy {policy!r} in the preset: {sorted(names)}")
        if kind == "without":
            policies = [p for p in policies if type(p).__name__ != policy]
        else:
            policies = [_hollowed(p) if type(p).__name__ == policy else p for p in policies]
    elif name not in ("full", "no_policies", "no_session", "bare"):
        raise SystemExit(f"unknown variant {name!r}")
    return policies, session


def workload_agent(turns: int, policies: Sequence[Any], session_dir: str | None) -> Agent:
    """An ``Agent`` on this workload's model and tool, for runs of ``turns`` tool turns."""
    return Agent(
        model,
        TOOLS,
        policies=policies,
        system_prompt=PROMPT,
        session_dir=session_dir,
        max_turns=turns + HEADROOM,
    )


def agent_run(agent: Agent, turns: int) -> Callable[[], Awaitable[LoopOutcome]]:
    """One run of ``agent`` on the workload (for ``instructions.py`` and ``ablate.py``)."""

    async def run() -> LoopOutcome:
        TURNS[0] = turns
        return await agent.run("go")

    return run


def coding_agent(turns: int, folder: str) -> Agent:
    agent = AGENTS.get((turns, folder))
    if agent is None:
        agent = AGENTS[turns, folder] = workload_agent(turns, coding_preset(folder), folder)
    return agent


async def _coding_session(turns: int, folder: str) -> int:
    TURNS[0] = turns
    outcome = await coding_agent(turns, folder).run("go")
    assert outcome.stopped_reason == "final", outcome.stopped_reason
    return Counter.calls


async def agent_coding_session(turns: int) -> int:
    return await _coding_session(turns, WORKSPACE.name)


_IN_MEMORY: list[tempfile.TemporaryDirectory[str]] = []


async def agent_coding_session_memory(turns: int) -> int:
    """The full product with its workspace and session files in memory (``/dev/shm``)."""
    if not _IN_MEMORY:
        _IN_MEMORY.append(tempfile.TemporaryDirectory(prefix="agentfsm-bench-", dir=MEMORY_FOLDER))
    return await _coding_session(turns, _IN_MEMORY[0].name)


# -- python-statemachine alone --------------------------------------------------------------


class DictConversation:
    """The conversation both python-statemachine charts drive: dict messages, the dict model
    and tools of the plain loop."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": PROMPT},
            {"role": "user", "content": "go"},
        ]
        self.reply: dict[str, Any] = {}

    async def call_model(self) -> None:
        self.reply = await dict_model(self.messages)
        self.messages.append(self.reply)

    async def run_tools(self) -> None:
        for call in self.reply["tool_calls"]:
            out = await DICT_TOOLS[call["name"]](**call["arguments"])
            self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": out})


class Loop(StateChart):  # type: ignore[type-arg]
    """Four sends a tool turn: call, replied, tool, tools_done (the last turn: finish)."""

    idle = State(initial=True)
    calling = State()
    routing = State()
    tooling = State()
    done = State(final=True)

    call = idle.to(calling)
    replied = calling.to(routing)
    tool = routing.to(tooling)
    tools_done = tooling.to(idle)
    finish = routing.to(done)

    def __init__(self) -> None:
        self.conversation = DictConversation()
        super().__init__()

    async def on_enter_calling(self) -> None:
        await self.conversation.call_model()

    async def on_enter_tooling(self) -> None:
        await self.conversation.run_tools()


async def statemachine_alone(turns: int) -> int:
    TURNS[0] = turns
    machine = Loop()
    await machine.activate_initial_state()
    while True:
        await machine.send("call")
        await machine.send("replied")
        if not machine.conversation.reply.get("tool_calls"):
            await machine.send("finish")
            break
        await machine.send("tool")
        await machine.send("tools_done")
    assert machine.conversation.reply["content"] == "done"
    return Counter.calls


class FiveSendLoop(StateChart):  # type: ignore[type-arg]
    """The sends of agentfsm's machine a tool turn: begin, check, replied, route, tools_done
    (the last turn: finish)."""

    turn_start = State(initial=True)
    compress_check = State()
    llm_start = State()
    llm_end = State()
    run_tools = State()
    done = State(final=True)

    begin = turn_start.to(compress_check)
    check = compress_check.to(llm_start)
    replied = llm_start.to(llm_end)
    route = llm_end.to(run_tools)
    tools_done = run_tools.to(turn_start)
    finish = llm_end.to(done)

    def __init__(self) -> None:
        self.conversation = DictConversation()
        super().__init__()

    async def on_enter_llm_start(self) -> None:
        await self.conversation.call_model()

    async def on_enter_run_tools(self) -> None:
        await self.conversation.run_tools()


async def statemachine_alone_5(turns: int) -> int:
    TURNS[0] = turns
    machine = FiveSendLoop()
    await machine.activate_initial_state()
    while True:
        await machine.send("begin")
        await machine.send("check")
        await machine.send("replied")
        if not machine.conversation.reply.get("tool_calls"):
            await machine.send("finish")
            break
        await machine.send("route")
        await machine.send("tools_done")
    assert machine.conversation.reply["content"] == "done"
    return Counter.calls


# -- the limit: a plain asyncio loop over dicts ---------------------------------------------


async def dict_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    Counter.calls += 1
    if Counter.calls > TURNS[0]:
        return {"role": "assistant", "content": "done"}
    call = {"id": f"c{Counter.calls}", "name": "echo", "arguments": {"text": f"m{Counter.calls}"}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


DICT_TOOLS: dict[str, Callable[..., Awaitable[str]]] = {"echo": echo}


async def plain_loop(turns: int) -> int:
    TURNS[0] = turns
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": PROMPT},
        {"role": "user", "content": "go"},
    ]
    while True:
        reply = await dict_model(messages)
        messages.append(reply)
        if not reply.get("tool_calls"):
            break
        for call in reply["tool_calls"]:
            out = await DICT_TOOLS[call["name"]](**call["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": out})
    assert messages[-1]["content"] == "done"
    return Counter.calls


VARIANTS: dict[str, Callable[[int], Awaitable[int]]] = {
    "core_default": core_default,
    "statemachine_alone": statemachine_alone,
    "statemachine_alone_5": statemachine_alone_5,
    "plain_loop": plain_loop,
    "agent_coding_session": agent_coding_session,
    "agent_coding_session_memory": agent_coding_session_memory,
}

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("variant", nargs="+", choices=sorted(VARIANTS))
    known, rest = parser.parse_known_args()
    sys.argv = [sys.argv[0], *rest]
    # interleaved in this process: one JSON line with each variant's samples
    main(
        {name: VARIANTS[name] for name in known.variant},
        ("agentfsm", "python-statemachine", "pydantic"),
    )
