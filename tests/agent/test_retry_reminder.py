"""A final gate's reminder reaches one request and is never stored, like every reminder."""

from __future__ import annotations

from pathlib import Path

from agentfsm import Agent, ToolResult, UserMessage
from agentfsm.adapters.sessions import read_session_messages
from agentfsm.engine._reminders import RETRY_TURN
from agentfsm.policies import require, text_matches
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

REMINDER = "Say DONE when you are done."
BLOCK = f"<system-reminder>\n{REMINDER}\n</system-reminder>"


async def test_a_refused_answer_reminds_the_next_request_only(tmp_path: Path) -> None:
    # Turn 1 is refused; turn 2 calls a tool; turn 3 answers with the marker.
    chat = ScriptedChat(["no marker", tool_reply(("look", {})), "DONE"])
    tools = ScriptedTools({"look": lambda: ToolResult(True, "seen")})
    gate = require(text_matches("DONE"), reminder=REMINDER)
    agent = Agent(chat, tools, policies=[gate], session_dir=tmp_path)
    outcome = await agent.run("task")
    assert outcome.stopped_reason == "final"
    assert len(chat.requests) == 3

    def count(request_index: int) -> int:
        return sum(m.content.count(REMINDER) for m in chat.requests[request_index].messages)

    assert count(0) == 0
    # The request after the refusal carries the reminder exactly once, on the neutral turn.
    assert count(1) == 1
    assert chat.requests[1].messages[-1] == UserMessage(f"{RETRY_TURN}\n\n{BLOCK}")
    # The request after that does not: the reminder was never stored.
    assert count(2) == 0
    assert [m.content for m in chat.requests[2].messages if m.role != "system"][1:3] == [
        "no marker",
        RETRY_TURN,
    ]

    # The history and the session file keep the neutral turn, not the reminder.
    contents = [m.content for m in outcome.messages]
    assert contents[contents.index("no marker") + 1] == RETRY_TURN
    assert not any(REMINDER in c or "<system-reminder>" in c for c in contents)
    path = Path(outcome.session_path or "")
    assert REMINDER not in path.read_text("utf-8")
    assert read_session_messages(path) == outcome.messages
