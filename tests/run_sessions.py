"""Real session files of scripted runs, for the tests of a run's HTML picture."""

from __future__ import annotations

from pathlib import Path

from agentfsm import Agent, AssistantMessage, ChatResult, ToolCall, ToolResult, Usage
from agentfsm.testing import ScriptedChat, ScriptedTools

__all__ = ["HOSTILE", "hostile_payloads", "long_run", "tool_run"]

HOSTILE = '<script>window.__pwned = "script"</script><img src=x onerror="window.__pwned = 1">'
"""Model text that would run if it were ever parsed as markup."""


def hostile_payloads() -> list[str]:
    """Markup and script that must show as text; each sets its own ``window.__pwned_N``."""
    shapes = [
        "<script>window.__pwned_{n} = 1</script>",
        '<img src=x onerror="window.__pwned_{n} = 1">',
        "</script><script>window.__pwned_{n} = 1</script>",
        '<svg onload="window.__pwned_{n} = 1"></svg>',
        '<iframe srcdoc="<script>parent.__pwned_{n} = 1</script>"></iframe>',
        "<!-- --><script>window.__pwned_{n} = 1</script>",
        '"><img src=x onerror=window.__pwned_{n}=1>',
        "\u2028</script>\u2029<script>window.__pwned_{n} = 1</script>",
        '<a href="javascript:window.__pwned_{n}=1" id="a{n}">x</a>',
        '<style>@import "http://127.0.0.1:9/{n}.css";</style><b id="b{n}">bold</b>',
    ]
    return [shape.format(n=n) for n, shape in enumerate(shapes)]


async def tool_run(folder: Path, answer: str = "done", prompt: str = "count the words") -> Path:
    """A three-turn run: one tool call, then a failed and an ok call, then ``answer``."""
    chat = ScriptedChat(
        [
            ChatResult(
                AssistantMessage("looking", tool_calls=(ToolCall("c1", "read", {"path": "a"}),)),
                Usage(120, 30),
            ),
            ChatResult(
                AssistantMessage(
                    "",
                    tool_calls=(
                        ToolCall("c2", "shell", {"cmd": "ls"}),
                        ToolCall("c3", "read", {"path": "b"}),
                    ),
                ),
                Usage(200, 40),
            ),
            ChatResult(AssistantMessage(answer), Usage(260, 12)),
        ]
    )
    tools = ScriptedTools(
        {"read": lambda **_: "hello world", "shell": lambda **_: ToolResult(False, "", "exit 1")}
    )
    outcome = await Agent(chat, tools, system_prompt="sys", session_dir=folder).run(prompt)
    assert outcome.session_path is not None
    return Path(outcome.session_path)


async def long_run(folder: Path, turns: int) -> Path:
    """A run of ``turns`` turns, each reading a file of a few hundred characters."""
    replies: list[ChatResult] = [
        ChatResult(
            AssistantMessage(
                f"step {n}: reading the next file",
                tool_calls=(ToolCall(f"c{n}", "read", {"path": f"src/module_{n}.py"}),),
            ),
            Usage(1000 + 50 * n, 40),
        )
        for n in range(turns - 1)
    ]
    replies.append(ChatResult(AssistantMessage("all files read"), Usage(1000 + 50 * turns, 8)))
    tools = ScriptedTools({"read": lambda **kw: f"# {kw.get('path')}\n" + "x = 1\n" * 60})
    agent = Agent(
        ScriptedChat(replies), tools, system_prompt="sys", session_dir=folder, max_turns=turns
    )
    outcome = await agent.run("read every module")
    assert outcome.turns_used == turns
    assert outcome.session_path is not None
    return Path(outcome.session_path)
