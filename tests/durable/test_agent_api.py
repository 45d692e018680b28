"""``Agent.submit`` / ``Agent.gather``: durable runs started from the agent class."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentfsm import Agent
from agentfsm.adapters.durable import DurableRuntime, RunSpec, list_runs, register_agent_factory
from agentfsm.testing import ScriptedChat, ScriptedTools, ScriptItem, tool_reply

CALLS: list[tuple[int, int]] = []


def build(spec: RunSpec) -> Agent:
    session_dir = Path(spec.session_path).parent

    def add(a: int, b: int) -> str:
        CALLS.append((a, b))
        return str(a + b)

    replies: list[ScriptItem] = [tool_reply(("add", {"a": 2, "b": 3})), "5"]
    return Agent(
        ScriptedChat(replies),
        ScriptedTools({"add": add}),
        session_dir=session_dir,
        durable_factory="tests.agent_api.adder",
    )


register_agent_factory("tests.agent_api.adder", build)


async def test_submit_and_gather_on_the_agent(runtime: DurableRuntime, tmp_path: Path) -> None:
    CALLS.clear()
    agent = build(RunSpec(prompt="", factory="", session_path=str(tmp_path / "s" / "x.jsonl")))
    first = await agent.submit("2 + 3?")
    second = await agent.submit("2 + 3 again?")
    outcomes = await agent.gather([first, second])
    assert [o.final.content if o.final else None for o in outcomes] == ["5", "5"]
    assert CALLS == [(2, 3), (2, 3)]
    assert all(Path(o.session_path or "").parent == tmp_path / "s" for o in outcomes)
    # Submitting a finished id again runs nothing.
    assert await agent.submit("2 + 3?", run_id=first) == first
    assert (await agent.gather([first]))[0].final is not None
    assert CALLS == [(2, 3), (2, 3)]
    assert await asyncio.to_thread(list_runs) == []


async def test_submit_needs_a_factory_name_and_a_session_dir(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="durable_factory"):
        await Agent(ScriptedChat(["x"]), session_dir=tmp_path).submit("x")
    with pytest.raises(ValueError, match="session_dir"):
        await Agent(ScriptedChat(["x"]), durable_factory="f").submit("x")
