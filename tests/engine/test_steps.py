"""Every effect with a cost or a side effect goes through the step seam."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from agentfsm import Agent, LoopParams, Message, UserMessage, run_conversation
from agentfsm.engine._compression import COMPRESSION_SYSTEM_PROMPT
from agentfsm.engine._steps import current_step_runner
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

T = TypeVar("T")


class Recording:
    def __init__(self) -> None:
        self.names: list[str] = []

    async def __call__(self, name: str, effect: Callable[[], Awaitable[T]]) -> T:
        self.names.append(name)
        return await effect()


async def test_chat_calls_tool_calls_and_compression_are_steps() -> None:
    def model(messages: Sequence[Message]) -> Any:
        if messages[0].content == COMPRESSION_SYSTEM_PROMPT:
            return "summary"
        calls = sum(m.role == "assistant" for m in messages)
        return tool_reply(("t", {}), ("t", {})) if calls < 1 else "done"

    steps = Recording()
    token = current_step_runner.set(steps)
    try:
        history: list[Message] = [UserMessage(f"q{i}" * 50) for i in range(12)]
        outcome = await run_conversation(
            ScriptedChat(model),
            ScriptedTools({"t": lambda: "ok"}),
            history,
            LoopParams(max_turns=3, context_budget_tokens=50),
        )
    finally:
        current_step_runner.reset(token)
    assert outcome.stopped_reason == "final"
    assert steps.names[0] == "chat"  # the compression summary
    assert steps.names.count("tool t") == 2
    assert steps.names.count("chat") >= 3


async def test_without_a_step_runner_effects_just_run() -> None:
    assert current_step_runner.get() is None
    outcome = await Agent(ScriptedChat(["hi"])).run("x")
    assert outcome.final is not None


async def test_a_step_inside_a_step_is_part_of_it() -> None:
    from agentfsm.engine._steps import run_step

    steps = Recording()

    async def inner() -> int:
        return 1

    async def outer() -> int:
        return await run_step("inner", inner) + 1

    token = current_step_runner.set(steps)
    try:
        assert await run_step("outer", outer) == 2
    finally:
        current_step_runner.reset(token)
    assert steps.names == ["outer"]


async def test_the_preamble_and_the_verify_gate_read_the_workspace_in_steps(tmp_path: Any) -> None:
    from agentfsm.agent import WorkspacePreamble
    from agentfsm.engine._messages import ToolResult, ToolSpec
    from agentfsm.policies import verify
    from agentfsm.sandbox import Unsandboxed

    (tmp_path / "Makefile").write_text("check:\n\ttrue\n", "utf-8")

    def write() -> ToolResult:
        (tmp_path / "a.txt").write_text("x", "utf-8")
        return ToolResult(True, "wrote a.txt", metadata={"path": "a.txt"})

    steps = Recording()
    token = current_step_runner.set(steps)
    try:
        agent = Agent(
            ScriptedChat([tool_reply(("write", {})), "done"]),
            ScriptedTools({"write": write}, specs=[ToolSpec("write", "Write.", destructive=True)]),
            policies=[verify(workspace=tmp_path, target="check", sandbox=Unsandboxed())],
            preamble=WorkspacePreamble(tmp_path),
        )
        outcome = await agent.run("x")
    finally:
        current_step_runner.reset(token)
    assert outcome.stopped_reason == "final"
    # the first turn's read, and the final gate's read again before it runs the check
    assert steps.names == [
        "preamble",
        "verify_definition",
        "chat",
        "tool write",
        "chat",
        "verify_definition",
        "verify",
    ]


def test_a_recorded_error_pickles() -> None:
    import pickle

    from agentfsm.engine._errors import RecordedError

    error = RecordedError("ProviderError", "boom")
    back = pickle.loads(pickle.dumps(error))
    assert (back.name, str(back)) == ("ProviderError", "boom")
