"""Usage checks: token counts are present, counted once, and inclusive of cache and reasoning."""

from __future__ import annotations

import json
from typing import Any

from attrs import evolve

from agentfsm.adapters.providers import ProviderError
from agentfsm.engine import AssistantMessage, ChatResult, Usage
from agentfsm.testing import Reply, responses_body, responses_events

from .._context import LiveContext, RecordedContext
from .._exchange import RecordedExchange, Verdict, ints, on_success, verdict
from .._frames import DONE, chunk, completion, data, event
from .._hints import capability_hint
from .._model import Check, CheckFailed, CheckSkipped, ModelBehaviour, Normalized

__all__ = ["CHECKS"]

PONG = "Reply with the single word PONG."
_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def _openai(prompt: int, completion_tokens: int, **extra: Any) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt + completion_tokens,
        **extra,
    }


def _message(text: str, usage: dict[str, Any]) -> dict[str, Any]:
    """An unstreamed Anthropic Messages body."""
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "fake-model",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": usage,
    }


def _events(text: str, start: dict[str, Any], delta: dict[str, Any]) -> list[str]:
    """An Anthropic stream whose usage is ``start`` (message_start) then ``delta``."""
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "fake-model"}
    return [
        event("message_start", {"message": {**message, "content": [], "usage": start}}),
        event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}}),
        event("content_block_stop", {"index": 0}),
        event("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": delta}),
        event("message_stop", {}),
    ]


def _responses(usage: Usage, *, stream: bool, reasoning: str | None = None) -> Reply:
    """A Responses answer ``pong`` (with ``reasoning``) whose usage is ``usage``."""
    result = ChatResult(AssistantMessage("pong", reasoning=reasoning), usage, "stop")
    return Reply.sse(responses_events(result)) if stream else Reply.json(responses_body(result))


def _show(values: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in values.items())


def _expect(usage: Usage | None, quirks: tuple[str, ...] = (), **want: int) -> Usage:
    """``usage`` has exactly the ``want`` counts, as ints, and its parts fit in its totals."""
    if usage is None:
        raise CheckFailed(_show(want), "no usage at all", quirks=quirks)
    got = {name: getattr(usage, name, None) for name in want}
    if any(type(value) is not int for value in got.values()):
        raise CheckFailed("integer token counts", _show(got), quirks=quirks)
    if got != want:
        raise CheckFailed(_show(want), _show(got), quirks=quirks)
    _consistent(usage, quirks)
    return usage


def _consistent(usage: Usage, quirks: tuple[str, ...] = ()) -> None:
    counts = {name: getattr(usage, name) for name in (*_FIELDS, "reasoning_tokens")}
    if any(type(value) is not int or value < 0 for value in counts.values()):
        raise CheckFailed("non-negative integer token counts", _show(counts), quirks=quirks)
    # Each is a part of the prompt; some routers report the same tokens as both read and
    # written (OpenRouter in front of Gemini), so their sum may exceed it.
    if max(usage.cache_read_tokens, usage.cache_write_tokens) > usage.input_tokens:
        raise CheckFailed(
            "cache reads and writes each inside input_tokens", _show(counts), quirks=quirks
        )
    if usage.reasoning_tokens > usage.output_tokens:
        raise CheckFailed("reasoning_tokens inside output_tokens", _show(counts), quirks=quirks)


def _require(ctx: LiveContext, capability: str) -> None:
    if not ctx.target.capabilities.has(capability):
        raise CheckSkipped(capability_hint([capability]))


# -- U1 ------------------------------------------------------------------------------------


async def present(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "openai-responses":
        ctx.script(_responses(Usage(12, 3), stream=False))
        _expect((await ctx.ask()).usage, input_tokens=12, output_tokens=3)
        return None
    if ctx.wire == "anthropic":
        body = _message("pong", {"input_tokens": 12, "output_tokens": 3})
    else:
        body = completion({"role": "assistant", "content": "pong"}, usage=_openai(12, 3))
    ctx.script(Reply.json(body))
    usage = _expect((await ctx.ask()).usage, input_tokens=12, output_tokens=3)
    if usage.total_tokens != 15:
        raise CheckFailed(
            "total_tokens == 15 (12 in + 3 out)", f"total_tokens={usage.total_tokens}"
        )
    return None


async def present_live(ctx: LiveContext) -> Normalized | None:
    result = await ctx.ask(stream=False, prompt=PONG, max_tokens=16)
    if result.usage is None:
        raise CheckFailed("usage in an unstreamed answer", "no usage")
    _consistent(result.usage)
    if result.usage.input_tokens <= 0:
        raise CheckFailed("input_tokens > 0", f"input_tokens={result.usage.input_tokens}")
    if ctx.wire != "openai-chat":  # the raw total below is Chat Completions' field
        return None
    raw = await ctx.raw(
        {"messages": [{"role": "user", "content": PONG}], "max_tokens": 16}, name="usage.present"
    )
    try:
        answer = raw.json() if raw.status == 200 else None
    except ValueError:
        answer = None
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if not isinstance(usage, dict) or not isinstance(usage.get("total_tokens"), int):
        return None
    parts = int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
    if usage["total_tokens"] == parts:
        return None
    details = usage.get("completion_tokens_details") or {}
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    if isinstance(reasoning, int) and usage["total_tokens"] == parts + reasoning:
        return Normalized(("Q22",), "completion_tokens excludes reasoning_tokens; total shows them")
    raise CheckFailed("total_tokens == prompt_tokens + completion_tokens", json.dumps(usage))


# -- U2 ------------------------------------------------------------------------------------


async def stream_final(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "openai-responses":  # usage comes with response.completed only
        ctx.script(_responses(Usage(9, 2), stream=True))
        _expect((await ctx.ask()).usage, input_tokens=9, output_tokens=2)
        return None
    if ctx.wire == "anthropic":
        ctx.script(
            Reply.sse(
                _events("pong", {"input_tokens": 9, "output_tokens": 1}, {"output_tokens": 2})
            )
        )
        _expect((await ctx.ask()).usage, input_tokens=9, output_tokens=2)
        return None
    ctx.script(
        Reply.sse(
            [
                chunk({"role": "assistant", "content": "po"}),
                chunk({"content": "ng"}),
                chunk({}, finish="stop"),
                chunk(choices=False, usage=_openai(9, 2)),
                DONE,
            ]
        )
    )
    _expect((await ctx.ask()).usage, ("Q15",), input_tokens=9, output_tokens=2)
    body = ctx.requests[-1].json()
    options = body.get("stream_options") if isinstance(body, dict) else None
    if body.get("stream") and not (isinstance(options, dict) and options.get("include_usage")):
        sent = {"stream": body.get("stream"), "stream_options": options}
        raise CheckFailed(
            "stream_options.include_usage on a streamed request", json.dumps(sent), quirks=("Q15",)
        )
    groq = {"id": "req_1", "usage": _openai(9, 2)}
    ctx.script(Reply.sse([chunk({"content": "pong"}), chunk({}, finish="stop", x_groq=groq), DONE]))
    _expect((await ctx.ask()).usage, ("Q16",), input_tokens=9, output_tokens=2)
    return Normalized(("Q16",), "usage sent only under x_groq.usage")


async def stream_final_live(ctx: LiveContext) -> Normalized | None:
    _require(ctx, "stream_usage")
    verdict: Normalized | None = None
    try:
        result = await ctx.ask(stream=True, prompt=PONG, max_tokens=16)
    except ProviderError as error:
        quirks = ctx.target.quirks
        if ctx.wire != "openai-chat" or error.kind != "bad_request" or not quirks.stream_options:
            raise
        try:
            result = await ctx.ask(
                stream=True, quirks=evolve(quirks, stream_options=False), prompt=PONG, max_tokens=16
            )
        except ProviderError as again:
            raise CheckFailed(
                "a streamed answer once stream_options is left out", str(again), quirks=("Q14",)
            ) from None
        verdict = Normalized(
            ("Q14",), "stream_options rejected with 400; works with stream_options=False"
        )
    if result.usage is None:
        raise CheckFailed("usage at the end of the stream", "no usage", quirks=("Q15",))
    _consistent(result.usage)
    await _the_servers_count(ctx, result.usage)
    if verdict is not None or ctx.wire != "openai-chat":  # the others have no stream_options
        return verdict
    body = {"messages": [{"role": "user", "content": PONG}], "max_tokens": 16, "stream": True}
    raw = await ctx.raw(
        {**body, "stream_options": {"include_usage": True}}, name="usage.stream_final"
    )
    payloads = [p for p in raw.sse_payloads() if isinstance(p, dict)]
    carrying = [p for p in payloads if p.get("usage")]
    if not carrying and any((p.get("x_groq") or {}).get("usage") for p in payloads):
        return Normalized(("Q16",), "usage sent only under x_groq.usage")
    if len(carrying) > 1:
        return Normalized(("Q19",), f"{len(carrying)} frames carry usage; the adapter kept one")
    return None


async def _the_servers_count(ctx: LiveContext, streamed: Usage) -> None:
    """A streamed usage that is not the one the server counts for the same request
    unstreamed is made up on the way (a proxy counting for itself): not a usage to trust."""
    try:
        plain = (await ctx.ask(stream=False, prompt=PONG, max_tokens=16)).usage
    except ProviderError:
        return  # nothing to compare with; U1 judges the unstreamed answer
    if plain is None or plain.input_tokens == streamed.input_tokens:
        return
    raise CheckFailed(
        "the server's own count at the end of the stream",
        f"input_tokens={streamed.input_tokens} streamed, {plain.input_tokens} unstreamed for "
        "the same request: the streamed usage is not the server's count",
        quirks=("Q41",),
    )


# -- U3 ------------------------------------------------------------------------------------


async def no_double_count(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        start = {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 0}
        ctx.script(Reply.sse(_events("pong", start, {"input_tokens": 10, "output_tokens": 7})))
        _expect((await ctx.ask()).usage, ("Q19",), input_tokens=10, output_tokens=7)
        return Normalized(("Q19",), "message_start and message_delta both carry usage")
    null_usage = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": []}
    ctx.script(
        Reply.sse(
            [
                chunk({"role": "assistant", "content": "po"}, usage=_openai(10, 1)),
                chunk({"content": "n"}, usage=_openai(10, 2)),
                chunk({"content": "g"}, finish="stop", usage=_openai(10, 3)),
                data({**null_usage, "usage": None}),
                DONE,
            ]
        )
    )
    _expect((await ctx.ask()).usage, ("Q17", "Q19"), input_tokens=10, output_tokens=3)
    return Normalized(("Q17", "Q19"), "cumulative usage in every chunk, then a null usage")


# -- U4 ------------------------------------------------------------------------------------


async def inclusive_cache(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "openai-responses":  # input_tokens_details.cached_tokens, inside the total
        for stream in (False, True):
            ctx.script(_responses(Usage(1000, 5, cache_read_tokens=800), stream=stream))
            _expect((await ctx.ask()).usage, input_tokens=1000, cache_read_tokens=800)
        return None
    if ctx.wire == "anthropic":
        start = {
            "input_tokens": 7,
            "cache_read_input_tokens": 9000,
            "cache_creation_input_tokens": 1000,
            "output_tokens": 1,
        }
        ctx.script(Reply.sse(_events("pong", start, {"output_tokens": 5})))
        want = {"input_tokens": 10007, "cache_read_tokens": 9000, "cache_write_tokens": 1000}
        _expect((await ctx.ask()).usage, ("Q20",), **want)
        ctx.script(Reply.json(_message("pong", {**start, "output_tokens": 5})))
        _expect((await ctx.ask()).usage, ("Q20",), **want)
        return Normalized(("Q20",), "input_tokens on the wire excludes cache reads and writes")
    cached = _openai(1000, 5, prompt_tokens_details={"cached_tokens": 800})
    ctx.script(Reply.json(completion({"role": "assistant", "content": "pong"}, usage=cached)))
    _expect((await ctx.ask()).usage, (), input_tokens=1000, cache_read_tokens=800)
    deepseek = _openai(1000, 5, prompt_cache_hit_tokens=800, prompt_cache_miss_tokens=200)
    frames = [chunk({"content": "pong"}), chunk({}, finish="stop")]
    ctx.script(Reply.sse([*frames, chunk(choices=False, usage=deepseek), DONE]))
    _expect((await ctx.ask()).usage, ("Q21",), input_tokens=1000, cache_read_tokens=800)
    return Normalized(("Q21",), "DeepSeek's top-level prompt_cache_hit_tokens")


async def inclusive_cache_live(ctx: LiveContext) -> Normalized | None:
    _require(ctx, "cache_reporting")
    window = ctx.target.capabilities.context_window
    facts = 120 if not window else max(10, min(120, window // 40))  # about 15 tokens a fact
    prefix = " ".join(f"Fact {i}: the number {i} is written {i:b} in binary." for i in range(facts))
    prompt = f"{prefix}\n\nReply with the single word PONG."
    for _ in range(3):
        usage = (await ctx.ask(stream=False, prompt=prompt, max_tokens=8)).usage
        if usage is None:
            raise CheckFailed("usage with cache counts", "no usage")
        _consistent(usage, ("Q20", "Q21"))
        if usage.cache_read_tokens > 0:
            return None
    if ctx.wire == "anthropic":
        raise CheckSkipped("the adapter sends no cache_control breakpoints: nothing is cached")
    raise CheckFailed("cache_read_tokens > 0 for a repeated prefix", "0 on three identical calls")


# -- U5 ------------------------------------------------------------------------------------


async def reasoning_inside_output(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "openai-responses":  # output_tokens_details.reasoning_tokens, inside
        for stream in (False, True):
            usage = Usage(20, 50, reasoning_tokens=30)
            ctx.script(_responses(usage, stream=stream, reasoning="6*7"))
            _expect((await ctx.ask()).usage, output_tokens=50, reasoning_tokens=30)
        return None
    if ctx.wire == "anthropic":
        raise CheckSkipped("not applicable to the anthropic wire (no separate reasoning count)")
    details = {"completion_tokens_details": {"reasoning_tokens": 30}}
    ctx.script(
        Reply.json(
            completion({"role": "assistant", "content": "42"}, usage=_openai(20, 50, **details))
        )
    )
    _expect((await ctx.ask()).usage, (), output_tokens=50, reasoning_tokens=30)
    xai = {**_openai(20, 20, **details), "total_tokens": 70}
    frames = [chunk({"reasoning_content": "6*7"}), chunk({"content": "42"}, finish="stop")]
    ctx.script(Reply.sse([*frames, chunk(choices=False, usage=xai), DONE]))
    usage = _expect((await ctx.ask()).usage, ("Q22",), output_tokens=50, reasoning_tokens=30)
    if usage.total_tokens != 70:
        raise CheckFailed(
            "total_tokens == 70", f"total_tokens={usage.total_tokens}", quirks=("Q22",)
        )
    return Normalized(("Q22",), "completion_tokens excluding reasoning (xAI); the total shows it")


async def reasoning_inside_output_live(ctx: LiveContext) -> Normalized | None:
    _require(ctx, "reasoning")
    prompt = "What is 17 * 23? Think it through step by step, then give the number."
    result = await ctx.ask(stream=False, prompt=prompt, max_tokens=1024)
    if result.usage is None:
        raise CheckFailed("usage with the reasoning count", "no usage")
    _consistent(result.usage, ("Q21", "Q22"))
    if result.usage.reasoning_tokens == 0 and not result.message.reasoning:
        raise ModelBehaviour("the model did not reason on this prompt")
    return None


# -- U6 ------------------------------------------------------------------------------------


async def stream_vs_nonstream_live(ctx: LiveContext) -> Normalized | None:
    streamed = (await ctx.ask(stream=True, prompt=PONG, max_tokens=16)).usage
    unstreamed = (await ctx.ask(stream=False, prompt=PONG, max_tokens=16)).usage
    if streamed is None or unstreamed is None:
        got = f"streamed {streamed!r}, unstreamed {unstreamed!r}"
        raise CheckFailed("usage both ways", got, quirks=("Q15",) if streamed is None else ())
    if streamed.input_tokens != unstreamed.input_tokens:
        # A stream whose counts are not the server's own: a proxy that counts for itself.
        raise CheckFailed(
            f"input_tokens={unstreamed.input_tokens} (unstreamed) when streamed",
            f"input_tokens={streamed.input_tokens}, output_tokens={streamed.output_tokens} "
            f"for the same request (unstreamed: {unstreamed.output_tokens} out): the streamed "
            "usage is not the count the unstreamed answer reports",
            quirks=("Q41",),
        )
    return None


# -- invariants on a recorded corpus -------------------------------------------------------


def _usage(exchange: RecordedExchange) -> tuple[Usage | None, object]:
    """The adapter's usage, and what to report as got (the outcome when there is no result)."""
    result = exchange.result
    usage = result.usage if result else None
    return usage, usage if result is not None else exchange.outcome


@on_success
def present_corpus(exchange: RecordedExchange) -> Verdict | None:
    """Recorded token counts come out as non-negative integers."""
    keys = ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens")
    if not ints(exchange.reply.usages, *keys):
        return None
    usage, got = _usage(exchange)
    kinds = ("input", "output", "cache_read", "cache_write", "reasoning")
    counts = [getattr(usage, f"{kind}_tokens", None) for kind in kinds]
    holds = all(isinstance(n, int) and n >= 0 for n in counts)
    return verdict(holds, "usage with non-negative integer counts", got)


@on_success
def no_double_count_corpus(exchange: RecordedExchange) -> Verdict | None:
    """Usage repeated along a stream is the last cumulative count, never a sum."""
    reply = exchange.reply
    outputs = [n for u in reply.usages for n in ints(u, "completion_tokens", "output_tokens")[:1]]
    if not reply.streamed or len(reply.usages) <= 1 or not outputs:
        return None
    usage, got = _usage(exchange)
    # The last cumulative count (plus reasoning, where the provider leaves it out).
    extra = max(ints(reply.usages[-1], "reasoning_tokens"), default=0)
    holds = usage is not None and usage.output_tokens in (outputs[-1], outputs[-1] + extra)
    return verdict(holds, f"output_tokens the last cumulative count ({outputs[-1]})", got)


@on_success
def inclusive_cache_corpus(exchange: RecordedExchange) -> Verdict | None:
    """Recorded cache reads and writes are reported, inside the input count."""
    usages = exchange.reply.usages
    read = max(ints(usages, "cached_tokens", "cache_read_input_tokens"), default=0)
    written = max(ints(usages, "cache_creation_input_tokens", "cache_write_tokens"), default=0)
    if not read and not written:
        return None
    usage, got = _usage(exchange)
    cache = (usage.cache_read_tokens, usage.cache_write_tokens) if usage else (0, 0)
    holds = usage is not None and sum(cache) <= usage.input_tokens
    holds = holds and all(n > 0 for n, raw in zip(cache, (read, written), strict=True) if raw)
    return verdict(holds, f"cache read {read} / written {written} inside input_tokens", got)


@on_success
def reasoning_inside_output_corpus(exchange: RecordedExchange) -> Verdict | None:
    """Recorded reasoning tokens are reported, inside the output count."""
    if max(ints(exchange.reply.usages, "reasoning_tokens"), default=0) <= 0:
        return None
    usage, got = _usage(exchange)
    holds = usage is not None and 0 < usage.reasoning_tokens <= usage.output_tokens
    return verdict(holds, "0 < reasoning_tokens <= output_tokens", got)


CHECKS = [
    Check(
        "U1",
        "usage.present",
        "usage",
        "an unstreamed answer with usage (12 in, 3 out)",
        "integer counts; total == in + out",
        recorded=present,
        live=present_live,
        corpus=present_corpus,
        responses=("recorded", "live"),
    ),
    Check(
        "U2",
        "usage.stream_final",
        "usage",
        "a stream with usage requested; usage on a choices-less last chunk or under x_groq",
        "exactly one final usage; stream_options sent, or dropped if the server rejects it "
        "(live: needs stream_usage)",
        needs=("streaming",),
        quirks=("Q14", "Q15", "Q16", "Q17", "Q41"),
        recorded=stream_final,
        live=stream_final_live,
        responses=("recorded", "live"),
    ),
    Check(
        "U3",
        "usage.no_double_count",
        "usage",
        "cumulative usage on every chunk then a null one; Anthropic message_start + message_delta",
        "final usage = the last cumulative values, never a sum, never erased",
        needs=("streaming",),
        quirks=("Q17", "Q19"),
        recorded=no_double_count,
        corpus=no_double_count_corpus,
    ),
    Check(
        "U4",
        "usage.inclusive_cache",
        "usage",
        "Anthropic cache read/write, DeepSeek prompt_cache_hit_tokens, OpenAI cached_tokens; "
        "live: the same long prefix up to three times",
        "input includes cache reads and writes; cache_read <= input "
        "(live: needs cache_reporting, a cache hit is reported)",
        quirks=("Q20", "Q21"),
        recorded=inclusive_cache,
        live=inclusive_cache_live,
        corpus=inclusive_cache_corpus,
        responses=("recorded", "live"),
    ),
    Check(
        "U5",
        "usage.reasoning_inside_output",
        "usage",
        "OpenAI reasoning_tokens; xAI completion_tokens without reasoning, total with it",
        "output >= reasoning; output includes reasoning; total consistent (live: needs reasoning)",
        quirks=("Q21", "Q22"),
        recorded=reasoning_inside_output,
        live=reasoning_inside_output_live,
        corpus=reasoning_inside_output_corpus,
        responses=("recorded", "live"),
    ),
    Check(
        "U6",
        "usage.stream_vs_nonstream",
        "usage",
        "the same request streamed and unstreamed",
        "equal input tokens",
        needs=("streaming", "stream_usage"),
        quirks=("Q15", "Q41"),
        live=stream_vs_nonstream_live,
        responses=("live",),
    ),
]
