"""Agent: hooks, usage accounting, streaming, frozen context, interrupt, sync use."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from agentfsm import (
    AbortController,
    Agent,
    AssistantMessage,
    ChatResult,
    Hooks,
    Message,
    Retry,
    RunContext,
    Stop,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    Usage,
    UserMessage,
    WorkspacePreamble,
)
from agentfsm.adapters.sessions import read_session_messages
from agentfsm.agent import PromptSubmit, RunStop, SessionStart, is_preamble_message
from agentfsm.engine._compression import COMPRESSION_SYSTEM_PROMPT
from agentfsm.engine._events import TextDeltaEvent, ToolCallEndEvent
from agentfsm.engine._policy import Policy
from agentfsm.engine._protocols import ChatDelta, DeltaHandler
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from ..helpers import Recorder


class HookLog:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.stops: list[RunStop] = []

    def hooks(self, *, rewrite: str | None = None) -> Hooks:
        def session_start(info: SessionStart) -> None:
            self.calls.append("session_start")

        async def user_prompt_submit(info: PromptSubmit) -> str | None:
            self.calls.append(f"user_prompt_submit:{info.system}:{info.prompt}")
            return rewrite

        def stop(info: RunStop) -> None:
            self.calls.append(f"stop:{info.stopped_reason}")
            self.stops.append(info)

        return Hooks(session_start=session_start, user_prompt_submit=user_prompt_submit, stop=stop)


async def test_hook_order_and_once_per_session(tmp_path: Path) -> None:
    log = HookLog()
    chat = ScriptedChat(["one", "two", "three"])
    engine = Agent(chat, system_prompt="sys", session_dir=tmp_path, hooks=log.hooks(rewrite="SYS"))
    handle = engine.new_session()
    await engine.run("a", session=handle)
    await engine.run("b", session=handle)
    await engine.run("c")  # a new session of its own
    assert log.calls == [
        "session_start",
        "user_prompt_submit:sys:a",
        "stop:final",
        "user_prompt_submit:sys:b",
        "stop:final",
        "session_start",
        "user_prompt_submit:sys:c",
        "stop:final",
    ]
    # The rewritten system text is what the model saw.
    assert chat.requests[0].messages[0].content == "SYS"
    # The second run on the handle continued the conversation.
    assert [m.content for m in chat.requests[1].messages] == ["SYS", "a", "one", "b"]


class StopNow:
    name = "stop_now"

    def check_turn(self, ctx: RunContext) -> Stop | None:
        return Stop("enough")


class Boom(Exception):
    pass


@pytest.mark.parametrize(
    ("script", "policies", "signal_aborted", "expected"),
    [
        (["done"], [], False, "final"),
        ([tool_reply(("t", {}))], [], False, "budget"),
        (["never"], [], True, "aborted"),
        (["never"], [StopNow()], False, "policy"),
        ([Boom("provider down")], [], False, "failed"),
    ],
)
async def test_stop_hook_runs_on_every_exit_path(
    tmp_path: Path, script: list[Any], policies: list[Policy], signal_aborted: bool, expected: str
) -> None:
    log = HookLog()
    engine = Agent(
        ScriptedChat(script),
        ScriptedTools({"t": lambda: "x"}),
        policies=policies,
        session_dir=tmp_path,
        hooks=log.hooks(),
        max_turns=1,
    )
    controller = AbortController()
    if signal_aborted:
        controller.abort()
    if expected == "failed":
        with pytest.raises(Boom):
            await engine.run("go", signal=controller.signal)
    else:
        outcome = await engine.run("go", signal=controller.signal)
        assert outcome.stopped_reason == expected
    assert log.calls[-1] == f"stop:{expected}"
    (stop,) = log.stops
    assert (stop.error is not None) == (expected == "failed")
    (session,) = tmp_path.glob("*.jsonl")
    last = json.loads(session.read_text("utf-8").splitlines()[-1])
    assert last["meta"]["event"] == "run_end"
    assert last["meta"]["stopped_reason"] == expected


async def test_hook_errors_are_logged_never_fatal(caplog: pytest.LogCaptureFixture) -> None:
    def broken(info: object) -> None:
        raise RuntimeError("hook bug")

    engine = Agent(
        ScriptedChat(["ok"]),
        hooks=Hooks(session_start=broken, user_prompt_submit=broken, stop=broken),
    )
    with caplog.at_level(logging.WARNING, logger="agentfsm"):
        outcome = await engine.run("hi")
    assert outcome.stopped_reason == "final"
    warned = [
        r.getMessage().split()[1] for r in caplog.records if "raised; ignored" in r.getMessage()
    ]
    assert warned == ["session_start", "user_prompt_submit", "stop"]


async def test_usage_totals_with_cache_and_reasoning(tmp_path: Path) -> None:
    calls = [
        Usage(1000, 200, cache_read_tokens=600, cache_write_tokens=300, reasoning_tokens=150),
        Usage(1500, 50, cache_read_tokens=1200, reasoning_tokens=20),
        Usage(1700, 10, cache_read_tokens=1500),
    ]
    chat = ScriptedChat(
        [
            ChatResult(tool_reply(("t", {})), calls[0]),
            ChatResult(tool_reply(("t", {})), calls[1]),
            ChatResult(AssistantMessage("done"), calls[2]),
        ]
    )
    occupancy: list[int | None] = []

    class Watch:
        def check_turn(self, ctx: RunContext) -> Stop | None:
            occupancy.append(ctx.context_tokens)
            return None

    log = HookLog()
    engine = Agent(
        chat,
        ScriptedTools({"t": lambda: "x"}),
        policies=[Watch()],
        session_dir=tmp_path,
        hooks=log.hooks(),
    )
    outcome = await engine.run("go")
    # Inclusive totals are summed per call; the breakdown fields are never added on top.
    assert outcome.usage == Usage(4200, 260, 3300, 300, 170)
    # Context occupancy is the last call's input, not a sum.
    assert occupancy == [None, 1000, 1500]
    assert log.stops[0].usage == outcome.usage
    (session,) = tmp_path.glob("*.jsonl")
    end = json.loads(session.read_text("utf-8").splitlines()[-1])["meta"]
    assert end["usage"]["input_tokens"] == 4200


async def test_usage_is_reported_when_the_run_fails() -> None:
    log = HookLog()
    chat = ScriptedChat([ChatResult(tool_reply(("t", {})), Usage(10, 2)), Boom("down")])
    engine = Agent(chat, ScriptedTools({"t": lambda: "x"}), hooks=log.hooks())
    with pytest.raises(Boom):
        await engine.run("go")
    assert log.stops[0].usage == Usage(10, 2)


class StreamingChat:
    """A model that streams its answer in pieces."""

    async def __call__(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        on_delta: DeltaHandler | None = None,
        **_: Any,
    ) -> ChatResult:
        assert on_delta is not None
        on_delta(ChatDelta("thinking", "let me "))
        on_delta(ChatDelta("thinking", "think"))
        for piece in ("Hel", "lo", "!"):
            on_delta(ChatDelta("text", piece))
        return ChatResult(AssistantMessage("Hello!", reasoning="let me think"), Usage(5, 3))


async def test_streaming_deltas_between_llm_start_and_llm_end(snapshot: SnapshotAssertion) -> None:
    engine = Agent(StreamingChat())
    recorder = Recorder(engine.events)
    await engine.run("hi")
    assert recorder.types == [
        "turn_start",
        "llm_start",
        "thinking_delta",
        "thinking_delta",
        "text_delta",
        "text_delta",
        "text_delta",
        "llm_end",
        "final",
        "turn_end",
    ]
    text = "".join(e.text for e in recorder.of(TextDeltaEvent))
    assert text == "Hello!"
    seed_events = [t for t in recorder.types if not t.endswith("_delta")]
    assert seed_events == ["turn_start", "llm_start", "llm_end", "final", "turn_end"]


async def test_frozen_context_is_reused_byte_for_byte(tmp_path: Path) -> None:
    workspace = tmp_path / "proj"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("print(1)\n", "utf-8")
    (workspace / "node_modules").mkdir()
    (workspace / ".git" / "refs" / "heads").mkdir(parents=True)
    (workspace / ".git" / "HEAD").write_text("ref: refs/heads/main\n", "utf-8")
    (workspace / ".git" / "refs" / "heads" / "main").write_text(
        "0123456789abcdef" * 2 + "01234567\n"
    )
    now = {"t": datetime(2026, 11, 29, 23, 41, 7, tzinfo=UTC)}
    renders = {"n": 0}

    class Counting(WorkspacePreamble):
        def render(self) -> str:
            renders["n"] += 1
            return super().render()

    context = Counting(workspace, clock=lambda: now["t"])
    chat = ScriptedChat([tool_reply(("t", {})), "one", "two", "three"])
    engine = Agent(
        chat,
        ScriptedTools({"t": lambda: "x"}),
        system_prompt="sys",
        session_dir=tmp_path / "s",
        preamble=context,
    )
    handle = engine.new_session()
    await engine.run("first", session=handle)
    now["t"] = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)  # the clock moves on ...
    (workspace / "new.txt").write_text("x", "utf-8")  # ... and the tree changes
    await engine.run("second", session=handle)
    resumed = await engine.run("third", resume=handle.id)

    context_texts = {m.content for r in chat.requests for m in r.messages if is_preamble_message(m)}
    assert len(context_texts) == 1, "rendered once, replayed byte for byte"
    assert renders["n"] == 1
    (text,) = context_texts
    assert "project: proj" in text
    assert "git HEAD: 0123456789ab (main)" in text
    assert "time: 2026-11-29T23:00Z" in text
    assert "  src/\n    app.py" in text
    assert "node_modules" not in text
    assert "new.txt" not in text
    # Position: the conversation's first user message, in every request.
    for request in chat.requests:
        assert is_preamble_message(request.messages[1])
    assert resumed.messages[1].content == text


async def test_fresh_sessions_render_the_context_again(tmp_path: Path) -> None:
    context = WorkspacePreamble(tmp_path)
    engine = Agent(ScriptedChat(["a", "b"]), preamble=context)
    first = await engine.run("x")
    second = await engine.run("y")
    assert is_preamble_message(first.messages[0])
    assert is_preamble_message(second.messages[0])


class SlowChat:
    """A model that takes 30 s to answer and ignores its signal."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    async def __call__(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], **_: Any
    ) -> ChatResult:
        self.started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return ChatResult(AssistantMessage("too late"))


async def test_interrupt_during_a_slow_chat_call(
    tmp_path: Path, snapshot: SnapshotAssertion
) -> None:
    chat = SlowChat()
    log = HookLog()
    engine = Agent(chat, session_dir=tmp_path, hooks=log.hooks())
    recorder = Recorder(engine.events)
    controller = AbortController()
    task = asyncio.create_task(engine.run("hello", signal=controller.signal))
    await asyncio.wait_for(chat.started.wait(), 5)
    fired = time.monotonic()
    controller.abort("user pressed Ctrl-C")
    outcome = await asyncio.wait_for(task, 5)
    took = time.monotonic() - fired
    assert took < 1.0, f"the interrupt took {took:.3f}s"
    assert chat.cancelled
    assert outcome.stopped_reason == "aborted"
    assert outcome.turns_used == 0
    assert recorder.view() == snapshot
    assert log.calls[-1] == "stop:aborted"
    # History persisted: the prompt and a closing run_end.
    path = Path(outcome.session_path or "")
    records = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    assert records[-1]["meta"]["stopped_reason"] == "aborted"
    assert [r["message"]["content"] for r in records if r["kind"] == "message"] == ["hello"]


async def test_interrupt_cancels_running_tools(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    started = asyncio.Event()
    finished: list[str] = []

    async def slow() -> str:
        started.set()
        await asyncio.sleep(30)
        finished.append("slow")
        return "never"

    chat = ScriptedChat([tool_reply(("slow", {}), ("after", {})), "unreachable"])

    def after() -> str:
        finished.append("after")
        return "x"

    tools = ScriptedTools({"slow": slow, "after": after})
    engine = Agent(chat, tools, session_dir=tmp_path)
    recorder = Recorder(engine.events)
    task = asyncio.create_task(engine.run("go"))
    await asyncio.wait_for(started.wait(), 5)
    fired = time.monotonic()
    engine.interrupt()
    outcome = await asyncio.wait_for(task, 5)
    assert time.monotonic() - fired < 1.0
    assert finished == []
    assert outcome.stopped_reason == "aborted"
    assert outcome.turns_used == 1
    ends = recorder.of(ToolCallEndEvent)
    assert [(e.call.name, e.cancelled) for e in ends] == [("slow", True), ("after", True)]
    assert recorder.types.count("tool_call_start") == 1  # "after" never started
    # Every call is answered in the history and in the session file, cancelled ones too.
    tool_messages = [m for m in outcome.messages if isinstance(m, ToolMessage)]
    assert [json.loads(m.content)["error"] for m in tool_messages] == ["interrupted"] * 2
    assert read_session_messages(outcome.session_path or "")[-2:] == tool_messages
    assert recorder.view() == snapshot


async def test_run_conversation_keeps_turn_boundary_abort_for_chat_calls() -> None:
    from agentfsm import LoopParams, run_conversation

    chat = SlowChat()
    controller = AbortController()
    task = asyncio.create_task(
        run_conversation(
            chat, None, [UserMessage("x")], LoopParams(max_turns=2, signal=controller.signal)
        )
    )
    await asyncio.wait_for(chat.started.wait(), 5)
    controller.abort()
    await asyncio.sleep(0.05)
    # The seed's loop does not cut the call: only the chat function could.
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_run_sync() -> None:
    engine = Agent(ScriptedChat(["sync answer"]))
    outcome = engine.run_sync("hi")
    assert outcome.final == AssistantMessage("sync answer")
    assert outcome.session_path is None


async def test_run_sync_refuses_inside_a_loop() -> None:
    agent = Agent(ScriptedChat(["x"]))
    with pytest.raises(RuntimeError, match=r"await agent\.run"):
        agent.run_sync("hi")


async def test_compression_marker_is_recorded(tmp_path: Path) -> None:
    def script(messages: Sequence[Message]) -> Any:
        if messages[0].content == COMPRESSION_SYSTEM_PROMPT:
            return "summary"
        return "done"

    history: list[Message] = [
        UserMessage(f"q{i}") if i % 2 == 0 else AssistantMessage(f"a{i}") for i in range(11)
    ]
    engine = Agent(ScriptedChat(script), session_dir=tmp_path, context_budget_tokens=10)
    outcome = await engine.run("go", history=history)
    path = Path(outcome.session_path or "")
    metas = [
        json.loads(line)["meta"]
        for line in path.read_text("utf-8").splitlines()
        if '"meta"' in line
    ]
    (compressed,) = [m for m in metas if m["event"] == "compress_end"]
    assert compressed["summary_chars"] == len("summary")
    # The history the compression left, so a resume sends it instead of compressing again.
    assert compressed["history"][0]["content"].startswith("[context summary of earlier turns]")
    # The session keeps the raw transcript (the core contract's replay) ...
    assert read_session_messages(path) == [*history, UserMessage("go"), AssistantMessage("done")]
    # ... and what the run held after compressing (what Agent(resume=...) sends).
    assert read_session_messages(path, compressed=True) == outcome.messages


async def test_final_gate_retries_are_available_to_engine_users() -> None:
    class Once:
        def __init__(self) -> None:
            self.done = False

        async def check_final(self, ctx: RunContext) -> Retry | None:
            if self.done:
                return None
            self.done = True
            return Retry("again")

    chat = ScriptedChat(["a", "b"])
    outcome = await Agent(chat, policies=[Once()]).run("x")
    assert outcome.final == AssistantMessage("b")
    assert chat.requests[1].messages[-1] == UserMessage(
        "Continue.\n\n<system-reminder>\nagain\n</system-reminder>"
    )


async def test_tool_call_ids_survive_the_session(tmp_path: Path) -> None:
    chat = ScriptedChat([tool_reply(ToolCall("abc", "t", {"k": [1, {"x": None}]})), "ok"])
    engine = Agent(
        chat, ScriptedTools({"t": lambda k: ToolResult(True, json.dumps(k))}), session_dir=tmp_path
    )
    outcome = await engine.run("go")
    assert read_session_messages(outcome.session_path or "") == outcome.messages


async def test_interrupt_cuts_a_running_final_gate(tmp_path: Path) -> None:
    from agentfsm.policies import verify
    from agentfsm.sandbox._process import Unsandboxed

    marker = tmp_path / "finished"
    chat = ScriptedChat([tool_reply(("write", {})), "done"])
    tools = ScriptedTools(
        {"write": lambda: ToolResult(True, "ok", metadata={"path": "a"})},
        specs=[ToolSpec("write", "w", destructive=True)],
    )
    engine = Agent(
        chat,
        tools,
        policies=[verify(f"sleep 30; touch {marker}", workspace=tmp_path)],
        sandbox=Unsandboxed(),
    )
    second_answer = asyncio.Event()
    engine.events.on("llm_end", lambda e: second_answer.set() if e.turn == 2 else None)
    recorder = Recorder(engine.events)
    task = asyncio.create_task(engine.run("go"))
    await asyncio.wait_for(second_answer.wait(), 5)
    await asyncio.sleep(0.3)  # the verify command is running now
    fired = time.monotonic()
    engine.interrupt()
    outcome = await asyncio.wait_for(task, 5)
    assert time.monotonic() - fired < 1.0
    assert outcome.stopped_reason == "aborted"
    assert recorder.types[-1] == "error"
    await asyncio.sleep(0.1)
    assert not marker.exists()  # the command's process group was killed
