"""Tool checks: how calls are streamed, indexed, named, argued and sent back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentfsm.engine.messages import (
    ChatResult,
    ToolMessage,
    UserMessage,
)
from agentfsm.testing import Reply

from ..context import TOOL_WEATHER, TOOL_WITHOUT_ARGS, RecordedContext
from ..frames import DONE, chunk, completion, event
from ..frames import tool_delta as _d
from ..model import Check, CheckFailed, CheckSkipped, Normalized
from .tools_live import (
    OPENAI_ONLY,
    P_TEXT,
    PARIS,
    T_TEXT,
    TOKYO,
    T,
    W,
    _oa_call,
    agent_loop_live,
    foreign_ids_live,
    no_args_live,
    none_live,
    parallel_flag_live,
    parallel_live,
    parallel_results_live,
    single_forced_live,
    stream_auto_live,
    stream_equals_nonstream_live,
    unicode_args_live,
)

__all__ = ["CHECKS"]

Calls = Sequence[tuple[str, dict[str, Any]]]
# -- scripted replies --------------------------------------------------------------------


def _oa_stream(*deltas: dict[str, Any], finish: str = "tool_calls") -> Reply:
    head = chunk({"role": "assistant", "content": None})
    return Reply.sse([head, *(chunk(d) for d in deltas), chunk({}, finish=finish), DONE])


def _oa_json(*calls: dict[str, Any], finish: str = "tool_calls") -> Reply:
    message = {"role": "assistant", "content": None, "tool_calls": list(calls)}
    return Reply.json(completion(message, finish=finish))


def _an_block(index: int, block: dict[str, Any], *deltas: dict[str, Any]) -> list[str]:
    return [
        event("content_block_start", {"index": index, "content_block": block}),
        *(event("content_block_delta", {"index": index, "delta": d}) for d in deltas),
        event("content_block_stop", {"index": index}),
    ]


def _an_use(index: int, call_id: str, name: str, *parts: str, start: Any = None) -> list[str]:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": start or {}}
    return _an_block(
        index, block, *({"type": "input_json_delta", "partial_json": p} for p in parts)
    )


def _an_stream(*blocks: list[str], stop: str = "tool_use") -> Reply:
    start = {"model": "fake-model", "usage": {"input_tokens": 9, "output_tokens": 1}}
    return Reply.sse(
        [
            event("message_start", {"message": start}),
            *(frame for block in blocks for frame in block),
            event("message_delta", {"delta": {"stop_reason": stop}, "usage": {"output_tokens": 9}}),
            event("message_stop", {}),
        ]
    )


def _an_json(*uses: tuple[str, str, Any], stop: str = "tool_use", text: str = "") -> Reply:
    content = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in uses]
    body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "fake-model"}
    usage = {"input_tokens": 9, "output_tokens": 9}
    return Reply.json({**body, "content": content, "stop_reason": stop, "usage": usage})


def _text_reply(ctx: RecordedContext) -> Reply:
    if ctx.wire == "anthropic":
        return _an_json(stop="end_turn", text="Sunny.")
    return Reply.json(completion({"role": "assistant", "content": "Sunny."}))


def _expect(result: ChatResult, calls: Calls, case: str, quirks: tuple[str, ...] = ()) -> None:
    """``result`` holds exactly ``calls`` (name, arguments), with distinct ids."""
    got = [
        (c.name, c.arguments if c.raw_arguments is None else c.raw_arguments)
        for c in result.message.tool_calls
    ]
    if got != list(calls):
        raise CheckFailed(f"{case}: the calls {list(calls)}", repr(got), quirks=quirks)
    ids = [c.id for c in result.message.tool_calls]
    if not all(ids) or len(set(ids)) != len(ids):
        raise CheckFailed(f"{case}: distinct non-empty ids", repr(ids), quirks=quirks)
    if result.finish_reason != "tool_calls":
        got_finish = repr(result.finish_reason)
        raise CheckFailed(f"{case}: finish_reason 'tool_calls'", got_finish, quirks=quirks)


async def _cases(
    ctx: RecordedContext, cases: dict[str, Reply], calls: Calls, quirks: tuple[str, ...] = ()
) -> list[ChatResult]:
    """Script each reply, ask for it and check it holds ``calls``."""
    ctx.script(*cases.values())
    results = [await ctx.ask(tools=[TOOL_WEATHER, TOOL_WITHOUT_ARGS]) for _ in cases]
    for case, result in zip(cases, results, strict=True):
        _expect(result, calls, case, quirks)
    return results


async def _send_back(ctx: RecordedContext, reply: ChatResult) -> list[dict[str, Any]]:
    """Send ``reply``'s calls back with a result each; the messages as the server got them."""
    results = [
        ToolMessage(c.id, f"{c.arguments.get('city')}: sunny") for c in reply.message.tool_calls
    ]
    ctx.script(_text_reply(ctx))
    await ctx.ask(messages=[UserMessage("Weather?"), reply.message, *results], tools=[TOOL_WEATHER])
    messages: list[dict[str, Any]] = ctx.requests[-1].json()["messages"]
    return messages


# -- checks --------------------------------------------------------------------------------


async def single_forced(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        streamed = _an_stream(_an_use(0, "toolu_01", W, '{"city": ', '"Paris"}'))
        cases = {"streamed": streamed, "unstreamed": _an_json(("toolu_01", W, PARIS))}
    else:
        cases = {
            "streamed": _oa_stream(_d(0, "call_1", W, ""), _d(0, arguments=P_TEXT)),
            "unstreamed": _oa_json(_oa_call("call_1", W, P_TEXT)),
            "unstreamed, id ''": _oa_json(_oa_call("", W, P_TEXT)),
        }
    for case, result in zip(cases, await _cases(ctx, cases, [(W, PARIS)], ("Q8",)), strict=True):
        call_id = result.message.tool_calls[0].id
        if "''" not in case and call_id not in ("call_1", "toolu_01"):
            raise CheckFailed(f"{case}: the id sent by the server", repr(call_id))
    if ctx.wire == "anthropic":
        return None
    return Normalized(("Q8",), "an empty tool-call id was replaced by a generated one")


async def stop_reason_inferred(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        cases = {
            "streamed, end_turn": _an_stream(_an_use(0, "toolu_01", W, P_TEXT), stop="end_turn"),
            "unstreamed, end_turn": _an_json(("toolu_01", W, PARIS), stop="end_turn"),
        }
    else:
        cases = {
            "streamed, stop": _oa_stream(_d(0, "call_1", W, P_TEXT), finish="stop"),
            "unstreamed, stop": _oa_json(_oa_call("call_1", W, P_TEXT), finish="stop"),
        }
    await _cases(ctx, cases, [(W, PARIS)], ("Q9", "Q10"))
    return Normalized(("Q9", "Q10"), "tool calls with a 'stop' finish reported as 'tool_calls'")


async def no_index(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        raise CheckSkipped(OPENAI_ONLY)
    head, tail = '{"city": ', '"Paris"}'
    single = {
        "one call in fragments": _oa_stream(_d(None, "call_1", W, head), _d(arguments=tail)),
        "arguments before the name": _oa_stream(
            _d(arguments=head), _d(None, "call_1", W), _d(arguments=tail)
        ),
    }
    await _cases(ctx, single, [(W, PARIS)], ("Q1", "Q2"))
    multi = {
        "two whole calls": _oa_stream(_d(None, "call_1", W, P_TEXT), _d(None, "call_2", W, T_TEXT)),
        "two calls in fragments": _oa_stream(
            _d(None, "call_1", W, head),
            _d(arguments=tail),
            _d(None, "call_2", W, head),
            _d(arguments='"Tokyo"}'),
        ),
        "two whole calls, no id": _oa_stream(_d(None, None, W, P_TEXT), _d(None, None, W, T_TEXT)),
        "two whole calls, empty ids": _oa_stream(_d(None, "", W, P_TEXT), _d(None, "", W, T_TEXT)),
    }
    await _cases(ctx, multi, [(W, PARIS), (W, TOKYO)], ("Q1", "Q8"))
    return Normalized(("Q1", "Q2"), "tool-call deltas without index, arguments before the name")


async def repeated_id_name(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        raise CheckSkipped(OPENAI_ONLY)
    parts = ["", '{"ci', 'ty": ', '"Paris"}']
    cases = {
        "indexed": _oa_stream(*(_d(0, "call_1", W, p) for p in parts)),
        "without index": _oa_stream(*(_d(None, "call_1", W, p) for p in parts)),
    }
    results = await _cases(ctx, cases, [(W, PARIS)], ("Q5", "Q6"))
    pairs = zip(parts, ["", '{"ci', 'ty": ', '"Tokyo"}'], strict=True)
    two = _oa_stream(*(d for p, o in pairs for d in (_d(0, "call_1", W, p), _d(1, "call_2", W, o))))
    results += await _cases(ctx, {"two calls": two}, [(W, PARIS), (W, TOKYO)], ("Q5",))
    ids = [c.id for r in results for c in r.message.tool_calls]
    if ids != ["call_1", "call_1", "call_1", "call_2"]:
        raise CheckFailed("the ids as sent, never concatenated", repr(ids), quirks=("Q5", "Q6"))
    return Normalized(("Q5",), "the full id and name repeated in every chunk")


async def args_shapes(ctx: RecordedContext) -> Normalized | None:
    head, tail = P_TEXT[:5], P_TEXT[5:]
    if ctx.wire == "anthropic":
        cases = {
            "one fragment": _an_stream(_an_use(0, "toolu_01", W, P_TEXT)),
            "many fragments": _an_stream(_an_use(0, "toolu_01", W, *P_TEXT)),
            "first fragment ''": _an_stream(_an_use(0, "toolu_01", W, "", head, tail)),
            "input in content_block_start": _an_stream(_an_use(0, "toolu_01", W, start=PARIS)),
            "unstreamed": _an_json(("toolu_01", W, PARIS)),
        }
    else:
        cases = {
            "object arguments": _oa_stream(_d(0, "call_1", W, PARIS)),
            "object arguments, unstreamed": _oa_json(_oa_call("call_1", W, PARIS)),
            "one whole string": _oa_stream(_d(0, "call_1", W, P_TEXT)),
            "many fragments": _oa_stream(_d(0, "call_1", W), *(_d(0, arguments=c) for c in P_TEXT)),
            "first fragment ''": _oa_stream(
                _d(0, "call_1", W, ""), _d(0, arguments=head), _d(0, arguments=tail)
            ),
        }
    first = (await _cases(ctx, cases, [(W, PARIS)], ("Q3", "Q13")))[0]
    turn = next(m for m in await _send_back(ctx, first) if m["role"] == "assistant")
    if ctx.wire == "anthropic":
        sent = [b.get("input") for b in turn["content"] if b.get("type") == "tool_use"]
        if sent != [PARIS]:
            raise CheckFailed("the tool_use input sent back as an object", repr(sent))
        return Normalized(("Q13",), "arguments in one, many or empty-first fragments")
    sent = turn["tool_calls"][0]["function"]["arguments"]
    if not isinstance(sent, str) or json.loads(sent) != PARIS:
        raise CheckFailed("arguments sent back as a JSON string", repr(sent), quirks=("Q4",))
    return Normalized(("Q3", "Q13"), "object, whole, fragmented and empty-first arguments")


async def no_args(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        cases = {
            "streamed, no delta": _an_stream(_an_use(0, "toolu_01", T)),
            "streamed, partial_json ''": _an_stream(_an_use(0, "toolu_01", T, "")),
            "unstreamed": _an_json(("toolu_01", T, {})),
        }
    else:
        cases = {
            "streamed, arguments ''": _oa_stream(_d(0, "call_1", T, "")),
            "streamed, no arguments": _oa_stream(_d(0, "call_1", T)),
            "streamed, '{}'": _oa_stream(_d(0, "call_1", T, "{}")),
            "unstreamed, ''": _oa_json(_oa_call("call_1", T, "")),
            "unstreamed, '{}'": _oa_json(_oa_call("call_1", T, "{}")),
        }
    await _cases(ctx, cases, [(T, {})], ("Q13",))
    return Normalized(("Q13",), "a parameterless call with no, empty or '{}' arguments")


async def parallel(ctx: RecordedContext) -> Normalized | None:
    both = [(W, PARIS), (W, TOKYO)]
    if ctx.wire == "anthropic":
        text = _an_block(0, {"type": "text", "text": ""}, {"type": "text_delta", "text": "Both."})
        uses = _an_use(1, "toolu_01", W, P_TEXT[:6], P_TEXT[6:]), _an_use(2, "toolu_02", W, T_TEXT)
        unstreamed = _an_json(("toolu_01", W, PARIS), ("toolu_02", W, TOKYO))
        first = (
            await _cases(ctx, {"streamed": _an_stream(text, *uses), "unstreamed": unstreamed}, both)
        )[0]
        sent = (await _send_back(ctx, first))[-1]["content"]
        answered = [b.get("tool_use_id") for b in sent if b.get("type") == "tool_result"]
        if answered != ["toolu_01", "toolu_02"]:
            raise CheckFailed(
                "both tool_results in the next user turn", repr(sent), quirks=("Q34",)
            )
        return None
    cases = {
        "interleaved by index": _oa_stream(
            _d(0, "call_1", W, ""),
            _d(1, "call_2", W, ""),
            *(_d(i, arguments=a[:6]) for i, a in enumerate((P_TEXT, T_TEXT))),
            *(_d(i, arguments=a[6:]) for i, a in enumerate((P_TEXT, T_TEXT))),
        ),
        "one id for both": _oa_stream(_d(0, "call_1", W, P_TEXT), _d(1, "call_1", W, T_TEXT)),
        "unstreamed, one id for both": _oa_json(
            _oa_call("call_1", W, P_TEXT), _oa_call("call_1", W, T_TEXT)
        ),
    }
    first = (await _cases(ctx, cases, both, ("Q7",)))[1]
    sent = await _send_back(ctx, first)
    offered = [c["id"] for m in sent for c in m.get("tool_calls") or []]
    answered = [m.get("tool_call_id") for m in sent if m["role"] == "tool"]
    if len(set(answered)) != 2 or answered != offered:
        got = f"calls {offered}, results {answered}"
        raise CheckFailed("two results sent back with two distinct ids", got, quirks=("Q7",))
    return Normalized(("Q7",), "one id reused for parallel calls; the adapter made them distinct")


async def trailing_empty_delta(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        raise CheckSkipped(OPENAI_ONLY)
    call = chunk(_d(0, "call_1", W, P_TEXT))

    def ending(last: dict[str, Any]) -> Reply:
        return Reply.sse(
            [chunk({"role": "assistant"}), call, chunk(last, finish="tool_calls"), DONE]
        )

    cases = {
        "indexed": ending(_d(0, arguments="")),
        "same index, id and name": ending(_d(0, "call_1", W, "")),
        "no index, same id": ending(_d(None, "call_1", W, "")),
        "no index, no id": ending(_d(arguments="")),
    }
    await _cases(ctx, cases, [(W, PARIS)], ("Q11",))
    return Normalized(("Q11",), "a final chunk with an empty arguments delta and the finish")


# fmt: off
CHECKS = [
    Check("T1", "tools.single_forced", "tools", "a named tool_choice (scripted: a call, id '' too)",
          "one call, the exact name, arguments as a dict, a non-empty id, finish 'tool_calls'",
          needs=("tools",), quirks=("Q8", "Q10"), recorded=single_forced, live=single_forced_live),
    Check("T2", "tools.stop_reason_inferred", "tools", "tool calls with finish_reason 'stop'",
          "finish normalized to 'tool_calls'", needs=("tools",), quirks=("Q9", "Q10"),
          recorded=stop_reason_inferred),
    Check("T3", "tools.no_index", "tools", "tool-call deltas without index, one and two calls",
          "calls reassembled, none merged", needs=("tools",), quirks=("Q1", "Q2"),
          recorded=no_index),
    Check("T4", "tools.repeated_id_name", "tools", "the full id and name in every chunk",
          "id and name not concatenated", needs=("tools",), quirks=("Q5", "Q6"),
          recorded=repeated_id_name),
    Check("T5", "tools.args_shapes", "tools", "arguments: object, whole, fragments, '' first",
          "the same parsed arguments; sent back as a string", needs=("tools",),
          quirks=("Q3", "Q4", "Q13"), recorded=args_shapes),
    Check("T6", "tools.no_args", "tools", "a call of a parameterless tool, streamed and not",
          "arguments {}", needs=("tools",), quirks=("Q13",), recorded=no_args, live=no_args_live),
    Check("T7", "tools.stream_equals_nonstream", "tools", "one tool request streamed and not",
          "equal names and arguments; one finish; role once", needs=("tools", "streaming"),
          quirks=("Q12",), live=stream_equals_nonstream_live),
    Check("T8", "tools.parallel", "tools", "two independent lookups (scripted: one id for both)",
          "two calls, distinct ids, each parses; both results sent back",
          needs=("tools", "parallel_tools"), quirks=("Q7",), recorded=parallel, live=parallel_live),
    Check("T9", "tools.parallel_results", "tools", "two tool results returned together",
          "accepted; the answer uses both", needs=("tools", "parallel_tools"), quirks=("Q34",),
          live=parallel_results_live),
    Check("T10", "tools.parallel_flag", "tools", "parallel_tool_calls: false, tools or none",
          "no 400, or noted (the adapter never sends it)", needs=("tools",), quirks=("Q33",),
          live=parallel_flag_live),
    Check("T11", "tools.none", "tools", "tools bound, 'say hello'; tool_choice none", "no calls",
          needs=("tools",), live=none_live),
    Check("T12", "tools.unicode_args", "tools", "a CJK argument", "no \\uXXXX in the parsed value",
          needs=("tools",), live=unicode_args_live),
    Check("T13", "tools.trailing_empty_delta", "tools", "a last chunk: empty arguments + finish",
          "no phantom second call", needs=("tools",), quirks=("Q11",),
          recorded=trailing_empty_delta),
    Check("T14", "tools.foreign_ids", "tools", "a history with ids abc123, toolu_…, 60 chars",
          "accepted; ids within the provider's limit", needs=("tools",), quirks=("Q6",),
          live=foreign_ids_live),
    Check("T15", "tools.agent_loop", "tools", "call → result → answer", "a two-turn success",
          needs=("tools",), live=agent_loop_live),
    Check("T16", "tools.stream_auto", "tools", "tools + tool_choice auto, streamed",
          "a stream with a finish record; an empty 200 is an error, never an empty success",
          needs=("tools", "streaming"), quirks=("Q26",), live=stream_auto_live),
]
# fmt: on
