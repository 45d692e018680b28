"""The engine guide's policy example works as described."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from agentfsm import LoopParams, UserMessage, run_conversation
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

DOCS = Path(__file__).resolve().parents[1] / "docs"
GUIDE = DOCS / "engine.md"


def load_example() -> dict[str, Any]:
    (block,) = re.findall(r"```python\n(.*?)```", GUIDE.read_text("utf-8"), re.S)
    namespace: dict[str, Any] = {}
    exec(compile(block, str(GUIDE), "exec"), namespace)
    return namespace


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
    path = DOCS / "embedding.md"
    (block,) = re.findall(r"```python\n(.*?)```", path.read_text("utf-8"), re.S)
    exec(compile(block, str(path), "exec"), {})
    assert capsys.readouterr().out == "It has 2 words."


async def test_policies_guide_custom_stop_policy() -> None:
    from agentfsm.engine.events import PolicyWarnEvent
    from agentfsm.engine.params import StopInfo

    from .helpers import Recorder

    path = DOCS / "policies.md"
    (block,) = re.findall(r"```python\n(.*?)```", path.read_text("utf-8"), re.S)
    namespace: dict[str, Any] = {}
    exec(compile(block, str(path), "exec"), namespace)
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


def test_providers_guide_example_builds() -> None:
    from agentfsm.adapters.providers import Router

    path = DOCS / "providers.md"
    (block,) = re.findall(r"```python\n(.*?)```", path.read_text("utf-8"), re.S)
    namespace: dict[str, Any] = {}
    exec(compile(block, str(path), "exec"), namespace)
    assert isinstance(namespace["engine"].chat, Router)
    assert namespace["llama"].quirks.stream_with_tools is False


async def test_tools_guide_example() -> None:
    from agentfsm import ToolCall

    path = DOCS / "tools.md"
    block = re.findall(r"```python\n(.*?)```", path.read_text("utf-8"), re.S)[0]
    namespace: dict[str, Any] = {}
    exec(compile(block, str(path), "exec"), namespace)
    tools = namespace["tools"]
    result = await tools.run(ToolCall("1", "forecast", {"city": "Oslo", "days": "many"}))
    assert (
        result.error
        == "invalid arguments for forecast: 'days': Input should be a valid integer, unable to parse string as an integer (got \"many\")"
    )
    assert (
        await tools.run(ToolCall("2", "forecast", {"city": "Oslo"}))
    ).output == "Oslo: sunny for 1 day(s)"
