"""Tool checks in recorded mode: how scripted calls are streamed, indexed, named, argued and
sent back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentfsm.engine import ChatResult, ToolMessage, UserMessage
from agentfsm.testing import Reply

from ..._context import TOOL_WEATHER, TOOL_WITHOUT_ARGS, RecordedContext
from ..._frames import DONE, chunk, tool_delta
from ..._model import CheckFailed, CheckSkipped, Normalized
from .fixtures import (
    GET_TIME,
    GET_WEATHER,
    OPENAI_ONLY,
    PARIS_ARGS,
    PARIS_JSON,
    TOKYO_ARGS,
    TOKYO_JSON,
    openai_call,
)
from .scripted import (
    anthropic_block,
    anthropic_json,
    anthropic_stream,
    anthropic_tool_use,
    openai_json,
    openai_stream,
    responses_calls,
    responses_interleaved,
    text_reply,
)

__all__ = [
    "args_shapes",
    "no_args",
    "no_index",
    "parallel",
    "repeated_id_name",
    "single_forced",
    "stop_reason_inferred",
    "trailing_empty_delta",
]

Calls = Sequence[tuple[str, dict[str, Any]]]
PARIS_ONLY: Calls = [(GET_WEATHER, PARIS_ARGS)]
"""The calls expected: the weather in Paris."""
PARIS_AND_TOKYO: Calls = [(GET_WEATHER, PARIS_ARGS), (GET_WEATHER, TOKYO_ARGS)]
"""The calls expected: the weather in Paris, then in Tokyo."""

# -- asking and sending back ---------------------------------------------------------------


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
    ctx.script(text_reply(ctx))
    await ctx.ask(messages=[UserMessage("Weather?"), reply.message, *results], tools=[TOOL_WEATHER])
    key = "input" if ctx.wire == "openai-responses" else "messages"
    messages: list[dict[str, Any]] = ctx.requests[-1].json()[key]
    return messages


# -- checks --------------------------------------------------------------------------------


async def single_forced(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "openai-responses":
        call = ("call_1", GET_WEATHER, PARIS_JSON)
        cases = {
            "streamed": responses_calls(call),
            "unstreamed": responses_calls(call, stream=False),
        }
        for case, result in zip(cases, await _cases(ctx, cases, PARIS_ONLY), strict=True):
            if result.message.tool_calls[0].id != "call_1":
                got = repr(result.message.tool_calls[0].id)
                raise CheckFailed(f"{case}: the call_id sent by the server", got)
        return None
    if ctx.wire == "anthropic":
        streamed = anthropic_stream(
            anthropic_tool_use(0, "toolu_01", GET_WEATHER, '{"city": ', '"Paris"}')
        )
        cases = {
            "streamed": streamed,
            "unstreamed": anthropic_json(("toolu_01", GET_WEATHER, PARIS_ARGS)),
        }
    else:
        cases = {
            "streamed": openai_stream(
                tool_delta(0, "call_1", GET_WEATHER, ""), tool_delta(0, arguments=PARIS_JSON)
            ),
            "unstreamed": openai_json(openai_call("call_1", GET_WEATHER, PARIS_JSON)),
            "unstreamed, id ''": openai_json(openai_call("", GET_WEATHER, PARIS_JSON)),
        }
    for case, result in zip(cases, await _cases(ctx, cases, PARIS_ONLY, ("Q8",)), strict=True):
        call_id = result.message.tool_calls[0].id
        if "''" not in case and call_id not in ("call_1", "toolu_01"):
            raise CheckFailed(f"{case}: the id sent by the server", repr(call_id))
    if ctx.wire == "anthropic":
        return None
    return Normalized(("Q8",), "an empty tool-call id was replaced by a generated one")


async def stop_reason_inferred(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        cases = {
            "streamed, end_turn": anthropic_stream(
                anthropic_tool_use(0, "toolu_01", GET_WEATHER, PARIS_JSON), stop="end_turn"
            ),
            "unstreamed, end_turn": anthropic_json(
                ("toolu_01", GET_WEATHER, PARIS_ARGS), stop="end_turn"
            ),
        }
    else:
        cases = {
            "streamed, stop": openai_stream(
                tool_delta(0, "call_1", GET_WEATHER, PARIS_JSON), finish="stop"
            ),
            "unstreamed, stop": openai_json(
                openai_call("call_1", GET_WEATHER, PARIS_JSON), finish="stop"
            ),
        }
    await _cases(ctx, cases, PARIS_ONLY, ("Q9", "Q10"))
    return Normalized(("Q9", "Q10"), "tool calls with a 'stop' finish reported as 'tool_calls'")


async def no_index(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        raise CheckSkipped(OPENAI_ONLY)
    head, tail = '{"city": ', '"Paris"}'
    single = {
        "one call in fragments": openai_stream(
            tool_delta(None, "call_1", GET_WEATHER, head), tool_delta(arguments=tail)
        ),
        "arguments before the name": openai_stream(
            tool_delta(arguments=head),
            tool_delta(None, "call_1", GET_WEATHER),
            tool_delta(arguments=tail),
        ),
    }
    await _cases(ctx, single, PARIS_ONLY, ("Q1", "Q2"))
    multi = {
        "two whole calls": openai_stream(
            tool_delta(None, "call_1", GET_WEATHER, PARIS_JSON),
            tool_delta(None, "call_2", GET_WEATHER, TOKYO_JSON),
        ),
        "two calls in fragments": openai_stream(
            tool_delta(None, "call_1", GET_WEATHER, head),
            tool_delta(arguments=tail),
            tool_delta(None, "call_2", GET_WEATHER, head),
            tool_delta(arguments='"Tokyo"}'),
        ),
        "two whole calls, no id": openai_stream(
            tool_delta(None, None, GET_WEATHER, PARIS_JSON),
            tool_delta(None, None, GET_WEATHER, TOKYO_JSON),
        ),
        "two whole calls, empty ids": openai_stream(
            tool_delta(None, "", GET_WEATHER, PARIS_JSON),
            tool_delta(None, "", GET_WEATHER, TOKYO_JSON),
        ),
    }
    await _cases(ctx, multi, PARIS_AND_TOKYO, ("Q1", "Q8"))
    return Normalized(("Q1", "Q2"), "tool-call deltas without index, arguments before the name")


async def repeated_id_name(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        # LiteLLM's Messages route: one tool_use block per chunk, all with the call's id.
        parts = ['{"ci', 'ty": ', '"Par', 'is"}']
        blocks = [anthropic_tool_use(i, "toolu_01", GET_WEATHER, p) for i, p in enumerate(parts)]
        case = {"one tool_use block per chunk, one id": anthropic_stream(*blocks)}
        result = (await _cases(ctx, case, PARIS_ONLY, ("Q40",)))[0]
        if [c.id for c in result.message.tool_calls] != ["toolu_01"]:
            got = repr([c.id for c in result.message.tool_calls])
            raise CheckFailed("the id as sent", got, quirks=("Q40",))
        note = f"{len(parts)} consecutive tool_use blocks with one id read as one call"
        return Normalized(("Q40",), note)
    parts = ["", '{"ci', 'ty": ', '"Paris"}']
    cases = {
        "indexed": openai_stream(*(tool_delta(0, "call_1", GET_WEATHER, p) for p in parts)),
        "without index": openai_stream(
            *(tool_delta(None, "call_1", GET_WEATHER, p) for p in parts)
        ),
    }
    results = await _cases(ctx, cases, PARIS_ONLY, ("Q5", "Q6"))
    pairs = zip(parts, ["", '{"ci', 'ty": ', '"Tokyo"}'], strict=True)
    two = openai_stream(
        *(
            d
            for p, o in pairs
            for d in (
                tool_delta(0, "call_1", GET_WEATHER, p),
                tool_delta(1, "call_2", GET_WEATHER, o),
            )
        )
    )
    results += await _cases(ctx, {"two calls": two}, PARIS_AND_TOKYO, ("Q5",))
    ids = [c.id for r in results for c in r.message.tool_calls]
    if ids != ["call_1", "call_1", "call_1", "call_2"]:
        raise CheckFailed("the ids as sent, never concatenated", repr(ids), quirks=("Q5", "Q6"))
    return Normalized(("Q5",), "the full id and name repeated in every chunk")


async def args_shapes(ctx: RecordedContext) -> Normalized | None:
    head, tail = PARIS_JSON[:5], PARIS_JSON[5:]
    if ctx.wire == "anthropic":
        cases = {
            "one fragment": anthropic_stream(
                anthropic_tool_use(0, "toolu_01", GET_WEATHER, PARIS_JSON)
            ),
            "many fragments": anthropic_stream(
                anthropic_tool_use(0, "toolu_01", GET_WEATHER, *PARIS_JSON)
            ),
            "first fragment ''": anthropic_stream(
                anthropic_tool_use(0, "toolu_01", GET_WEATHER, "", head, tail)
            ),
            "input in content_block_start": anthropic_stream(
                anthropic_tool_use(0, "toolu_01", GET_WEATHER, start=PARIS_ARGS)
            ),
            "unstreamed": anthropic_json(("toolu_01", GET_WEATHER, PARIS_ARGS)),
        }
    else:
        cases = {
            "object arguments": openai_stream(tool_delta(0, "call_1", GET_WEATHER, PARIS_ARGS)),
            "object arguments, unstreamed": openai_json(
                openai_call("call_1", GET_WEATHER, PARIS_ARGS)
            ),
            "one whole string": openai_stream(tool_delta(0, "call_1", GET_WEATHER, PARIS_JSON)),
            "many fragments": openai_stream(
                tool_delta(0, "call_1", GET_WEATHER),
                *(tool_delta(0, arguments=c) for c in PARIS_JSON),
            ),
            "first fragment ''": openai_stream(
                tool_delta(0, "call_1", GET_WEATHER, ""),
                tool_delta(0, arguments=head),
                tool_delta(0, arguments=tail),
            ),
        }
    first = (await _cases(ctx, cases, PARIS_ONLY, ("Q3", "Q13")))[0]
    turn = next(m for m in await _send_back(ctx, first) if m["role"] == "assistant")
    if ctx.wire == "anthropic":
        sent = [b.get("input") for b in turn["content"] if b.get("type") == "tool_use"]
        if sent != [PARIS_ARGS]:
            raise CheckFailed("the tool_use input sent back as an object", repr(sent))
        return Normalized(("Q13",), "arguments in one, many or empty-first fragments")
    sent = turn["tool_calls"][0]["function"]["arguments"]
    if not isinstance(sent, str) or json.loads(sent) != PARIS_ARGS:
        raise CheckFailed("arguments sent back as a JSON string", repr(sent), quirks=("Q4",))
    return Normalized(("Q3", "Q13"), "object, whole, fragmented and empty-first arguments")


async def no_args(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "openai-responses":
        cases = {
            f"{how}, arguments {text!r}": responses_calls(
                ("call_1", GET_TIME, text), stream=how == "streamed"
            )
            for how in ("streamed", "unstreamed")
            for text in ("", "{}")
        }
        await _cases(ctx, cases, [(GET_TIME, {})])
        return None
    if ctx.wire == "anthropic":
        cases = {
            "streamed, no delta": anthropic_stream(anthropic_tool_use(0, "toolu_01", GET_TIME)),
            "streamed, partial_json ''": anthropic_stream(
                anthropic_tool_use(0, "toolu_01", GET_TIME, "")
            ),
            "unstreamed": anthropic_json(("toolu_01", GET_TIME, {})),
        }
    else:
        cases = {
            "streamed, arguments ''": openai_stream(tool_delta(0, "call_1", GET_TIME, "")),
            "streamed, no arguments": openai_stream(tool_delta(0, "call_1", GET_TIME)),
            "streamed, '{}'": openai_stream(tool_delta(0, "call_1", GET_TIME, "{}")),
            "unstreamed, ''": openai_json(openai_call("call_1", GET_TIME, "")),
            "unstreamed, '{}'": openai_json(openai_call("call_1", GET_TIME, "{}")),
        }
    await _cases(ctx, cases, [(GET_TIME, {})], ("Q13",))
    return Normalized(("Q13",), "a parameterless call with no, empty or '{}' arguments")


async def parallel(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "openai-responses":
        calls = (("call_1", GET_WEATHER, PARIS_JSON), ("call_2", GET_WEATHER, TOKYO_JSON))
        cases = {
            "interleaved by output_index": responses_interleaved(*calls),
            "unstreamed": responses_calls(*calls, stream=False),
        }
        first = (await _cases(ctx, cases, PARIS_AND_TOKYO))[0]
        sent = await _send_back(ctx, first)
        offered = [i.get("call_id") for i in sent if i.get("type") == "function_call"]
        answered = [i.get("call_id") for i in sent if i.get("type") == "function_call_output"]
        if offered != ["call_1", "call_2"] or answered != offered:
            got = f"calls {offered}, results {answered}"
            raise CheckFailed("both function_call_output items, in order", got)
        return None
    if ctx.wire == "anthropic":
        text = anthropic_block(
            0, {"type": "text", "text": ""}, {"type": "text_delta", "text": "Both."}
        )
        uses = (
            anthropic_tool_use(1, "toolu_01", GET_WEATHER, PARIS_JSON[:6], PARIS_JSON[6:]),
            anthropic_tool_use(2, "toolu_02", GET_WEATHER, TOKYO_JSON),
        )
        unstreamed = anthropic_json(
            ("toolu_01", GET_WEATHER, PARIS_ARGS), ("toolu_02", GET_WEATHER, TOKYO_ARGS)
        )
        first = (
            await _cases(
                ctx,
                {"streamed": anthropic_stream(text, *uses), "unstreamed": unstreamed},
                PARIS_AND_TOKYO,
            )
        )[0]
        sent = (await _send_back(ctx, first))[-1]["content"]
        answered = [b.get("tool_use_id") for b in sent if b.get("type") == "tool_result"]
        if answered != ["toolu_01", "toolu_02"]:
            raise CheckFailed(
                "both tool_results in the next user turn", repr(sent), quirks=("Q34",)
            )
        return None
    cases = {
        "interleaved by index": openai_stream(
            tool_delta(0, "call_1", GET_WEATHER, ""),
            tool_delta(1, "call_2", GET_WEATHER, ""),
            *(tool_delta(i, arguments=a[:6]) for i, a in enumerate((PARIS_JSON, TOKYO_JSON))),
            *(tool_delta(i, arguments=a[6:]) for i, a in enumerate((PARIS_JSON, TOKYO_JSON))),
        ),
        "one id for both": openai_stream(
            tool_delta(0, "call_1", GET_WEATHER, PARIS_JSON),
            tool_delta(1, "call_1", GET_WEATHER, TOKYO_JSON),
        ),
        "unstreamed, one id for both": openai_json(
            openai_call("call_1", GET_WEATHER, PARIS_JSON),
            openai_call("call_1", GET_WEATHER, TOKYO_JSON),
        ),
    }
    first = (await _cases(ctx, cases, PARIS_AND_TOKYO, ("Q7",)))[1]
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
    call = chunk(tool_delta(0, "call_1", GET_WEATHER, PARIS_JSON))

    def ending(last: dict[str, Any]) -> Reply:
        return Reply.sse(
            [chunk({"role": "assistant"}), call, chunk(last, finish="tool_calls"), DONE]
        )

    cases = {
        "indexed": ending(tool_delta(0, arguments="")),
        "same index, id and name": ending(tool_delta(0, "call_1", GET_WEATHER, "")),
        "no index, same id": ending(tool_delta(None, "call_1", GET_WEATHER, "")),
        "no index, no id": ending(tool_delta(arguments="")),
    }
    await _cases(ctx, cases, PARIS_ONLY, ("Q11",))
    return Normalized(("Q11",), "a final chunk with an empty arguments delta and the finish")
