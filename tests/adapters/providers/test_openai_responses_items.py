"""OpenAIResponses: how stream items are assembled, and how the reasoning items serialize.

The frames are written by the project after the event types of the OpenAI API reference;
they are not recordings.
"""

from __future__ import annotations

import json
import time

from agentfsm import AssistantMessage, ToolCall, UserMessage
from agentfsm.engine._serialization import dumps, structure_message
from agentfsm.testing import (
    FakeProviderServer,
    Repeat,
    Reply,
    responses_body,
    responses_events,
    tool_reply,
)

from .test_openai_responses import TOOLS, chat, completed, frame


async def test_a_done_item_without_content_keeps_the_streamed_parts(
    server: FakeProviderServer,
) -> None:
    message = {"type": "message", "id": "m", "role": "assistant", "content": []}
    call = {"type": "function_call", "id": "fc", "call_id": "call_9", "name": "lookup"}
    server.enqueue(
        Reply.sse(
            [
                frame("response.output_item.added", output_index=0, item=message),
                frame("response.output_text.delta", output_index=0, item_id="m", delta="Hi "),
                frame("response.output_text.delta", item_id="m", delta="there."),
                frame("response.output_item.done", output_index=0, item=message),
                frame("response.output_item.added", output_index=1, item=call),
                frame("response.function_call_arguments.delta", item_id="fc", delta='{"q":'),
                frame("response.function_call_arguments.delta", item_id="fc", delta=' "x"}'),
                frame("response.output_item.done", output_index=1, item={**call, "arguments": ""}),
                completed([]),
            ]
        )
    )
    model = chat(server)
    result = await model([UserMessage("x")], TOOLS)
    await model.aclose()
    assert result.message.content == "Hi there."
    assert [(c.id, c.arguments) for c in result.message.tool_calls] == [("call_9", {"q": "x"})]


async def test_the_terminal_output_is_read_when_no_item_was_streamed(
    server: FakeProviderServer,
) -> None:
    body = responses_body(tool_reply(("lookup", {"q": "y"}), content="Looking."))
    server.enqueue(Reply.sse([frame("response.completed", response=body)]))
    model = chat(server)
    result = await model([UserMessage("x")], TOOLS)
    await model.aclose()
    assert result.message.content == "Looking."
    assert [(c.name, c.arguments) for c in result.message.tool_calls] == [("lookup", {"q": "y"})]
    assert result.finish_reason == "tool_calls"


def test_messages_without_reasoning_items_serialize_as_before() -> None:
    plain = AssistantMessage("a", tool_calls=[ToolCall("c", "f", {"x": 1})])
    assert json.loads(dumps(plain)) == {
        "content": "a",
        "tool_calls": [{"id": "c", "name": "f", "arguments": {"x": 1}, "raw_arguments": None}],
        "reasoning": None,
        "role": "assistant",
    }
    kept = AssistantMessage(
        "b", reasoning_items=[{"type": "reasoning", "encrypted_content": "\ud800"}]
    )
    assert json.loads(dumps(kept))["reasoning_items"] == [
        {"type": "reasoning", "encrypted_content": "\ud800"}
    ]
    assert structure_message(json.loads(dumps(kept))) == kept


async def test_items_are_read_in_output_order(server: FakeProviderServer) -> None:
    def call(index: int) -> str:
        item = {
            "type": "function_call",
            "id": f"fc_{index}",
            "call_id": f"call_{index}",
            "name": "lookup",
            "arguments": json.dumps({"n": index}),
        }
        return frame("response.output_item.done", output_index=index, item=item)

    server.enqueue(Reply.sse([call(1), call(0), completed([])]))
    model = chat(server)
    result = await model([UserMessage("x")], TOOLS)
    await model.aclose()
    assert [c.arguments for c in result.message.tool_calls] == [{"n": 0}, {"n": 1}]


async def test_a_stream_left_open_after_completion_returns(server: FakeProviderServer) -> None:
    server.enqueue(
        Reply.sse(
            [
                *responses_events("Done."),
                Repeat(": keep-alive\n\n", interval=0.05),
            ]
        )
    )
    model = chat(server)
    started = time.monotonic()
    result = await model([UserMessage("x")], [])
    await model.aclose()
    assert result.message.content == "Done."
    assert time.monotonic() - started < 5
