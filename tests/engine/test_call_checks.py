"""``run_conversation`` refuses messages and params it could never run with, at the call and
before the model is called, saying what was meant."""

from __future__ import annotations

from typing import Any

import pytest

from agentfsm import LoopParams, UserMessage, run_conversation
from agentfsm.testing import ScriptedChat


@pytest.mark.parametrize(
    ("messages", "params", "meant"),
    [
        (
            "hello",
            LoopParams(max_turns=3),
            r"run_conversation takes a list of messages, not a str: did you mean "
            r"\[UserMessage\('hello'\)\]\? \(Agent\.run takes a string\)",
        ),
        (["hello"], LoopParams(max_turns=3), r"message 0 is a str.*UserMessage\('hello'\)"),
        (
            [UserMessage("a"), {"role": "user", "content": "b"}],
            LoopParams(max_turns=3),
            r"message 1 is a dict, not a message",
        ),
        (None, LoopParams(max_turns=3), r"takes a list of messages .* not NoneType"),
        (
            [UserMessage("hello")],
            10,
            r"params must be a LoopParams, not int: did you mean LoopParams\(max_turns=10\)\?",
        ),
        (
            [UserMessage("hello")],
            {"max_turns": 10},
            r"params must be a LoopParams, not dict: did you mean LoopParams\(max_turns=\.\.\.\)",
        ),
    ],
)
async def test_wrong_messages_or_params_fail_at_the_call(
    messages: Any, params: Any, meant: str
) -> None:
    chat = ScriptedChat(["never"])
    with pytest.raises(TypeError, match=meant) as raised:
        await run_conversation(chat, None, messages, params)
    assert chat.calls == 0
    # Raised by run_conversation itself, not from deep inside the runner.
    frames = [entry.name for entry in raised.traceback]
    assert frames[1] == "run_conversation"
    assert len(frames) <= 3, frames  # at most its one check function below it
