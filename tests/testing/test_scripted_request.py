"""ScriptedChat functions shaped like a chat function get the call's tools and parameters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentfsm import LoopParams, Message, ToolSpec, UserMessage, run_conversation
from agentfsm.testing import ScriptedChat, ScriptedTools


async def test_a_chat_shaped_function_gets_messages_tools_and_parameters() -> None:
    seen: list[tuple[int, list[str], float | None, int | None]] = []

    def model(
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> str:
        seen.append((len(messages), [t.name for t in tools], temperature, max_tokens))
        return "done"

    def fully_keyword(messages: Sequence[Message], tools: Sequence[ToolSpec], **params: Any) -> str:
        assert set(params) == {"temperature", "max_tokens", "signal"}
        return "ok"

    outcome = await run_conversation(
        ScriptedChat(model),
        ScriptedTools({"lookup": lambda q: q}),
        [UserMessage("hi")],
        LoopParams(max_turns=2, temperature=0.5, max_tokens=64),
    )
    assert outcome.final is not None
    assert seen == [(1, ["lookup"], 0.5, 64)]
    assert (await ScriptedChat(fully_keyword)([UserMessage("x")], ())).message.content == "ok"
