"""Replies the scripted server sends in the recorded tool checks, in each wire's own shape."""

from __future__ import annotations

from typing import Any

from agentfsm.engine import ToolCall
from agentfsm.testing import Reply, responses_body, responses_reply, tool_reply

from ..._context import RecordedContext
from ..._frames import DONE, chunk, completion, event, response_event

__all__ = [
    "anthropic_block",
    "anthropic_json",
    "anthropic_stream",
    "anthropic_tool_use",
    "openai_json",
    "openai_stream",
    "responses_calls",
    "responses_interleaved",
    "text_reply",
]


def openai_stream(*deltas: dict[str, Any], finish: str = "tool_calls") -> Reply:
    """A Chat Completions stream: a role chunk, ``deltas``, the finish, ``[DONE]``."""
    head = chunk({"role": "assistant", "content": None})
    return Reply.sse([head, *(chunk(d) for d in deltas), chunk({}, finish=finish), DONE])


def openai_json(*calls: dict[str, Any], finish: str = "tool_calls") -> Reply:
    """An unstreamed Chat Completions answer holding ``calls``."""
    message = {"role": "assistant", "content": None, "tool_calls": list(calls)}
    return Reply.json(completion(message, finish=finish))


def anthropic_block(index: int, block: dict[str, Any], *deltas: dict[str, Any]) -> list[str]:
    """The events of one Messages content block: its start, ``deltas``, its stop."""
    return [
        event("content_block_start", {"index": index, "content_block": block}),
        *(event("content_block_delta", {"index": index, "delta": d}) for d in deltas),
        event("content_block_stop", {"index": index}),
    ]


def anthropic_tool_use(
    index: int, call_id: str, name: str, *parts: str, start: Any = None
) -> list[str]:
    """A streamed ``tool_use`` block whose input comes in ``parts`` (or whole in ``start``)."""
    block = {"type": "tool_use", "id": call_id, "name": name, "input": start or {}}
    deltas = ({"type": "input_json_delta", "partial_json": p} for p in parts)
    return anthropic_block(index, block, *deltas)


def anthropic_stream(*blocks: list[str], stop: str = "tool_use") -> Reply:
    """A Messages stream of ``blocks``, ending with ``stop``."""
    start = {"model": "fake-model", "usage": {"input_tokens": 9, "output_tokens": 1}}
    return Reply.sse(
        [
            event("message_start", {"message": start}),
            *(frame for block in blocks for frame in block),
            event("message_delta", {"delta": {"stop_reason": stop}, "usage": {"output_tokens": 9}}),
            event("message_stop", {}),
        ]
    )


def anthropic_json(*uses: tuple[str, str, Any], stop: str = "tool_use", text: str = "") -> Reply:
    """An unstreamed Messages answer: ``text``, then one ``tool_use`` per (id, name, input)."""
    content = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in uses]
    body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "fake-model"}
    usage = {"input_tokens": 9, "output_tokens": 9}
    return Reply.json({**body, "content": content, "stop_reason": stop, "usage": usage})


def responses_calls(*calls: tuple[str, str, str], stream: bool = True) -> Reply:
    """A Responses answer holding one ``function_call`` per (call id, name, arguments text),
    streamed (each item's arguments in two deltas) or not."""
    built = [ToolCall(i, n, {}, raw_arguments=a) for i, n, a in calls]
    return responses_reply(tool_reply(*built), stream=stream)


def responses_interleaved(*calls: tuple[str, str, str]) -> Reply:
    """A Responses stream that opens every call first, then sends their arguments in two
    halves each, the halves of all the calls interleaved by ``output_index``."""
    frames = []
    for index, (call_id, name, _) in enumerate(calls):
        item = {"type": "function_call", "id": f"fc_{index}", "call_id": call_id, "name": name}
        frames.append(
            response_event(
                "response.output_item.added",
                {"output_index": index, "item": {**item, "arguments": ""}},
            )
        )
    for half in (0, 1):
        for index, (_, _, arguments) in enumerate(calls):
            middle = len(arguments) // 2
            piece = arguments[:middle] if half == 0 else arguments[middle:]
            where = {"output_index": index, "item_id": f"fc_{index}", "delta": piece}
            frames.append(response_event("response.function_call_arguments.delta", where))
    final = {**responses_body(""), "output": []}
    return Reply.sse([*frames, response_event("response.completed", {"response": final})])


def text_reply(ctx: RecordedContext) -> Reply:
    """A plain text answer, the one that follows tool results."""
    if ctx.wire == "openai-responses":
        return responses_reply("Sunny.", stream=False)
    if ctx.wire == "anthropic":
        return anthropic_json(stop="end_turn", text="Sunny.")
    return Reply.json(completion({"role": "assistant", "content": "Sunny."}))
