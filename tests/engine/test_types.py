"""Messages, events, the converter, the emitter, abort signals and history helpers."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentfsm import (
    AbortController,
    AbortError,
    AgentEmitter,
    AgentEvent,
    AssistantMessage,
    ChatResult,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    Usage,
    UserMessage,
    converter,
    format_tool_result_content,
    seed_system_prompt,
)
from agentfsm.engine._errors import RecordedError
from agentfsm.engine._events import (
    BudgetExhaustedEvent,
    CompressEndEvent,
    CompressStartEvent,
    ErrorEvent,
    FinalEvent,
    GateEvent,
    LlmEndEvent,
    LlmStartEvent,
    PolicyStopEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from agentfsm.engine._history import tool_message_from_result
from agentfsm.engine._serialization import dumps, structure_event, structure_message

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
tool_calls = st.builds(
    ToolCall, st.text(), st.text(), st.dictionaries(st.text(), json_values, max_size=3)
)
messages = st.one_of(
    st.builds(SystemMessage, st.text()),
    st.builds(UserMessage, st.text()),
    st.builds(
        AssistantMessage,
        st.text(),
        tool_calls=st.lists(tool_calls, max_size=3).map(tuple),
        reasoning=st.none() | st.text(),
    ),
    st.builds(ToolMessage, st.text(), st.text(), is_error=st.booleans()),
)
usages = st.builds(Usage, *(st.integers(min_value=0, max_value=10**9) for _ in range(5)))
results = st.builds(
    ChatResult,
    messages.filter(lambda m: isinstance(m, AssistantMessage)),
    st.none() | usages,
    st.none() | st.text(),
    st.none() | st.text(),
)
tool_results = st.builds(ToolResult, st.booleans(), st.text(), st.none() | st.text())
events = st.one_of(
    st.builds(TurnStartEvent, turn=st.integers(1, 100)),
    st.builds(CompressStartEvent, estimated_tokens=st.integers(0)),
    st.builds(CompressEndEvent, summary_chars=st.integers(0)),
    st.builds(LlmStartEvent, turn=st.integers(1)),
    st.builds(LlmEndEvent, turn=st.integers(1), result=results),
    st.builds(ToolCallStartEvent, turn=st.integers(1), call=tool_calls),
    st.builds(
        ToolCallEndEvent,
        turn=st.integers(1),
        call=tool_calls,
        result=tool_results,
        cancelled=st.booleans(),
    ),
    st.builds(
        FinalEvent,
        message=st.builds(AssistantMessage, st.text()),
        result=results,
    ),
    st.builds(BudgetExhaustedEvent, turns_used=st.integers(1)),
    st.builds(TurnEndEvent, turn=st.integers(1)),
    st.builds(ErrorEvent, error=st.sampled_from([AbortError(), ValueError("bad"), OSError()])),
    st.builds(PolicyStopEvent, turn=st.integers(1), policy=st.text(), reason=st.text()),
    st.builds(GateEvent, turn=st.integers(1), policy=st.text(), reminder=st.text()),
    st.builds(TextDeltaEvent, turn=st.integers(1), text=st.text()),
    st.builds(ThinkingDeltaEvent, turn=st.integers(1), text=st.text()),
)


@given(messages)
def test_messages_round_trip_through_json(message: Message) -> None:
    assert structure_message(json.loads(dumps(message))) == message
    assert structure_message(converter.unstructure(message)) == message


@given(events)
def test_events_round_trip_through_json(event: AgentEvent) -> None:
    data = converter.unstructure(event)
    assert data["type"] == event.type
    assert structure_event(json.loads(dumps(event))) == event


def test_error_events_keep_name_and_message() -> None:
    data = converter.unstructure(ErrorEvent(error=AbortError()))
    assert data == {
        "type": "error",
        "error": {"name": "AbortError", "message": "agent loop aborted"},
    }
    back = structure_event(data)
    assert isinstance(back, ErrorEvent)
    assert isinstance(back.error, RecordedError)
    assert back.error.name == "AbortError"


def test_unknown_discriminators_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown message role 'robot'"):
        structure_message({"role": "robot", "content": "x"})
    with pytest.raises(ValueError, match="unknown event type"):
        structure_event({"type": "nope"})


def test_messages_are_frozen_with_role_discriminators() -> None:
    message = AssistantMessage("hi", tool_calls=[ToolCall("1", "t", {})])
    assert message.tool_calls == (ToolCall("1", "t", {}),)
    assert message.role == "assistant"
    assert ToolMessage("1", "x").role == "tool"
    with pytest.raises(AttributeError):
        message.content = "other"  # type: ignore[misc]


def test_usage_adds_field_by_field() -> None:
    total = Usage(10, 5, 2, 1, 3) + Usage(1, 1, 1, 1, 1)
    assert total == Usage(11, 6, 3, 2, 4)
    assert total.total_tokens == 17


# -- emitter -------------------------------------------------------------------------------


def test_emitter_calls_handlers_in_registration_order() -> None:
    emitter = AgentEmitter()
    calls: list[str] = []
    emitter.on("turn_start", lambda e: calls.append("typed-1"))
    emitter.on("*", lambda e: calls.append("star"))
    emitter.on("turn_start", lambda e: calls.append("typed-2"))
    emitter.on("turn_end", lambda e: calls.append("other"))
    emitter.emit(TurnStartEvent(turn=1))
    assert calls == ["typed-1", "star", "typed-2"]


def test_unsubscribe_stops_delivery_and_is_idempotent() -> None:
    emitter = AgentEmitter()
    calls: list[int] = []
    off = emitter.on("turn_start", lambda e: calls.append(e.turn))
    emitter.emit(TurnStartEvent(turn=1))
    off()
    off()
    emitter.emit(TurnStartEvent(turn=2))
    assert calls == [1]
    assert len(emitter) == 0


def test_handlers_may_unsubscribe_mid_emit() -> None:
    emitter = AgentEmitter()
    calls: list[str] = []
    offs: dict[str, Any] = {}

    def first(event: Any) -> None:
        calls.append("first")
        offs["first"]()
        offs["second"]()  # the snapshot taken at emit time still includes second

    offs["first"] = emitter.on("*", first)
    offs["second"] = emitter.on("*", lambda e: calls.append("second"))
    emitter.emit(TurnStartEvent(turn=1))
    emitter.emit(TurnStartEvent(turn=2))
    assert calls == ["first", "second"]


def test_handler_errors_are_logged_and_swallowed(caplog: pytest.LogCaptureFixture) -> None:
    emitter = AgentEmitter()
    calls: list[str] = []

    def bad(event: Any) -> None:
        raise RuntimeError("handler bug")

    emitter.on("*", bad)
    emitter.on("*", lambda e: calls.append("after"))
    with caplog.at_level(logging.ERROR, logger="agentfsm"):
        emitter.emit(TurnStartEvent(turn=1))
    assert calls == ["after"]
    assert "handler bug" in caplog.text


# -- abort ---------------------------------------------------------------------------------


async def test_abort_controller_signal() -> None:
    controller = AbortController()
    signal = controller.signal
    assert not signal.aborted
    waiter = asyncio.create_task(signal.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    fired: list[str] = []
    signal.add_callback(lambda: fired.append("cb"))
    controller.abort("stop")
    await asyncio.wait_for(waiter, 1)
    assert controller.signal.aborted
    assert controller.signal.reason == "stop"
    assert fired == ["cb"]
    controller.abort("again")  # later calls do nothing
    assert controller.signal.reason == "stop"
    await asyncio.wait_for(signal.wait(), 1)  # already aborted: returns at once


async def test_abort_from_another_thread_wakes_waiters() -> None:
    controller = AbortController()
    waiter = asyncio.create_task(controller.signal.wait())
    await asyncio.sleep(0)
    thread = threading.Thread(target=controller.abort)
    thread.start()
    await asyncio.wait_for(waiter, 2)
    thread.join()
    assert controller.signal.aborted


# -- history helpers -----------------------------------------------------------------------


def test_seed_system_prompt_prepends_when_missing() -> None:
    messages: list[Message] = [UserMessage("hi")]
    seeded = seed_system_prompt(messages, "be brief")
    assert seeded == [SystemMessage("be brief"), UserMessage("hi")]
    assert messages == [UserMessage("hi")]


def test_seed_system_prompt_keeps_identical_content() -> None:
    messages: list[Message] = [SystemMessage("be brief"), UserMessage("hi")]
    seeded = seed_system_prompt(messages, "be brief")
    assert seeded == messages
    assert seeded is not messages


def test_seed_system_prompt_replaces_different_content_in_place() -> None:
    messages: list[Message] = [UserMessage("first"), SystemMessage("old"), UserMessage("hi")]
    seeded = seed_system_prompt(messages, "new")
    assert seeded == [UserMessage("first"), SystemMessage("new"), UserMessage("hi")]
    assert messages[1] == SystemMessage("old")


def test_seed_system_prompt_none_copies() -> None:
    messages: list[Message] = [UserMessage("hi")]
    seeded = seed_system_prompt(messages, None)
    assert seeded == messages
    assert seeded is not messages


def test_format_tool_result_content() -> None:
    assert format_tool_result_content(ToolResult(True, "raw out")) == "raw out"
    assert (
        format_tool_result_content(ToolResult(False, "part", "boom"))
        == '{"ok":false,"output":"part","error":"boom"}'
    )
    assert format_tool_result_content(ToolResult(False, "é", None)) == (
        '{"ok":false,"output":"é","error":null}'
    )
    call = ToolCall("c9", "t", {})
    assert tool_message_from_result(call, ToolResult(False, "", "x")).is_error
    assert tool_message_from_result(call, ToolResult(True, "y")) == ToolMessage("c9", "y")
