"""``ScriptedChat``: script functions see the whole request; ``Streamed`` replies stream."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from agentfsm import (
    AbortController,
    Agent,
    AgentEmitter,
    AssistantMessage,
    ChatResult,
    LoopParams,
    Message,
    ToolSpec,
    Usage,
    UserMessage,
    run_conversation,
)
from agentfsm.engine._events import TextDeltaEvent, ThinkingDeltaEvent
from agentfsm.engine._protocols import ChatDelta
from agentfsm.testing import (
    ChatRequest,
    EventRecorder,
    ScriptedChat,
    ScriptedTools,
    ScriptItem,
    Streamed,
    tool_reply,
)

TOOLS = (ToolSpec("search", "Search."),)


async def test_a_script_function_gets_the_tools_and_call_parameters() -> None:
    seen: list[ChatRequest] = []

    def script(request: ChatRequest) -> ScriptItem:
        seen.append(request)
        return "ok"

    controller = AbortController()
    chat = ScriptedChat(script)
    message = UserMessage("q")
    await chat([message], TOOLS, temperature=0.2, max_tokens=9, signal=controller.signal)
    (request,) = seen
    assert request.messages == (message,)
    assert request.tools == TOOLS
    assert request.temperature == 0.2
    assert request.max_tokens == 9
    assert request.signal is controller.signal
    assert chat.requests == [request]


async def test_a_function_of_the_messages_still_gets_them_as_passed() -> None:
    given: list[Sequence[Message]] = []

    def script(messages: Sequence[Message]) -> str:
        given.append(messages)
        return f"{len(messages)} messages"

    history: list[Message] = [UserMessage("a"), UserMessage("b")]
    result = await ScriptedChat(script)(history, TOOLS)
    assert result.message.content == "2 messages"
    assert given[0] is history


async def test_an_unannotated_function_gets_the_request_which_is_also_the_messages() -> None:
    chat = ScriptedChat(lambda request: f"{len(request)} messages, {len(request.tools)} tools")
    result = await chat([UserMessage("a"), UserMessage("b")], TOOLS)
    assert result.message.content == "2 messages, 1 tools"
    request = chat.requests[0]
    assert request[0] == UserMessage("a")
    assert list(request) == [UserMessage("a"), UserMessage("b")]
    assert request[-1:] == (UserMessage("b"),)
    assert UserMessage("b") in request


def test_requests_keep_their_old_constructor_and_compare_without_the_signal() -> None:
    old = ChatRequest((UserMessage("a"),), (), 0.5, 10)
    assert old.signal is None
    assert old == ChatRequest((UserMessage("a"),), (), 0.5, 10, AbortController().signal)
    assert ChatRequest((UserMessage("a"),)) == ChatRequest((UserMessage("a"),), (), None, None)


async def test_streamed_pieces_reach_on_delta_before_the_joined_result() -> None:
    chat = ScriptedChat([Streamed(["Hel", "lo"], thinking=["Gre", "et."])], usage=Usage(2, 3))
    deltas: list[ChatDelta] = []
    result = await chat([UserMessage("hi")], (), on_delta=deltas.append)
    assert deltas == [
        ChatDelta("thinking", "Gre"),
        ChatDelta("thinking", "et."),
        ChatDelta("text", "Hel"),
        ChatDelta("text", "lo"),
    ]
    assert result == ChatResult(
        AssistantMessage("Hello", reasoning="Greet."), Usage(2, 3), "stop", "scripted"
    )


async def test_streamed_without_a_delta_handler_still_answers() -> None:
    result = await ScriptedChat([Streamed(["a", "b"])])([], ())
    assert result.message == AssistantMessage("ab")


async def test_streamed_then_gives_tool_calls_usage_and_finish_reason() -> None:
    calls = tool_reply(("search", {"q": "x"}))
    as_message = Streamed(["Let me ", "look."], then=calls)
    as_result = Streamed(["Cut"], then=ChatResult(AssistantMessage(), Usage(5, 1), "length", "m"))
    chat = ScriptedChat([as_message, as_result])
    first = await chat([], TOOLS)
    assert first.message == AssistantMessage("Let me look.", tool_calls=calls.tool_calls)
    assert first.finish_reason == "tool_calls"
    second = await chat([], TOOLS)
    assert second == ChatResult(AssistantMessage("Cut"), Usage(5, 1), "length", "m")


async def test_chunks_may_interleave_text_and_thinking() -> None:
    item = Streamed(["a", ChatDelta("thinking", "hmm"), "b"])
    deltas: list[ChatDelta] = []
    result = await ScriptedChat([item])([], (), on_delta=deltas.append)
    assert [(d.kind, d.text) for d in deltas] == [("text", "a"), ("thinking", "hmm"), ("text", "b")]
    assert result.message == AssistantMessage("ab", reasoning="hmm")


def test_then_must_not_contradict_the_streamed_text() -> None:
    with pytest.raises(ValueError, match="not the streamed text"):
        Streamed(["Hello"], then=AssistantMessage("Goodbye"))
    with pytest.raises(ValueError, match="not the streamed reasoning"):
        Streamed(["Hi"], then=AssistantMessage(reasoning="other"))
    same = Streamed(["Hel", "lo"], thinking=["r"], then=AssistantMessage("Hello", reasoning="r"))
    assert same.text == "Hello"
    assert same.reasoning == "r"
    assert Streamed(["x"]).reasoning is None


async def test_a_function_may_return_a_streamed_reply() -> None:
    async def script(request: ChatRequest) -> ScriptItem:
        if request.tools:
            return Streamed(["Searching"], then=tool_reply(("search", {"q": "y"})))
        return Streamed(["No tools."])

    deltas: list[ChatDelta] = []
    with_tools = await ScriptedChat(script)([], TOOLS, on_delta=deltas.append)
    assert [c.name for c in with_tools.message.tool_calls] == ["search"]
    assert deltas == [ChatDelta("text", "Searching")]
    without = await ScriptedChat(script)([], ())
    assert without.message.content == "No tools."


async def test_pieces_yield_to_other_tasks() -> None:
    order: list[str] = []

    async def other() -> None:
        order.append("other")

    chat = ScriptedChat([Streamed(["a", "b"])])
    task = asyncio.ensure_future(chat([], (), on_delta=lambda d: order.append(d.text)))
    await asyncio.gather(task, other())
    assert order == ["a", "other", "b"]


async def test_run_conversation_sees_tools_params_and_the_joined_text() -> None:
    seen: list[ChatRequest] = []
    controller = AbortController()

    def script(request: ChatRequest) -> ScriptItem:
        seen.append(request)
        if len(seen) == 1:
            return Streamed(["Looking ", "it up."], then=tool_reply(("search", {"q": "z"})))
        return Streamed(["Found ", "it."])

    emitter = AgentEmitter()
    recorder = EventRecorder.attach(emitter)
    outcome = await run_conversation(
        ScriptedChat(script),
        ScriptedTools({"search": lambda q: f"result for {q}"}),
        [UserMessage("find z")],
        LoopParams(max_turns=3, temperature=0.1, max_tokens=50, signal=controller.signal),
        emitter=emitter,
    )
    assert outcome.final is not None
    assert outcome.final.content == "Found it."
    assert [s.name for s in seen[0].tools] == ["search"]
    assert {(r.temperature, r.max_tokens) for r in seen} == {(0.1, 50)}
    assert all(r.signal is controller.signal for r in seen)
    (first_end, _) = [e.result.message.content for e in recorder.of_type("llm_end")]
    assert first_end == "Looking it up."


async def test_agent_emits_a_text_delta_per_chunk() -> None:
    engine = Agent(ScriptedChat([Streamed(["Hel", "lo", "!"], thinking=["Be ", "nice."])]))
    recorder = EventRecorder.attach(engine.events)
    outcome = await engine.run("hi")
    assert outcome.final is not None
    assert outcome.final.content == "Hello!"
    assert [e.text for e in recorder.of_type(TextDeltaEvent)] == ["Hel", "lo", "!"]
    assert [e.text for e in recorder.of_type(ThinkingDeltaEvent)] == ["Be ", "nice."]
    start = recorder.types.index("llm_start")
    end = recorder.types.index("llm_end")
    assert recorder.types[start + 1 : end] == ["thinking_delta"] * 2 + ["text_delta"] * 3
