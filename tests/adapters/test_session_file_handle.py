"""A session handle keeps one file open (append mode) and hands every record to the OS when it
is written: nothing is held back for a later write, so a killed process loses no record
(an assistant reply asking for tools, a policy's warning or note) written before the kill."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentfsm import Agent, AssistantMessage, ToolCall, UserMessage
from agentfsm.adapters.sessions import SessionHandle, SessionRecorder, SessionStore
from agentfsm.engine._events import AgentEmitter, LlmEndEvent, ToolCallStartEvent
from agentfsm.engine._messages import ChatResult, Message, Usage
from agentfsm.testing import ScriptedTools

from ..helpers import fd_open_on


def opened(handle: SessionHandle) -> int | None:
    """The handle's open file descriptor, or ``None``."""
    return handle._fd


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text("ascii").splitlines()]


def test_one_open_file_and_every_record_on_disk_at_once(tmp_path: Path) -> None:
    handle = SessionStore(tmp_path).new_handle()
    handle.write_meta({"event": "a"})
    file = opened(handle)
    assert file is not None
    handle.write_messages(UserMessage("hi"), AssistantMessage("hello \udcff"))
    assert opened(handle) is file  # not reopened per record
    # Nothing is buffered in the process: a kill -9 now loses nothing written.
    assert [r["kind"] for r in records(handle.path)] == ["meta", "message", "message"]
    assert handle.path.read_bytes().isascii()
    handle.close()
    handle.close()  # harmless twice
    assert not fd_open_on(file, handle.path.stat().st_ino)
    assert opened(handle) is None
    handle.write_meta({"event": "b"})  # reopens, appends
    assert [r.get("meta") for r in records(handle.path)][-1] == {"event": "b"}
    handle.close()


def test_a_forgotten_handle_closes_its_file_without_a_warning(tmp_path: Path) -> None:
    handle = SessionHandle(tmp_path / "s.jsonl")
    handle.write_meta({"event": "a"})
    file = opened(handle)
    assert file is not None
    assert fd_open_on(file, (tmp_path / "s.jsonl").stat().st_ino)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del handle
        gc.collect()
    assert not fd_open_on(file, (tmp_path / "s.jsonl").stat().st_ino)


def test_a_write_error_closes_the_file_and_nothing_later_is_written(tmp_path: Path) -> None:
    # A later record written after a lost one would leave a gap (a reply missing before its
    # tool results): the file keeps the run up to the failure, as a killed process leaves it.
    path = tmp_path / "sub" / "s.jsonl"
    handle = SessionHandle(path)
    handle.write_meta({"event": "a"})
    file = opened(handle)
    assert file is not None
    os.close(file)  # the file went bad under the handle
    with pytest.raises(OSError, match="Bad file descriptor"):
        handle.write_meta({"event": "lost"})
    assert opened(handle) is None
    assert handle.error is not None
    with pytest.raises(OSError, match="no longer recorded"):
        handle.write_meta({"event": "c"})
    assert opened(handle) is None
    assert [r["meta"] for r in records(path)] == [{"event": "a"}]
    handle.close()


def test_a_truncated_file_gets_the_next_records_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    handle = SessionHandle(path)
    handle.write_meta({"event": "old"})
    path.write_bytes(b"")  # as the durable workflow empties a run's file
    handle.write_meta({"event": "new"})
    assert [r["meta"] for r in records(path)] == [{"event": "new"}]
    handle.close()


async def test_a_run_closes_its_session_file(tmp_path: Path) -> None:
    async def chat(*_: object, **__: object) -> ChatResult:
        return ChatResult(AssistantMessage("done"), Usage(1, 1), "stop")

    handle = SessionStore(tmp_path).new_handle()
    agent = Agent(chat)
    await agent.run("one", session=handle)
    assert opened(handle) is None
    await agent.run("two", session=handle)
    assert opened(handle) is None
    events = [r["meta"]["event"] for r in records(handle.path) if r["kind"] == "meta"]  # type: ignore[index]
    assert events == ["run_start", "run_end", "run_start", "run_end"]


def shapes(path: Path) -> list[str]:
    """Each record of the file as ``meta:<event>`` or ``<role>``."""
    out = []
    for record in records(path):
        if record["kind"] == "meta":
            out.append(f"meta:{record['meta']['event']}")  # type: ignore[index]
        else:
            out.append(str(record["message"]["role"]))  # type: ignore[index]
    return out


def calls(*ids: str) -> AssistantMessage:
    return AssistantMessage("", tool_calls=tuple(ToolCall(i, "echo", {"text": i}) for i in ids))


async def test_each_record_is_on_disk_before_the_tool_runs_and_the_model_is_called(
    tmp_path: Path,
) -> None:
    handle = SessionStore(tmp_path).new_handle()
    seen_by_model: list[list[str]] = []
    seen_by_tool: list[list[str]] = []
    replies = [calls("a", "b"), calls("c"), AssistantMessage("done")]

    async def chat(messages: Sequence[Message], *_: object, **__: object) -> ChatResult:
        seen_by_model.append(shapes(handle.path))
        return ChatResult(replies.pop(0), Usage(1, 1))

    def echo(text: str) -> str:
        seen_by_tool.append(shapes(handle.path))
        return text

    await Agent(chat, ScriptedTools({"echo": echo})).run("go", session=handle)
    start = ["meta:run_start", "user"]
    turn1 = ["assistant", "meta:tool_call_start"]
    turn1_end = [*turn1, "tool", "meta:tool_call_start", "tool"]
    turn2 = ["assistant", "meta:tool_call_start", "tool"]
    assert seen_by_tool == [
        [*start, *turn1],
        [*start, *turn1, "tool", "meta:tool_call_start"],
        [*start, *turn1_end, *turn2[:2]],
    ]
    assert seen_by_model == [start, [*start, *turn1_end], [*start, *turn1_end, *turn2]]
    assert shapes(handle.path) == [*start, *turn1_end, *turn2, "assistant", "meta:run_end"]


def test_a_reply_asking_for_tools_is_on_disk_at_once(tmp_path: Path) -> None:
    handle = SessionStore(tmp_path).new_handle()
    emitter = AgentEmitter()
    recorder = SessionRecorder(handle)
    recorder.start(emitter, messages=[], input_chars=0, history_size=0)
    reply = calls("a")
    emitter.emit(LlmEndEvent(turn=1, result=ChatResult(reply)))
    assert shapes(handle.path) == ["meta:run_start", "assistant"]
    assert handle.messages == [reply]
    emitter.emit(ToolCallStartEvent(turn=1, call=reply.tool_calls[0]))
    assert shapes(handle.path) == ["meta:run_start", "assistant", "meta:tool_call_start"]
    recorder.finish("final", Usage())


def test_a_kill_loses_no_reply_warning_or_note(tmp_path: Path) -> None:
    """The process kills itself (SIGKILL: no exit handler, no collection) right after the
    events: every record is in the file."""
    script = """
import os, signal, sys
from agentfsm import AssistantMessage, ToolCall
from agentfsm.adapters.sessions import SessionRecorder, SessionStore
from agentfsm.engine._events import (
    AgentEmitter, LlmEndEvent, PolicyNoteEvent, PolicyWarnEvent, RedirectSkippedEvent,
)
from agentfsm.engine._messages import ChatResult
handle = SessionStore(sys.argv[1]).new_handle()
emitter = AgentEmitter()
SessionRecorder(handle).start(emitter, messages=[], input_chars=0, history_size=0)
reply = AssistantMessage("", tool_calls=(ToolCall("a", "echo", {}),))
emitter.emit(LlmEndEvent(turn=1, result=ChatResult(reply)))
emitter.emit(PolicyWarnEvent(turn=1, policy="p", reason="looping", code="repeat"))
emitter.emit(PolicyNoteEvent(turn=1, policy="p", reason="noted", code="note"))
emitter.emit(RedirectSkippedEvent(turn=1, trigger="t", reason="skipped"))
os.kill(os.getpid(), signal.SIGKILL)
"""
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], timeout=60)
    assert done.returncode == -signal.SIGKILL
    (path,) = tmp_path.glob("*.jsonl")
    assert shapes(path) == [
        "meta:run_start",
        "assistant",
        "meta:policy_warn",
        "meta:policy_note",
        "meta:redirect_skipped",
    ]
    warn = records(path)[2]["meta"]
    assert warn == {
        "event": "policy_warn",
        "turn": 1,
        "policy": "p",
        "code": "repeat",
        "reason": "looping",
    }


async def test_a_cancelled_run_leaves_every_record_on_disk(tmp_path: Path) -> None:
    handle = SessionStore(tmp_path).new_handle()
    started = asyncio.Event()

    async def chat(*_: object, **__: object) -> ChatResult:
        return ChatResult(calls("a"), Usage(1, 1))

    async def echo(text: str) -> str:
        started.set()
        await asyncio.sleep(60)
        return text

    run = asyncio.ensure_future(
        Agent(chat, ScriptedTools({"echo": echo})).run("go", session=handle)
    )
    await started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert shapes(handle.path) == [
        "meta:run_start",
        "user",
        "assistant",
        "meta:tool_call_start",
        "tool",
        "meta:run_end",
    ]


async def test_a_reply_on_the_last_turn_is_recorded_with_its_unrun_calls(tmp_path: Path) -> None:
    handle = SessionStore(tmp_path).new_handle()

    async def chat(*_: object, **__: object) -> ChatResult:
        return ChatResult(calls("a", "b"), Usage(1, 1))

    tools = ScriptedTools({"echo": lambda text: text})
    outcome = await Agent(chat, tools, max_turns=1).run("go", session=handle)
    assert outcome.stopped_reason == "budget"
    assert shapes(handle.path) == [
        "meta:run_start",
        "user",
        "assistant",
        "tool",
        "tool",
        "meta:budget_exhausted",
        "meta:run_end",
    ]


def test_a_failed_write_ends_the_recording_with_whole_records(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    handle = SessionStore(tmp_path).new_handle()
    emitter = AgentEmitter()
    recorder = SessionRecorder(handle)
    recorder.start(emitter, messages=[], input_chars=0, history_size=0)
    emitter.emit(LlmEndEvent(turn=1, result=ChatResult(calls("a"))))
    file = opened(handle)
    assert file is not None
    os.close(file)  # the file went bad under the handle
    emitter.emit(ToolCallStartEvent(turn=1, call=ToolCall("a", "echo")))
    recorder.finish("final", Usage())
    assert caplog.text == ""  # the handle keeps the error; the Agent reports it, once
    assert handle.error is not None
    assert shapes(handle.path) == ["meta:run_start", "assistant"]
    assert opened(handle) is None


def test_records_go_to_the_file_as_the_generic_writes_would_order_them(tmp_path: Path) -> None:
    handle = SessionStore(tmp_path).new_handle()
    emitter = AgentEmitter()
    recorder = SessionRecorder(handle)
    recorder.start(emitter, messages=[UserMessage("hi")], input_chars=2, history_size=0)
    reply = calls("a")
    emitter.emit(LlmEndEvent(turn=1, result=ChatResult(reply)))
    handle.write_messages(UserMessage("between"))
    recorder.finish("final", Usage())
    got: list[Any] = [r.get("message", r.get("meta")) for r in records(handle.path)]
    assert [g.get("role", g.get("event")) for g in got] == [
        "run_start",
        "user",
        "assistant",
        "user",
        "run_end",
    ]
    assert handle.messages == [UserMessage("hi"), reply, UserMessage("between")]
