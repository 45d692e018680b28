"""The loop on a real wire: Agent + OpenAIChat + FakeProviderServer."""

from __future__ import annotations

import asyncio
import time

from agentfsm import Agent, ToolSpec
from agentfsm.adapters.providers import OpenAIChat, RetryPolicy, Timeouts
from agentfsm.conformance._frames import DONE, chunk, openai_url, tool_delta
from agentfsm.testing import FakeProviderServer, Pause, Reply, ScriptedTools

from ...helpers import Recorder


async def test_tool_loop_over_http(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.sse(
            [
                chunk(tool_delta(index=0, id="call_1", name="add", arguments='{"a": 2, "b": 3}')),
                chunk({}, finish="tool_calls"),
                DONE,
            ]
        ),
        Reply.sse(
            [
                chunk({"content": "2 + 3 = "}),
                chunk({"content": "5"}),
                chunk({}, finish="stop"),
                DONE,
            ]
        ),
    )
    tools = ScriptedTools(
        {"add": lambda a, b: str(a + b)}, specs=[ToolSpec("add", "Add two numbers.")]
    )
    model = OpenAIChat("m", base_url=openai_url(server), retry=RetryPolicy(max_attempts=1))
    engine = Agent(model, tools, system_prompt="You add.")
    recorder = Recorder(engine.events)
    outcome = await engine.run("What is 2 + 3?")
    await model.aclose()
    assert outcome.final is not None
    assert outcome.final.content == "2 + 3 = 5"
    seed_events = [e for e in recorder.types if not e.endswith("_delta")]
    assert seed_events == [
        "turn_start",
        "llm_start",
        "llm_end",
        "tool_call_start",
        "tool_call_end",
        "turn_start",
        "llm_start",
        "llm_end",
        "final",
        "turn_end",
    ]
    assert recorder.types.count("text_delta") == 2
    second = server.requests[1].json()["messages"]
    assert second[-2]["tool_calls"][0]["function"] == {
        "name": "add",
        "arguments": '{"a": 2, "b": 3}',
    }
    assert second[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "5"}


async def test_interrupt_cuts_a_streaming_http_call(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.sse([chunk({"content": "thinking..."}), Pause(30), chunk({}, finish="stop"), DONE])
    )
    model = OpenAIChat(
        "m",
        base_url=openai_url(server),
        retry=RetryPolicy(max_attempts=1),
        timeouts=Timeouts(idle=60),
    )
    engine = Agent(model)
    first_delta = asyncio.Event()
    engine.events.on("text_delta", lambda e: first_delta.set())
    task = asyncio.create_task(engine.run("go"))
    await asyncio.wait_for(first_delta.wait(), 5)
    fired = time.monotonic()
    engine.interrupt()
    outcome = await asyncio.wait_for(task, 5)
    await model.aclose()
    assert time.monotonic() - fired < 1.0
    assert outcome.stopped_reason == "aborted"
