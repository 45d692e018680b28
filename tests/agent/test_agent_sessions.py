"""Agent sessions under stress: any text, concurrent runs, cancellation, failed first turns."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentfsm import (
    Agent,
    AssistantMessage,
    Message,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from agentfsm.adapters.sessions import read_session_messages
from agentfsm.agent import is_preamble_message
from agentfsm.engine._cancellation import CANCELLED_BEFORE_TOOL, CANCELLED_DURING_TOOL
from agentfsm.engine._events import ErrorEvent, ToolCallEndEvent
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from ..helpers import Recorder

ODD = "name-\udcff-\ud800 and \u2028 line"
"""Lone surrogates (a non-UTF-8 file name) and a line separator."""


def records(path: str | Path) -> list[dict[str, Any]]:
    lines = Path(path).read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines]


def assert_answered(messages: Sequence[Message]) -> None:
    """Every assistant tool call is answered by the tool messages right after it."""
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            following = []
            for later in messages[index + 1 :]:
                if not isinstance(later, ToolMessage):
                    break
                following.append(later.tool_call_id)
            assert sorted(following) == sorted(c.id for c in message.tool_calls)


async def test_any_text_is_recorded_and_reads_back_the_same(tmp_path: Path) -> None:
    chat = ScriptedChat([tool_reply(("ls", {"path": ODD})), f"found {ODD}"])
    tools = ScriptedTools({"ls": lambda path: f"entries: {path}"})
    engine = Agent(chat, tools, system_prompt=f"system {ODD}", session_dir=tmp_path)
    outcome = await engine.run(f"list {ODD}")
    assert outcome.stopped_reason == "final"
    kinds = [r["kind"] for r in records(outcome.session_path or "")]
    assert kinds.count("message") == len(outcome.messages) == 5
    assert read_session_messages(outcome.session_path or "") == outcome.messages
    resumed = await Agent(ScriptedChat(["again"]), tools, session_dir=tmp_path).run(
        "more", resume="latest"
    )
    assert resumed.messages[:5] == outcome.messages


async def test_concurrent_runs_on_one_engine_keep_their_own_session_files(
    tmp_path: Path,
) -> None:
    def script(messages: Sequence[Message]) -> AssistantMessage | str:
        prompt = next(m.content for m in messages if isinstance(m, UserMessage))
        if isinstance(messages[-1], ToolMessage):
            return f"answer to {prompt}"
        return tool_reply(("work", {"job": prompt}))

    async def work(job: str) -> str:
        await asyncio.sleep(0.02 if job == "A" else 0.01)
        return f"done {job}"

    engine = Agent(ScriptedChat(script), ScriptedTools({"work": work}), session_dir=tmp_path)
    everything = Recorder(engine.events)
    a, b = await asyncio.gather(engine.run("A"), engine.run("B"))
    assert a.session_path != b.session_path
    for outcome, job in ((a, "A"), (b, "B")):
        assert outcome.final == AssistantMessage(f"answer to {job}")
        assert read_session_messages(outcome.session_path or "") == outcome.messages
        texts = json.dumps(records(outcome.session_path or ""))
        other = "B" if job == "A" else "A"
        assert f"done {other}" not in texts
        assert f"answer to {other}" not in texts
    # engine.events still sees both runs.
    assert everything.types.count("final") == 2


def _slow_tools(started: asyncio.Event) -> ScriptedTools:
    async def slow() -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    return ScriptedTools({"slow": slow, "after": lambda: "x"})


async def test_outside_cancellation_during_a_tool_closes_the_run(tmp_path: Path) -> None:
    started = asyncio.Event()
    chat = ScriptedChat([tool_reply(("slow", {}), ("after", {})), "unreachable"])
    engine = Agent(chat, _slow_tools(started), session_dir=tmp_path)
    recorder = Recorder(engine.events)
    task = asyncio.create_task(engine.run("go"))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert recorder.types[-4:] == ["tool_call_start", "tool_call_end", "tool_call_end", "error"]
    ends = recorder.of(ToolCallEndEvent)
    assert [(e.call.name, e.cancelled, e.result.error) for e in ends] == [
        ("slow", True, CANCELLED_DURING_TOOL),
        ("after", True, CANCELLED_BEFORE_TOOL),
    ]
    assert isinstance(recorder.of(ErrorEvent)[0].error, asyncio.CancelledError)
    path = next(tmp_path.glob("*.jsonl"))
    metas = [r["meta"] for r in records(path) if r["kind"] == "meta"]
    assert metas[-1]["event"] == "run_end"
    assert metas[-1]["stopped_reason"] == "cancelled"
    messages = read_session_messages(path)
    assert_answered(messages)
    assert [json.loads(m.content)["error"] for m in messages if isinstance(m, ToolMessage)] == [
        CANCELLED_DURING_TOOL,
        CANCELLED_BEFORE_TOOL,
    ]
    # Resume sends a valid history.
    chat2 = ScriptedChat(["resumed"])
    await Agent(chat2, _slow_tools(asyncio.Event()), session_dir=tmp_path).run(
        "go on", resume=path.stem
    )
    assert_answered(chat2.requests[0].messages)


async def test_outside_cancellation_during_the_chat_call_emits_error(tmp_path: Path) -> None:
    called = asyncio.Event()

    async def script(messages: Sequence[Message]) -> str:
        called.set()
        await asyncio.sleep(30)
        return "late"

    engine = Agent(ScriptedChat(script), session_dir=tmp_path)
    recorder = Recorder(engine.events)
    task = asyncio.create_task(engine.run("go"))
    await asyncio.wait_for(called.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert recorder.types == ["turn_start", "llm_start", "error"]


async def test_a_tool_raising_cancelled_error_is_a_failed_call() -> None:
    async def rogue() -> str:
        raise asyncio.CancelledError

    for specs in (None, [ToolSpec("rogue", "r", concurrency_safe=True)]):
        engine = Agent(
            ScriptedChat([tool_reply(("rogue", {}), ("rogue", {})), "carried on"]),
            ScriptedTools({"rogue": rogue}, specs=specs),
        )
        outcome = await engine.run("go")
        assert outcome.stopped_reason == "final"
        results = [m for m in outcome.messages if isinstance(m, ToolMessage)]
        assert [m.is_error for m in results] == [True, True]
        assert "CancelledError" in results[0].content


async def test_a_batch_cancelled_before_its_tools_start_leaves_no_coroutine_unawaited() -> None:
    ran: list[str] = []

    async def safe(n: int) -> str:
        ran.append(str(n))
        return "ok"

    spec = ToolSpec("safe", "s", concurrency_safe=True)
    engine = Agent(
        ScriptedChat([tool_reply(("safe", {"n": 1}), ("safe", {"n": 2})), "done"]),
        ScriptedTools({"safe": safe}, specs=[spec]),
    )
    recorder = Recorder(engine.events)
    task = asyncio.create_task(engine.run("go"))
    engine.events.on("tool_call_start", lambda event: task.cancel())
    with pytest.raises(asyncio.CancelledError):
        await task
    gc.collect()  # a never-awaited coroutine would warn here (warnings are errors)
    assert ran == []
    ends = recorder.of(ToolCallEndEvent)
    assert [(e.cancelled, e.result.error) for e in ends] == [(True, CANCELLED_DURING_TOOL)] * 2
    assert recorder.types[-1] == "error"


class FixedContext:
    def render(self) -> str:
        return "project: demo"


async def test_resume_after_a_failed_first_turn_keeps_the_session_context(
    tmp_path: Path,
) -> None:
    failing = Agent(
        ScriptedChat([RuntimeError("provider down")]),
        system_prompt="sys",
        session_dir=tmp_path,
        preamble=FixedContext(),
    )
    with pytest.raises(RuntimeError, match="provider down"):
        await failing.run("first")
    assert any(is_preamble_message(m) for m in failing.load_session("latest"))
    chat = ScriptedChat(["hello"])
    engine = Agent(chat, system_prompt="sys", session_dir=tmp_path, preamble=FixedContext())
    outcome = await engine.run("second", resume="latest")
    sent = chat.requests[0].messages
    assert [m.role for m in sent] == ["system", "user", "user"]
    assert is_preamble_message(sent[1])
    assert sent[2].content == "second"
    assert sum(is_preamble_message(m) for m in outcome.messages) == 1
    # The same holds when a failed run's handle is used again.
    failing.chat = ScriptedChat([RuntimeError("down again"), "ok"])
    handle = failing.new_session()
    with pytest.raises(RuntimeError, match="down again"):
        await failing.run("x", session=handle)
    again = await failing.run("y", session=handle)
    assert [m.role for m in again.messages] == ["system", "user", "user", "assistant"]
    assert is_preamble_message(again.messages[1])
