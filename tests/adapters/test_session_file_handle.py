"""A session handle keeps one file open (append mode) and hands every record to the OS."""

from __future__ import annotations

import gc
import io
import json
import warnings
from pathlib import Path

import pytest

from agentfsm import Agent, AssistantMessage, UserMessage
from agentfsm.adapters.sessions import SessionHandle, SessionStore
from agentfsm.engine.messages import ChatResult, Usage


def opened(handle: SessionHandle) -> io.FileIO | None:
    return handle._file


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
    assert file.closed
    assert opened(handle) is None
    handle.write_meta({"event": "b"})  # reopens, appends
    assert [r.get("meta") for r in records(handle.path)][-1] == {"event": "b"}
    handle.close()


def test_a_forgotten_handle_closes_its_file_without_a_warning(tmp_path: Path) -> None:
    handle = SessionHandle(tmp_path / "s.jsonl")
    handle.write_meta({"event": "a"})
    file = opened(handle)
    assert file is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del handle
        gc.collect()
    assert file.closed


def test_a_write_error_closes_and_the_next_write_reopens(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "s.jsonl"
    handle = SessionHandle(path)
    handle.write_meta({"event": "a"})
    file = opened(handle)
    assert file is not None
    file.close()  # the file went bad under the handle
    with pytest.raises(ValueError, match="closed file"):
        handle.write_meta({"event": "lost"})
    assert opened(handle) is None
    handle.write_meta({"event": "c"})
    assert [r["meta"] for r in records(path)] == [{"event": "a"}, {"event": "c"}]
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
