"""read_file's "unchanged since you read it" memory belongs to the run: it holds only while
the run's history still holds the earlier result whole."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentfsm import Agent, LoopParams, UserMessage, run_conversation
from agentfsm.adapters.tools import workspace_tools
from agentfsm.engine._compression import COMPRESSION_SYSTEM_PROMPT
from agentfsm.engine._messages import AssistantMessage, Message, ToolCall, ToolMessage
from agentfsm.testing import ScriptedChat, tool_reply

UNCHANGED = "unchanged since you read it"


def make_root(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("the secret is 42\n", "utf-8")
    return root


def results(messages: Sequence[Message], call_id: str) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id]


def read(call_id: str) -> AssistantMessage:
    return tool_reply(ToolCall(call_id, "read_file", {"path": "notes.txt"}))


async def test_a_second_run_of_the_same_engine_starts_with_no_memory(tmp_path: Path) -> None:
    chat = ScriptedChat([read("r1"), read("r2"), "ok", read("r3"), "ok"])
    engine = Agent(chat, workspace_tools(make_root(tmp_path)))
    first = await engine.run("read notes.txt twice")
    assert "the secret is 42" in results(first.messages, "r1")[0]
    assert UNCHANGED in results(first.messages, "r2")[0]  # r1 is above, in the same run
    second = await engine.run("read notes.txt again")
    [content] = results(second.messages, "r3")
    assert "the secret is 42" in content


async def test_a_compression_that_summarized_the_read_away_forgets_it(tmp_path: Path) -> None:
    turns = [read("r1"), *(tool_reply(ToolCall(f"l{i}", "list_dir", {})) for i in range(6))]
    turns += [read("r2"), AssistantMessage("done")]
    script = iter(turns)

    def model(messages: Sequence[Message]) -> AssistantMessage:
        if messages[0].content == COMPRESSION_SYSTEM_PROMPT:
            return AssistantMessage("read notes.txt, listed the folder")
        return next(script)

    chat = ScriptedChat(model)
    outcome = await run_conversation(
        chat,
        workspace_tools(make_root(tmp_path)),
        [UserMessage("x" * 400)],
        LoopParams(max_turns=20, context_budget_tokens=300),
    )
    assert outcome.stopped_reason == "final"
    assert any(r.messages[0].content == COMPRESSION_SYSTEM_PROMPT for r in chat.requests)
    last_request = chat.requests[-1].messages
    assert not results(last_request, "r1")  # summarized away
    [content] = results(last_request, "r2")
    assert "the secret is 42" in content


async def test_a_compression_that_kept_the_read_keeps_the_memory(tmp_path: Path) -> None:
    turns = [tool_reply(ToolCall(f"l{i}", "list_dir", {})) for i in range(4)]
    turns += [read("r1"), read("r2"), AssistantMessage("done")]
    script = iter(turns)

    def model(messages: Sequence[Message]) -> AssistantMessage:
        if messages[0].content == COMPRESSION_SYSTEM_PROMPT:
            return AssistantMessage("listed the folder")
        return next(script)

    chat = ScriptedChat(model)
    outcome = await run_conversation(
        chat,
        workspace_tools(make_root(tmp_path)),
        [UserMessage("x" * 400)],
        LoopParams(max_turns=20, context_budget_tokens=50),
    )
    kinds = [
        "compress" if r.messages[0].content == COMPRESSION_SYSTEM_PROMPT else "turn"
        for r in chat.requests
    ]
    # turn 5 reads r1; the compression before turn 6 keeps it among the recent messages
    assert kinds[4:] == ["compress", "turn", "compress", "turn", "compress", "turn"]
    assert "the secret is 42" in results(outcome.messages, "r1")[0]
    assert UNCHANGED in results(outcome.messages, "r2")[0]
