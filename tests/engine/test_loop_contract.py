"""The core loop contract (seed 000), rule by rule; every run is held to
python-statemachine's engine event by event (the ``oracle`` fixture)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from agentfsm import (
    AbortController,
    AbortError,
    AssistantMessage,
    ChatResult,
    LoopParams,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    Usage,
    UserMessage,
    run_conversation,
)
from agentfsm.engine._events import ErrorEvent, ToolCallEndEvent
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from ..helpers import Recorder
from ..oracle import Oracle

SCENARIO_A = [
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


def echo_tools(**extra: Any) -> ScriptedTools:
    return ScriptedTools({"echo": lambda text: f"echo: {text}", **extra})


async def test_scenario_a_event_order(
    oracle: Oracle, recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    chat = ScriptedChat([tool_reply(("echo", {"text": "hi"})), "done"])
    outcome = await run_conversation(
        chat,
        echo_tools(),
        [UserMessage("say hi")],
        LoopParams(max_turns=5),
        emitter=recorder.emitter,
    )
    assert recorder.types == SCENARIO_A
    assert outcome.stopped_reason == "final"
    assert outcome.turns_used == 2
    assert outcome.final == AssistantMessage("done")
    assert outcome.result is not None
    assert outcome.result.message == outcome.final
    assert recorder.view() == snapshot


async def test_final_on_turn_one(
    oracle: Oracle, recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    chat = ScriptedChat(["hello"])
    outcome = await run_conversation(
        chat,
        echo_tools(),
        [UserMessage("hi")],
        LoopParams(max_turns=3),
        emitter=recorder.emitter,
    )
    assert recorder.types == ["turn_start", "llm_start", "llm_end", "final", "turn_end"]
    assert outcome.stopped_reason == "final"
    assert outcome.turns_used == 1
    assert chat.calls == 1
    assert recorder.view() == snapshot


async def test_empty_tool_calls_array_is_final(oracle: Oracle) -> None:
    chat = ScriptedChat([AssistantMessage("answer", tool_calls=())])
    outcome = await run_conversation(
        chat, echo_tools(), [UserMessage("q")], LoopParams(max_turns=1)
    )
    assert outcome.stopped_reason == "final"
    assert outcome.final == AssistantMessage("answer")


async def test_three_tool_calls_consume_one_turn(
    oracle: Oracle, recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    tools = echo_tools()
    chat = ScriptedChat(
        [
            tool_reply(("echo", {"text": "a"}), ("echo", {"text": "b"}), ("echo", {"text": "c"})),
            "all three done",
        ]
    )
    outcome = await run_conversation(
        chat,
        tools,
        [UserMessage("go")],
        LoopParams(max_turns=2),
        emitter=recorder.emitter,
    )
    # max_turns counts LLM calls, not tools: three tools and a final answer fit in 2 turns.
    assert outcome.stopped_reason == "final"
    assert outcome.turns_used == 2
    assert [c.arguments["text"] for c in tools.calls] == ["a", "b", "c"]
    assert recorder.types.count("llm_start") == 2
    starts = [e.call.id for e in recorder.events if e.type == "tool_call_start"]
    assert starts == ["call_1", "call_2", "call_3"]
    # Each tool call is started and ended before the next one starts.
    kinds = [e.type for e in recorder.events if e.type.startswith("tool_call")]
    assert kinds == ["tool_call_start", "tool_call_end"] * 3
    assert recorder.view() == snapshot


async def test_budget_path_cancels_last_turn_calls(
    oracle: Oracle, recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    tools = echo_tools()
    chat = ScriptedChat(
        [
            tool_reply(("echo", {"text": "1"})),
            tool_reply(ToolCall("late_a", "echo", {"text": "2"}), ToolCall("late_b", "echo", {})),
        ]
    )
    caller = [UserMessage("loop forever")]
    outcome = await run_conversation(
        chat, tools, caller, LoopParams(max_turns=2), emitter=recorder.emitter
    )
    assert outcome.stopped_reason == "budget"
    assert outcome.turns_used == 2
    assert outcome.final is None
    assert outcome.result is not None
    assert outcome.result.message.tool_calls[0].id == "late_a"
    # The last turn's calls never ran ...
    assert [c.arguments["text"] for c in tools.calls] == ["1"]
    # ... each was closed by a cancelled tool_call_end with no start ...
    assert recorder.types == [
        "turn_start",
        "llm_start",
        "llm_end",
        "tool_call_start",
        "tool_call_end",
        "turn_start",
        "llm_start",
        "llm_end",
        "tool_call_end",
        "tool_call_end",
        "budget_exhausted",
        "turn_end",
    ]
    cancelled = [e for e in recorder.of(ToolCallEndEvent) if e.cancelled]
    assert [e.call.id for e in cancelled] == ["late_a", "late_b"]
    assert all(e.result == ToolResult(False, "", "turn_budget_exhausted") for e in cancelled)
    # ... and their turn_budget_exhausted results are in the history too.
    tail = outcome.messages[-2:]
    assert all(isinstance(m, ToolMessage) and m.is_error for m in tail)
    assert [m.tool_call_id for m in tail if isinstance(m, ToolMessage)] == ["late_a", "late_b"]
    assert json.loads(tail[0].content) == {
        "ok": False,
        "output": "",
        "error": "turn_budget_exhausted",
    }
    assert recorder.events[-2].turns_used == 2  # type: ignore[union-attr]
    assert recorder.view() == snapshot


async def test_budget_with_max_turns_one(oracle: Oracle, recorder: Recorder) -> None:
    tools = echo_tools()
    chat = ScriptedChat([tool_reply(("echo", {"text": "x"}))])
    outcome = await run_conversation(
        chat,
        tools,
        [UserMessage("x")],
        LoopParams(max_turns=1),
        emitter=recorder.emitter,
    )
    assert outcome.stopped_reason == "budget"
    assert outcome.turns_used == 1
    assert tools.calls == []
    assert recorder.types == [
        "turn_start",
        "llm_start",
        "llm_end",
        "tool_call_end",
        "budget_exhausted",
        "turn_end",
    ]


async def test_abort_before_turn_one(
    oracle: Oracle, recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    controller = AbortController()
    controller.abort()
    chat = ScriptedChat(["never"])
    outcome = await run_conversation(
        chat,
        echo_tools(),
        [UserMessage("x")],
        LoopParams(max_turns=3, signal=controller.signal),
        emitter=recorder.emitter,
    )
    assert chat.calls == 0
    assert outcome.stopped_reason == "aborted"
    assert outcome.turns_used == 0
    assert outcome.result is None
    assert outcome.final is None
    assert recorder.types == ["turn_start", "error"]
    (error_event,) = recorder.of(ErrorEvent)
    assert isinstance(error_event.error, AbortError)
    assert str(error_event.error) == "agent loop aborted"
    assert recorder.view() == snapshot


async def test_signal_fired_mid_turn_lets_the_turn_finish(
    oracle: Oracle, recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    controller = AbortController()
    finished: list[str] = []

    def first(text: str) -> str:
        controller.abort("user pressed stop")
        finished.append(text)
        return "first done"

    def second(text: str) -> str:
        finished.append(text)
        return "second done"

    tools = ScriptedTools({"first": first, "second": second})
    chat = ScriptedChat(
        [tool_reply(("first", {"text": "a"}), ("second", {"text": "b"})), "never asked"]
    )
    outcome = await run_conversation(
        chat,
        tools,
        [UserMessage("x")],
        LoopParams(max_turns=5, signal=controller.signal),
        emitter=recorder.emitter,
    )
    # The whole batch ran although the signal fired during its first call ...
    assert finished == ["a", "b"]
    # ... and the next turn noticed at its top, before any LLM call.
    assert chat.calls == 1
    assert outcome.stopped_reason == "aborted"
    assert outcome.turns_used == 1
    assert outcome.result is None
    assert recorder.types[-2:] == ["turn_start", "error"]
    assert [m.role for m in outcome.messages] == ["user", "assistant", "tool", "tool"]
    assert recorder.view() == snapshot


class Boom(Exception):
    pass


async def test_provider_error_is_logged_emitted_and_reraised(
    oracle: Oracle,
    recorder: Recorder,
    snapshot: SnapshotAssertion,
    caplog: pytest.LogCaptureFixture,
) -> None:
    error = Boom("upstream 503 after retries")
    chat = ScriptedChat([tool_reply(("echo", {"text": "a"})), error])
    caller = [UserMessage("x")]
    with caplog.at_level(logging.ERROR, logger="agentfsm"), pytest.raises(Boom) as raised:
        await run_conversation(
            chat,
            echo_tools(),
            caller,
            LoopParams(max_turns=5),
            emitter=recorder.emitter,
        )
    assert raised.value is error
    # llm_end never fires for the failed call, and nothing follows the error.
    assert recorder.types == [
        "turn_start",
        "llm_start",
        "llm_end",
        "tool_call_start",
        "tool_call_end",
        "turn_start",
        "llm_start",
        "error",
    ]
    assert recorder.events[-1] == ErrorEvent(error=error)
    assert any("upstream 503" in r.getMessage() for r in caplog.records)
    assert caller == [UserMessage("x")]
    assert recorder.view() == snapshot


async def test_provider_error_on_first_call(oracle: Oracle, recorder: Recorder) -> None:
    chat = ScriptedChat([AbortError("request aborted")])
    with pytest.raises(AbortError):
        await run_conversation(
            chat,
            None,
            [UserMessage("x")],
            LoopParams(max_turns=2),
            emitter=recorder.emitter,
        )
    # A mid-flight abort surfaces as a thrown error, not as stopped_reason "aborted".
    assert recorder.types == ["turn_start", "llm_start", "error"]


async def test_tool_error_is_data(
    oracle: Oracle, recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    def broken(path: str) -> ToolResult:
        return ToolResult(False, "partial", f"no such file: {path}")

    def crashing() -> str:
        raise RuntimeError("disk on fire")

    tools = ScriptedTools({"read": broken, "crash": crashing, "echo": lambda text: text})
    chat = ScriptedChat(
        [
            tool_reply(("read", {"path": "a.txt"}), ("crash", {}), ("echo", {"text": "fine"})),
            "recovered",
        ]
    )
    outcome = await run_conversation(
        chat,
        tools,
        [UserMessage("x")],
        LoopParams(max_turns=3),
        emitter=recorder.emitter,
    )
    assert outcome.stopped_reason == "final"
    read_msg, crash_msg, echo_msg = outcome.messages[2:5]
    assert read_msg == ToolMessage(
        "call_1", '{"ok":false,"output":"partial","error":"no such file: a.txt"}', is_error=True
    )
    assert isinstance(crash_msg, ToolMessage)
    assert crash_msg.is_error
    assert json.loads(crash_msg.content)["error"] == "RuntimeError: disk on fire"
    assert echo_msg == ToolMessage("call_3", "fine", is_error=False)
    # The model saw the errors on its next call.
    assert chat.requests[1].messages[2:5] == (read_msg, crash_msg, echo_msg)
    assert recorder.view() == snapshot


async def test_runner_that_raises_still_yields_a_failed_result(oracle: Oracle) -> None:
    class RaisingRunner:
        def specs(self) -> tuple[()]:
            return ()

        async def run(self, call: ToolCall, *, signal: object = None) -> ToolResult:
            raise ValueError("bad runner")

    chat = ScriptedChat([tool_reply(("anything", {})), "ok"])
    outcome = await run_conversation(
        chat, RaisingRunner(), [UserMessage("x")], LoopParams(max_turns=3)
    )
    assert outcome.stopped_reason == "final"
    message = outcome.messages[2]
    assert isinstance(message, ToolMessage)
    assert message.is_error
    assert "bad runner" in message.content


async def test_unknown_tool_is_a_failed_result_not_an_exception(oracle: Oracle) -> None:
    chat = ScriptedChat([tool_reply(("nope", {})), "ok"])
    outcome = await run_conversation(
        chat, echo_tools(), [UserMessage("x")], LoopParams(max_turns=3)
    )
    message = outcome.messages[2]
    assert isinstance(message, ToolMessage)
    assert message.is_error
    assert "unknown tool 'nope'" in json.loads(message.content)["error"]


async def test_caller_list_is_never_mutated_and_history_is_the_working_copy(
    oracle: Oracle,
) -> None:
    seen_lists: list[int] = []

    def script(messages: Any) -> Any:
        seen_lists.append(id(messages))
        return tool_reply(("echo", {"text": "x"})) if len(seen_lists) < 3 else "done"

    caller: list[Message] = [SystemMessage("old"), UserMessage("x")]
    snapshot_of_caller = list(caller)
    outcome = await run_conversation(
        ScriptedChat(script),
        echo_tools(),
        caller,
        LoopParams(max_turns=5, system_prompt="new"),
    )
    assert caller == snapshot_of_caller
    assert outcome.messages is not caller
    assert outcome.messages[0] == SystemMessage("new")
    # Every call saw the same list object, mutated in place, and the outcome returns it.
    assert len(set(seen_lists)) == 1
    assert seen_lists[0] == id(outcome.messages)
    assert [m.role for m in outcome.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]


async def test_params_pass_through_and_usage_totals(oracle: Oracle) -> None:
    usage = Usage(input_tokens=100, output_tokens=10, cache_read_tokens=40)
    chat = ScriptedChat(
        [
            ChatResult(tool_reply(("echo", {"text": "a"})), usage),
            ChatResult(AssistantMessage("ok"), usage),
        ]
    )
    outcome = await run_conversation(
        chat,
        echo_tools(),
        [UserMessage("x")],
        LoopParams(max_turns=3, temperature=0.2, max_tokens=64),
    )
    assert [(r.temperature, r.max_tokens) for r in chat.requests] == [(0.2, 64), (0.2, 64)]
    assert chat.requests[0].tools == tuple(echo_tools().specs())
    assert outcome.usage == Usage(200, 20, cache_read_tokens=80)


async def test_final_fires_at_most_once_and_only_on_a_real_final(oracle: Oracle) -> None:
    recorder = Recorder()
    chat = ScriptedChat([tool_reply(("echo", {"text": "a"}))] * 3)
    await run_conversation(
        chat,
        echo_tools(),
        [UserMessage("x")],
        LoopParams(max_turns=3),
        emitter=recorder.emitter,
    )
    assert "final" not in recorder.types


def test_max_turns_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        LoopParams(max_turns=0)
    with pytest.raises(ValueError, match="compress_threshold"):
        LoopParams(max_turns=1, compress_threshold=0)
    with pytest.raises(TypeError, match="aborted"):
        LoopParams(max_turns=1, signal=object())  # type: ignore[arg-type]
