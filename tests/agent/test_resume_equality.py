"""What a provider receives after a resume equals what the live run would send.

Each scenario runs an agent with a session, then continues it two ways with the same
prompt: in the same process on the same session handle (what the live run holds), and in a
fresh agent resuming the session file (what ``agentfsm run --resume`` does). The requests
the provider receives must be equal, message for message, and keep the role alternation
chat templates require (no two assistant or two user messages in a row).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest

from agentfsm import (
    Agent,
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agentfsm.adapters.sessions import SessionHandle
from agentfsm.agent import is_preamble_message
from agentfsm.engine._compression import COMPRESSION_SYSTEM_PROMPT
from agentfsm.engine._reminders import RETRY_TURN
from agentfsm.policies import prune_tool_results, require, text_matches, wrap_up
from agentfsm.testing import ChatRequest, ScriptedChat, ScriptedTools, ScriptItem, tool_reply

Build = Callable[[ScriptedChat], Agent]
First = Callable[[Agent, SessionHandle], Awaitable[None]]


def assert_alternates(messages: Sequence[Message]) -> None:
    roles = [m.role for m in messages if m.role != "system"]
    for before, after in itertools.pairwise(roles):
        assert not (before == after == "assistant"), roles
        assert not (before == after == "user"), roles


async def plain_first(agent: Agent, handle: SessionHandle) -> None:
    await agent.run("task", session=handle)


def answering(
    then: Callable[[ChatRequest], ScriptItem], summary: str = "summary of the early turns"
) -> Callable[[ChatRequest], ScriptItem]:
    """A model that summarizes when asked to, and answers with ``then`` otherwise."""

    def reply(request: ChatRequest) -> ScriptItem:
        if request.messages[0].content == COMPRESSION_SYSTEM_PROMPT:
            return summary
        return then(request)

    return reply


async def both_ways(
    build: Build, first_chat: ScriptedChat, first: First = plain_first
) -> tuple[ChatRequest, ChatRequest]:
    agent = build(first_chat)
    handle = agent.new_session()
    await first(agent, handle)
    # Resume first: the live continuation then appends to the same file.
    # A model never summarizes twice alike: a resume that compressed again would differ.
    resumed_chat = ScriptedChat(answering(lambda request: "next answer", "another summary"))
    await build(resumed_chat).run("next", resume=handle.id)
    live_chat = ScriptedChat(answering(lambda request: "next answer"))
    agent.chat = live_chat
    await agent.run("next", session=handle)
    live = [r for r in live_chat.requests if r.messages[0].content != COMPRESSION_SYSTEM_PROMPT]
    resumed = [
        r for r in resumed_chat.requests if r.messages[0].content != COMPRESSION_SYSTEM_PROMPT
    ]
    assert live
    assert resumed
    return live[0], resumed[0]


def reader() -> ScriptedTools:
    return ScriptedTools({"read": lambda path: f"contents of {path}\n" * 50})


async def test_after_a_refused_final_answer(tmp_path: Path) -> None:
    def build(chat: ScriptedChat) -> Agent:
        gate = require(text_matches("DONE"), reminder="Say DONE.")
        return Agent(chat, reader(), policies=[gate], session_dir=tmp_path)

    first_chat = ScriptedChat(["no marker", "now DONE"])
    live, resumed = await both_ways(build, first_chat)
    # The first run's retry carried the reminder once ...
    assert (
        "<system-reminder>\nSay DONE.\n</system-reminder>"
        in first_chat.requests[1].messages[-1].content
    )
    # ... and the next run, live or resumed, sends the neutral turn without it.
    assert live.messages == resumed.messages
    assert_alternates(live.messages)
    contents = [m.content for m in live.messages]
    refused = contents.index("no marker")  # the refused answer stays, then the neutral turn
    assert live.messages[refused + 1] == UserMessage(RETRY_TURN)
    assert contents[refused + 2] == "now DONE"
    assert not any("Say DONE." in m.content for m in live.messages)


async def test_after_a_refused_answer_and_an_interrupt(tmp_path: Path) -> None:
    """The run stops after a refusal, before the next answer: the session ends with the
    neutral turn, which a continuation drops (like any trailing user message) both ways."""
    asked_again = asyncio.Event()

    async def hang() -> ScriptItem:
        asked_again.set()
        await asyncio.sleep(30)
        return "never"

    def model(request: ChatRequest) -> ScriptItem | Awaitable[ScriptItem]:
        return "no marker" if len(request.messages) < 3 else hang()

    def build(chat: ScriptedChat) -> Agent:
        gate = require(text_matches("DONE"), reminder="Say DONE.")
        return Agent(chat, reader(), policies=[gate], session_dir=tmp_path)

    async def interrupted(agent: Agent, handle: SessionHandle) -> None:
        task = asyncio.ensure_future(agent.run("task", session=handle))
        await asyncio.wait_for(asked_again.wait(), 5)
        agent.interrupt()
        outcome = await task
        assert outcome.stopped_reason == "aborted"
        assert [m.content for m in outcome.messages][-2:] == ["no marker", RETRY_TURN]

    live, resumed = await both_ways(build, ScriptedChat(model), interrupted)
    assert live.messages == resumed.messages
    assert_alternates(live.messages)
    assert [m.content for m in live.messages][-2:] == ["no marker", "next"]
    assert not any("Say DONE." in m.content for m in live.messages)


async def test_after_a_compression(tmp_path: Path) -> None:
    def work(request: ChatRequest) -> ScriptItem:
        calls = sum(isinstance(m, AssistantMessage) for m in request.messages)
        return tool_reply(("read", {"path": f"f{calls}"})) if calls < 14 else "done"

    def build(chat: ScriptedChat) -> Agent:
        return Agent(chat, reader(), session_dir=tmp_path, context_budget_tokens=2_000)

    live, resumed = await both_ways(build, ScriptedChat(answering(work)))
    assert any("summary of the early turns" in m.content for m in live.messages)
    assert live.messages == resumed.messages
    assert_alternates(live.messages)


async def test_after_pruned_results(tmp_path: Path) -> None:
    earlier: list[Message] = [UserMessage("look around")]
    for i in range(4):
        call = ToolCall(f"old{i}", "read", {"path": f"old{i}"})
        earlier += [
            AssistantMessage("", tool_calls=(call,)),
            ToolMessage(call.id, f"old contents {i}\n" * 200),
        ]
    earlier.append(AssistantMessage("looked"))

    def build(chat: ScriptedChat) -> Agent:
        return Agent(chat, reader(), policies=[prune_tool_results(3_000)], session_dir=tmp_path)

    async def first(agent: Agent, handle: SessionHandle) -> None:
        await agent.run("task", session=handle, history=earlier)

    live, resumed = await both_ways(build, ScriptedChat(["done"]), first)
    pruned = [m for m in live.messages if "[tool result pruned" in m.content]
    assert pruned
    assert live.messages == resumed.messages
    assert_alternates(live.messages)


async def test_after_an_interrupt(tmp_path: Path) -> None:
    started = asyncio.Event()

    async def slow(path: str) -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    def build(chat: ScriptedChat) -> Agent:
        return Agent(chat, ScriptedTools({"read": slow}), session_dir=tmp_path)

    async def interrupted(agent: Agent, handle: SessionHandle) -> None:
        task = asyncio.ensure_future(agent.run("task", session=handle))
        await started.wait()
        agent.interrupt()
        outcome = await task
        assert outcome.stopped_reason == "aborted"

    calls = ScriptedChat([tool_reply(("read", {"path": "a"}), ("read", {"path": "b"}))])
    live, resumed = await both_ways(build, calls, interrupted)
    assert live.messages == resumed.messages
    assert_alternates(live.messages)
    assert [m.role for m in live.messages[-4:]] == ["assistant", "tool", "tool", "user"]


@pytest.mark.parametrize("turns", [1, 2])
async def test_reminders_never_stack_two_user_messages(turns: int) -> None:
    chat = ScriptedChat([tool_reply(("read", {"path": "a"}))] * (turns - 1) + ["done"])
    agent = Agent(chat, reader(), policies=[wrap_up()], max_turns=turns)
    await agent.run("task")
    last = chat.requests[-1].messages
    assert_alternates(last)
    assert "last turn" in last[-1].content


class FrozenContext:
    def render(self) -> str:
        return "project: demo\nfiles: a.py b.py"


async def test_the_session_context_survives_a_compression(tmp_path: Path) -> None:
    """Every request of the session, after compressions, live and resumed, opens with the
    same session-context message, byte for byte; the summarizer is not sent it."""

    def work(request: ChatRequest) -> ScriptItem:
        calls = sum(isinstance(m, AssistantMessage) for m in request.messages)
        return tool_reply(("read", {"path": f"f{calls}"})) if calls < 14 else "done"

    def build(chat: ScriptedChat) -> Agent:
        return Agent(
            chat,
            reader(),
            system_prompt="sys",
            session_dir=tmp_path,
            context_budget_tokens=2_000,
            preamble=FrozenContext(),
        )

    first_chat = ScriptedChat(answering(work))
    live, resumed = await both_ways(build, first_chat)
    summaries = [
        r for r in first_chat.requests if r.messages[0].content == COMPRESSION_SYSTEM_PROMPT
    ]
    turns = [r for r in first_chat.requests if r.messages[0].content != COMPRESSION_SYSTEM_PROMPT]
    assert summaries  # it compressed
    preamble = turns[0].messages[1]
    assert is_preamble_message(preamble)
    for request in [*turns, live, resumed]:
        assert request.messages[0] == SystemMessage("sys")
        assert request.messages[1] == preamble  # the same prefix, every time
        assert sum(is_preamble_message(m) for m in request.messages) == 1
    assert any("summary of the early turns" in m.content for m in live.messages)
    assert live.messages[2].content.startswith("[context summary")  # right after it
    for request in summaries:  # what the summarizer reads leaves it out
        assert "<session-context>" not in request.messages[1].content
    assert live.messages == resumed.messages
    assert_alternates(live.messages[2:])  # the context, then the summary: two user messages


async def test_the_core_loop_summarizes_all_but_the_system_prompt(tmp_path: Path) -> None:
    """``run_conversation`` keeps the seed's shape: ``[*system, summary, *recent]``."""
    from agentfsm import LoopParams, run_conversation

    def work(request: ChatRequest) -> ScriptItem:
        calls = sum(isinstance(m, AssistantMessage) for m in request.messages)
        return tool_reply(("read", {"path": f"f{calls}"})) if calls < 14 else "done"

    chat = ScriptedChat(answering(work))
    opening = [UserMessage("<session-context>\nx\n</session-context>"), UserMessage("task")]
    params = LoopParams(max_turns=30, system_prompt="sys", context_budget_tokens=2_000)
    outcome = await run_conversation(chat, reader(), opening, params)
    assert outcome.messages[0] == SystemMessage("sys")
    assert outcome.messages[1].content.startswith("[context summary")
    assert not any(is_preamble_message(m) for m in outcome.messages)
