"""The guides' examples behave as the text says (tests/test_doc_blocks.py runs every block)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentfsm import LoopParams, UserMessage, run_conversation
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from .test_doc_blocks import block_defining

DOCS = Path(__file__).resolve().parents[1] / "docs"
GUIDE = DOCS / "engine.md"


def run_block(path: Path, name: str) -> dict[str, Any]:
    """Run the block of ``path`` that defines ``name``; its namespace."""
    namespace: dict[str, Any] = {}
    exec(compile(block_defining(path, name), str(path), "exec"), namespace)
    return namespace


def load_example() -> dict[str, Any]:
    return run_block(GUIDE, "StopAfterTools")


async def test_guide_turn_gate_stops_after_twenty_tools() -> None:
    example = load_example()
    chat = ScriptedChat([tool_reply(*[("t", {})] * 10)] * 5)
    outcome = await run_conversation(
        chat,
        ScriptedTools({"t": lambda: "ok"}),
        [UserMessage("go")],
        LoopParams(max_turns=10),
        policies=[example["StopAfterTools"]()],
    )
    assert outcome.stopped_reason == "policy"
    assert outcome.stop is not None
    assert outcome.stop.policy == "stop_after_tools"
    assert outcome.turns_used == 2


async def test_guide_final_gate_asks_for_a_source() -> None:
    example = load_example()
    chat = ScriptedChat(["Paris.", "Paris (https://en.wikipedia.org/wiki/Paris)."])
    outcome = await run_conversation(
        chat,
        None,
        [UserMessage("Capital of France?")],
        LoopParams(max_turns=3),
        policies=[example["MustCite"]()],
    )
    assert outcome.final is not None
    assert outcome.final.content.startswith("Paris (https://")
    assert "Cite a source URL" in chat.requests[1].messages[-1].content


def test_embedding_guide_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    run_block(DOCS / "embedding.md", "agent")
    assert capsys.readouterr().out == "It has 2 words."


async def test_policies_guide_custom_stop_policy() -> None:
    from agentfsm.engine._events import PolicyWarnEvent
    from agentfsm.engine._params import StopInfo

    from .helpers import Recorder

    namespace = run_block(DOCS / "policies.md", "StopOnRepeatedFetch")
    policy = namespace["StopOnRepeatedFetch"]()
    url = "https://example.org/a"
    chat = ScriptedChat([tool_reply(("fetch", {"url": url}))] * 5)
    recorder = Recorder()
    outcome = await run_conversation(
        chat,
        ScriptedTools({"fetch": lambda url: "<html>"}),
        [UserMessage("research")],
        LoopParams(max_turns=10),
        emitter=recorder.emitter,
        policies=[policy],
    )
    assert outcome.stopped_reason == "policy"
    assert outcome.stop == StopInfo("stop_on_repeated_fetch(3)", f"fetched {url} 3 times")
    assert outcome.turns_used == 3
    warns = recorder.of(PolicyWarnEvent)
    assert [(w.turn, w.reason) for w in warns] == [(3, f"fetched {url} 2 times")]
    # The model never saw the warning: no request mentions it.
    assert all("2 times" not in str(r.messages) for r in chat.requests)


def test_policies_guide_custom_stop_policy_is_incremental() -> None:
    """It reads only the previous turn's calls and its own state, never the history."""
    from agentfsm import Stop, ToolCall, ToolResult, Warn
    from agentfsm.engine._context import ToolOutcome

    policy = run_block(DOCS / "policies.md", "StopOnRepeatedFetch")["StopOnRepeatedFetch"]()
    states: dict[int, Any] = {}

    class Context:
        """Only what an incremental turn gate may read: no ``history`` at all."""

        def __init__(self) -> None:
            self.turn_tools: list[ToolOutcome] = []

        def state(self, owner: object, factory: Any) -> Any:
            return states.setdefault(id(owner), factory())

    def fetch(url: str) -> ToolOutcome:
        return ToolOutcome(ToolCall("c", "fetch", {"url": url}), ToolResult(True, "<html>"))

    ctx = Context()
    verdicts = []
    for calls in ([fetch("a"), fetch("b")], [], [fetch("a")], [fetch("b")], [fetch("a")]):
        ctx.turn_tools = calls
        verdicts.append(policy.check_turn(ctx))
    assert verdicts == [
        None,
        None,
        Warn("fetched a 2 times"),
        Warn("fetched b 2 times"),
        Stop("fetched a 3 times"),
    ]


def test_providers_guide_example_builds() -> None:
    from agentfsm.adapters.providers import Router

    namespace = run_block(DOCS / "providers.md", "agent")
    assert isinstance(namespace["agent"].chat, Router)
    assert namespace["llama"].quirks.stream_with_tools is False


async def test_tools_guide_example() -> None:
    from agentfsm import ToolCall

    tools = run_block(DOCS / "tools.md", "tools")["tools"]
    result = await tools.run(ToolCall("1", "forecast", {"city": "Oslo", "days": "many"}))
    assert (
        result.error
        == "invalid arguments for forecast: 'days': Input should be a valid integer, unable to parse string as an integer (got \"many\")"
    )
    assert (
        await tools.run(ToolCall("2", "forecast", {"city": "Oslo"}))
    ).output == "Oslo: sunny for 1 day(s)"
