"""[TOOL_CALLS] text calls get ids unique within the reply and across the run's history."""

from __future__ import annotations

import json

from agentfsm import LoopParams, UserMessage, run_conversation
from agentfsm.engine._messages import AssistantMessage, Message, ToolCall, ToolMessage
from agentfsm.policies import text_tool_calls
from agentfsm.policies._text_tools import parse_text_tool_calls
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply


def block(*ids: str | None) -> str:
    calls = [{"name": "ls", **({"id": i} if i is not None else {})} for i in ids]
    return f"[TOOL_CALLS]{json.dumps(calls)}[/TOOL_CALLS]"


def test_parse_makes_ids_unique() -> None:
    parsed = parse_text_tool_calls(block("1", "1", None, "p2"), "p", taken={"p3"})
    assert parsed is not None
    assert [c.id for c in parsed[1]] == ["1", "p2", "p3_2", "p4"]


async def test_ids_are_unique_across_the_run_and_its_seed() -> None:
    seed: list[Message] = [
        UserMessage("earlier"),
        tool_reply(ToolCall("a", "ls", {})),
        ToolMessage("a", "x"),
        AssistantMessage("ok"),
        UserMessage("go"),
    ]
    chat = ScriptedChat([block("a", "a"), block("a", None), block(None, None), "done"])
    outcome = await run_conversation(
        chat,
        ScriptedTools({"ls": lambda: "x"}),
        seed,
        LoopParams(max_turns=5),
        policies=[text_tool_calls()],
    )
    assert outcome.stopped_reason == "final"
    ids = [c.id for m in outcome.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert len(ids) == len(set(ids)) == 7
    assert ids[1:] == [
        "text_call_1_1",
        "text_call_1_2",
        "text_call_2_1",
        "text_call_2_2",
        "text_call_3_1",
        "text_call_3_2",
    ]
    answered = [m.tool_call_id for m in outcome.messages if isinstance(m, ToolMessage)]
    assert answered == ids
