"""The span tree of a real run: two tool calls in one concurrent batch, a provider retry,
a compression, a policy warning and a policy stop, through the real ``OpenAIChat`` adapter
against ``FakeProviderServer`` and the SDK's in-memory exporter."""

from __future__ import annotations

import json
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from agentfsm import Agent, AssistantMessage, Message, ToolSpec, UserMessage
from agentfsm.adapters.providers import OpenAIChat, ProviderError, RetryPolicy, Router, Timeouts
from agentfsm.conformance._frames import completion, openai_url
from agentfsm.engine._context import RunContext
from agentfsm.engine._policy import Stop, Warn
from agentfsm.testing import FakeProviderServer, Reply, ScriptedTools

from .conftest import Otel, span_tree

FAST = Timeouts(connect=2, first_byte=2, idle=2, terminal_grace=0.3)
RETRY = RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.02, jitter=0)
USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}


def adapter(server: FakeProviderServer, **options: Any) -> OpenAIChat:
    options.setdefault("retry", RETRY)
    return OpenAIChat("m", base_url=openai_url(server), stream=False, timeouts=FAST, **options)


def tool_calls(*calls: tuple[str, str, dict[str, Any]]) -> Reply:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": id_, "type": "function", "function": {"name": name, "arguments": repr_(args)}}
            for id_, name, args in calls
        ],
    }
    return Reply.json(completion(message, finish="tool_calls", usage=USAGE))


def repr_(args: dict[str, Any]) -> str:
    return json.dumps(args)


def text(content: str) -> Reply:
    return Reply.json(completion({"role": "assistant", "content": content}, usage=USAGE))


class TwoTurns:
    """Warns on the first turn, stops the run at the top of the second."""

    name = "two_turns"

    def check_turn(self, ctx: RunContext) -> Stop | Warn:
        if ctx.turn >= 2:
            return Stop("two turns are enough")
        return Warn("first turn", code="first_turn")


def read_tools() -> ScriptedTools:
    return ScriptedTools(
        {"read": lambda path: f"contents of {path}"},
        specs=[ToolSpec("read", "Read a file.", concurrency_safe=True)],
    )


HISTORY: list[Message] = [
    UserMessage(f"q{i}") if i % 2 == 0 else AssistantMessage(f"a{i}") for i in range(11)
]


async def test_the_span_tree_of_a_run(otel: Otel, snapshot: SnapshotAssertion) -> None:
    with FakeProviderServer() as server:
        server.enqueue(
            text("summary of the earlier turns"),  # the compression's call
            Reply.json(
                {"error": {"message": "slow down", "code": "rate_limit_exceeded"}},
                status=429,
                headers={"retry-after": "0"},
            ),
            tool_calls(
                ("call_a", "read", {"path": "a.txt"}), ("call_b", "read", {"path": "b.txt"})
            ),
        )
        chat = adapter(server)
        agent = Agent(
            chat,
            read_tools(),
            policies=[TwoTurns()],
            context_budget_tokens=10,
            instrument=otel.instrumentation(),
        )
        try:
            outcome = await agent.run("go", history=HISTORY)
        finally:
            await chat.aclose()
    assert outcome.stopped_reason == "policy"
    spans = otel.spans()
    assert len({span.context.trace_id for span in spans if span.context}) == 1  # one trace
    (run,) = [s for s in spans if s.parent is None]
    tools = [s for s in spans if s.name == "execute_tool read"]
    assert len(tools) == 2
    assert {t.parent.span_id for t in tools if t.parent} == {run.context.span_id}  # siblings
    # The two calls of the batch overlapped: each started before the other ended.
    first, second = sorted(tools, key=lambda s: s.start_time or 0)
    assert (second.start_time or 0) < (first.end_time or 0)
    assert span_tree(spans) == snapshot


async def test_failover_and_errors_on_chat_spans(otel: Otel) -> None:
    with FakeProviderServer() as first, FakeProviderServer() as second:
        first.enqueue(Reply.json({"error": {"message": "down"}}, status=500))
        second.enqueue(Reply.json({"error": {"message": "bad key"}}, status=401))
        one = adapter(first, name="first", retry=RetryPolicy(max_attempts=1))
        two = adapter(second, name="second", retry=RetryPolicy(max_attempts=1))
        agent = Agent(Router([one, two]), instrument=otel.instrumentation())
        try:
            with pytest.raises(ProviderError, match="bad key"):
                await agent.run("go")
        finally:
            await one.aclose()
            await two.aclose()
    spans = {span.name: span for span in otel.spans()}
    chat = spans["chat m"]
    assert chat.attributes is not None
    assert chat.attributes["error.type"] == "auth"
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.status.status_code.name == "ERROR"
    (failover,) = chat.events
    assert failover.name == "agentfsm.failover"
    assert dict(failover.attributes or {}) == {"agentfsm.provider": "first", "error.type": "server"}
    run = spans["invoke_agent agentfsm"]
    assert run.attributes is not None
    assert run.attributes["error.type"] == "auth"
    assert run.status.status_code.name == "ERROR"
