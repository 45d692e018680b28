"""Compression keeps a valid provider history: a kept tool result whose call was summarized
away becomes a user message, so every chat function gets tool messages only after their
call."""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm import LoopParams, UserMessage, run_conversation
from agentfsm.engine._compression import (
    COMPRESSION_SYSTEM_PROMPT,
    SUMMARY_PREFIX,
    compress_messages,
    detach_orphaned_results,
)
from agentfsm.engine._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply


def calls(*ids: str) -> AssistantMessage:
    return tool_reply(*(ToolCall(i, "t", {}) for i in ids))


def orphans(messages: Sequence[Message]) -> list[str]:
    """Tool results that do not answer a call of the assistant message before them."""
    found, open_calls = [], set[str]()
    for message in messages:
        if isinstance(message, AssistantMessage):
            open_calls = {c.id for c in message.tool_calls}
        elif isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                found.append(message.tool_call_id)
        else:
            open_calls = set()
    return found


async def test_kept_results_of_a_summarized_call_become_user_messages() -> None:
    history: list[Message] = [
        SystemMessage("sys"),
        UserMessage("go"),
        calls("c1"),
        ToolMessage("c1", "r1"),
        calls("c2", "c3"),
        ToolMessage("c2", "r2"),
        ToolMessage("c3", "r3", is_error=True),
    ]
    for i in (4, 5, 6):
        history += [calls(f"c{i}"), ToolMessage(f"c{i}", f"r{i}")]
    result = await compress_messages(ScriptedChat(["the summary"]), history)
    assert result.messages == [
        SystemMessage("sys"),
        UserMessage(f"{SUMMARY_PREFIX}the summary\n[end summary]"),
        UserMessage("[result of tool call c2]\nr2"),
        UserMessage("[result of tool call c3]\nr3"),
        *history[-6:],
    ]
    assert orphans(result.messages) == []


def test_detach_leaves_a_valid_history_alone() -> None:
    valid: list[Message] = [UserMessage("go"), calls("a", "b"), ToolMessage("b", "2")]
    valid += [ToolMessage("a", "1"), AssistantMessage("done")]
    assert detach_orphaned_results(valid) == valid
    odd: list[Message] = [calls("a"), UserMessage("hm"), ToolMessage("a", "1")]
    assert detach_orphaned_results(odd)[2] == UserMessage("[result of tool call a]\n1")


async def test_every_request_of_a_compressing_run_is_a_valid_history() -> None:
    turns = iter([calls(f"a{i}", f"b{i}") for i in range(12)] + [AssistantMessage("done")])

    def model(messages: Sequence[Message]) -> AssistantMessage:
        if messages[0].content == COMPRESSION_SYSTEM_PROMPT:
            return AssistantMessage("summary")
        return next(turns)

    chat = ScriptedChat(model)
    outcome = await run_conversation(
        chat,
        ScriptedTools({"t": lambda: "ok"}),
        [UserMessage("go")],
        LoopParams(max_turns=20, context_budget_tokens=60),
    )
    assert outcome.stopped_reason == "final"
    compressions = [r for r in chat.requests if r.messages[0].content == COMPRESSION_SYSTEM_PROMPT]
    assert len(compressions) > 3
    for request in chat.requests:
        assert orphans(request.messages) == []
    assert any(
        m.content.startswith("[result of tool call ") for m in outcome.messages
    )  # the repair did happen
