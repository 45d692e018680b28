"""Policies hash and compare texts holding lone surrogates without raising."""

from __future__ import annotations

from agentfsm import LoopParams, UserMessage, run_conversation
from agentfsm.engine._messages import Message, ToolCall, ToolMessage
from agentfsm.policies import presets, prune_tool_results
from agentfsm.policies._prune import prune_marker
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

ODD = "caf\udcff.txt\u2028"


async def test_pruning_a_result_with_lone_surrogates() -> None:
    big = ODD * 500
    prior: list[Message] = [UserMessage(ODD)]
    for call_id in ("a", "b", "c"):
        prior += [tool_reply(ToolCall(call_id, "ls", {})), ToolMessage(call_id, big)]
    chat = ScriptedChat(["done"])
    outcome = await run_conversation(
        chat,
        ScriptedTools({}),
        prior,
        LoopParams(max_turns=2),
        policies=[prune_tool_results(5000)],
    )
    assert outcome.stopped_reason == "final"
    sent = [m.content for m in chat.requests[0].messages]
    assert sent.count(prune_marker(big)) == 2  # "c" answers the latest call: protected


async def test_coding_agent_preset_runs_on_surrogates() -> None:
    tools = ScriptedTools({"ls": lambda: ODD})
    chat = ScriptedChat([tool_reply(("ls", {"path": ODD}), content=ODD), ODD])
    outcome = await run_conversation(
        chat,
        tools,
        [UserMessage(ODD)],
        LoopParams(max_turns=6),
        policies=presets.coding_agent(),
    )
    assert outcome.stopped_reason == "final"
    assert outcome.final is not None
    assert outcome.final.content == ODD
