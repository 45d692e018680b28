"""Tool batches in the loop: parallel reads, call-order results, abort mid-batch, images."""

from __future__ import annotations

import asyncio
from pathlib import Path

from syrupy.assertion import SnapshotAssertion

from agentfsm import Agent, LoopParams, ToolCall, ToolResult, UserMessage, run_conversation
from agentfsm.adapters.tools import ToolBox, tool, workspace_tools
from agentfsm.engine._batching import plan_tool_batches
from agentfsm.engine._events import ToolCallEndEvent
from agentfsm.engine._messages import ImagePart, ToolSpec
from agentfsm.testing import ScriptedChat, tool_reply

from ..helpers import Recorder


def test_plan_tool_batches() -> None:
    specs = [
        ToolSpec("read", "r", concurrency_safe=True),
        ToolSpec("grep", "g", concurrency_safe=True),
        ToolSpec("write", "w", destructive=True),
    ]

    def c(name: str, i: int) -> ToolCall:
        return ToolCall(f"c{i}", name, {})

    calls = [
        c("read", 1),
        c("grep", 2),
        c("write", 3),
        c("read", 4),
        c("unknown", 5),
        c("read", 6),
        c("read", 7),
    ]
    batches = [[call.id for call in batch] for batch in plan_tool_batches(calls, specs)]
    assert batches == [["c1", "c2"], ["c3"], ["c4"], ["c5"], ["c6", "c7"]]
    bad_json = ToolCall("c8", "read", {}, raw_arguments="{")
    assert [len(b) for b in plan_tool_batches([c("read", 1), bad_json], specs)] == [1, 1]


def parallel_tools(log: list[str]) -> ToolBox:
    @tool(concurrency_safe=True)
    async def slow_read(path: str) -> str:
        """Read slowly."""
        log.append(f"start {path}")
        await asyncio.sleep(0.3 if path == "a" else 0.1)  # the second finishes first
        log.append(f"end {path}")
        return f"content of {path}"

    return ToolBox([slow_read])


async def test_concurrency_safe_calls_run_together_and_post_in_call_order(
    recorder: Recorder,
) -> None:
    log: list[str] = []
    chat = ScriptedChat(
        [tool_reply(("slow_read", {"path": "a"}), ("slow_read", {"path": "b"})), "done"]
    )
    outcome = await run_conversation(
        chat,
        parallel_tools(log),
        [UserMessage("x")],
        LoopParams(max_turns=3),
        emitter=recorder.emitter,
    )
    # Both started before either ended: one batch.
    assert log == ["start a", "start b", "end b", "end a"]
    tool_events = [(e.type, e.call.id) for e in recorder.events if e.type.startswith("tool_call")]  # type: ignore[union-attr]
    assert tool_events == [
        ("tool_call_start", "call_1"),
        ("tool_call_start", "call_2"),
        ("tool_call_end", "call_1"),
        ("tool_call_end", "call_2"),
    ]
    assert [m.content for m in outcome.messages[2:4]] == ["content of a", "content of b"]


async def test_abort_mid_batch_closes_every_call(recorder: Recorder) -> None:
    started = asyncio.Event()

    @tool(concurrency_safe=True)
    async def wait_forever(n: int) -> str:
        """Never finishes."""
        started.set()
        await asyncio.sleep(30)
        return "never"

    chat = ScriptedChat(
        [tool_reply(("wait_forever", {"n": 1}), ("wait_forever", {"n": 2})), "unreachable"]
    )
    engine = Agent(chat, ToolBox([wait_forever]))
    recorder = Recorder(engine.events)
    task = asyncio.create_task(engine.run("go"))
    await asyncio.wait_for(started.wait(), 5)
    engine.interrupt()
    outcome = await asyncio.wait_for(task, 3)
    assert outcome.stopped_reason == "aborted"
    ends = recorder.of(ToolCallEndEvent)
    assert [(e.call.id, e.cancelled) for e in ends] == [("call_1", True), ("call_2", True)]
    assert [m.role for m in outcome.messages] == ["user", "assistant", "tool", "tool"]


async def test_images_are_sent_back_as_a_user_message() -> None:
    @tool(concurrency_safe=True)
    def screenshot() -> ToolResult:
        """Take a screenshot."""
        return ToolResult(
            True,
            "captured 1 image",
            metadata={"image": {"media_type": "image/png", "data": "iVBORw0KGgo="}},
        )

    chat = ScriptedChat([tool_reply(("screenshot", {})), "I see it"])
    outcome = await run_conversation(
        chat, ToolBox([screenshot]), [UserMessage("look")], LoopParams(max_turns=3)
    )
    assert [m.role for m in outcome.messages] == ["user", "assistant", "tool", "user", "assistant"]
    image_message = outcome.messages[3]
    assert image_message.images == (ImagePart("image/png", "iVBORw0KGgo="),)  # type: ignore[union-attr]
    assert (
        chat.requests[1].messages[3] == image_message
    )  # the model saw it, right after the results


async def test_three_workspace_tools_in_one_turn(
    tmp_path: Path, snapshot: SnapshotAssertion
) -> None:
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n", "utf-8")
    chat = ScriptedChat(
        [
            tool_reply(
                ToolCall("r", "read_file", {"path": "notes.txt"}),
                ToolCall("g", "grep", {"pattern": "beta"}),
                ToolCall("e", "edit_file", {"path": "notes.txt", "old": "beta", "new": "gamma"}),
            ),
            "Replaced beta with gamma.",
        ]
    )
    recorder = Recorder()
    outcome = await run_conversation(
        chat,
        workspace_tools(tmp_path),
        [UserMessage("replace beta")],
        LoopParams(max_turns=3),
        emitter=recorder.emitter,
    )
    assert (tmp_path / "notes.txt").read_text("utf-8") == "alpha\ngamma\n"
    assert outcome.stopped_reason == "final"
    assert recorder.view() == snapshot
