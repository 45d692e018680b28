"""Tool checks in live mode: raw requests to a real server, read with the adapter's own
parsers."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from typing import Any

from attrs import evolve

from agentfsm.adapters.providers import (
    ProviderError,
    parse_completion,
    parse_message,
    parse_response,
)
from agentfsm.engine import (
    AssistantMessage,
    ChatResult,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)

from ..._context import TOOL_WEATHER, TOOL_WITHOUT_ARGS, LiveContext, RawExchange, fold_payloads
from ..._hints import capability_hint
from ..._model import CheckFailed, CheckSkipped, ModelBehaviour, Normalized
from ..causes import (
    EMPTY_ANSWER,
    TOOLS_NEVER,
    expect_answer,
    is_empty,
    measure_tool_prompt,
    no_call,
    refusal,
    results_reach_prompt,
    streams_tools,
)
from .fixtures import (
    GET_TIME,
    GET_WEATHER,
    OPENAI_ONLY,
    PARIS_ARGS,
    SAY_HELLO,
    SYSTEM_PROMPT,
    TOKYO_ARGS,
    WEATHER_IN_PARIS,
    WEATHER_IN_PARIS_WITH_TOOL,
)

__all__ = [
    "ask_or_fail",
    "no_args_live",
    "none_live",
    "parallel_flag_live",
    "parallel_live",
    "parallel_results_live",
    "probe",
    "single_forced_live",
    "stream_auto_live",
    "stream_equals_nonstream_live",
    "tools_body",
    "unicode_args_live",
]


# -- live helpers --------------------------------------------------------------------------


def tools_body(
    ctx: LiveContext, prompt: str, spec: ToolSpec, force: bool = False
) -> dict[str, Any]:
    """A raw request offering ``spec``; ``force`` names it in ``tool_choice``."""
    body: dict[str, Any] = {"messages": [{"role": "user", "content": prompt}], "temperature": 0}
    fields = {"name": spec.name, "description": spec.description}
    if ctx.wire == "anthropic":
        body["tools"] = [{**fields, "input_schema": spec.parameters}]
        if force:
            body["tool_choice"] = {"type": "tool", "name": spec.name}
    else:
        body["tools"] = [
            {"type": "function", "function": {**fields, "parameters": spec.parameters}}
        ]
        if force:
            body["tool_choice"] = {"type": "function", "function": {"name": spec.name}}
        elif getattr(ctx.target.profile, "explicit_tool_choice", False):
            body["tool_choice"] = "auto"
    return {**body, "max_tokens": 128}


async def probe(
    ctx: LiveContext, body: dict[str, Any], name: str, *, stream: bool = False
) -> tuple[RawExchange, ChatResult]:
    """Send ``body`` raw and read the answer with the adapter's own wire parsers."""
    raw = await ctx.raw({**body, "stream": True} if stream else body, name=name)
    if raw.status != 200:
        raise CheckFailed(f"HTTP 200 ({name})", f"{raw.status}: {raw.text[:200]}")
    if not stream:
        return raw, _parse(ctx, raw.json())
    payloads = [p for p in raw.sse_payloads() if isinstance(p, dict)]
    if not payloads:
        raise CheckFailed(f"a streamed answer ({name})", "an empty 200 stream", quirks=("Q26",))
    return raw, _read(ctx, payloads)


def _parse(ctx: LiveContext, data: Any) -> ChatResult:
    """An unstreamed answer read by the wire adapter's own parser."""
    if ctx.wire == "anthropic":
        return parse_message(data)
    if ctx.wire == "openai-responses":
        return parse_response(data)
    return parse_completion(data)


def _read(ctx: LiveContext, payloads: list[dict[str, Any]]) -> ChatResult:
    """Stream payloads folded by the adapter's own accumulator."""
    return fold_payloads(ctx.wire, payloads)


def _scan(ctx: LiveContext, raw: RawExchange) -> tuple[dict[str, str], list[Any], int]:
    """Known quirks seen in a raw answer, its raw calls (or call deltas), its finish records."""
    streamed = "data:" in raw.text[:300]
    payloads = [
        p for p in (raw.sse_payloads() if streamed else [raw.json()]) if isinstance(p, dict)
    ]
    if ctx.wire == "anthropic":
        blocks = [p.get("content_block") or {} for p in payloads]
        blocks += [b for p in payloads for b in p.get("content") or []]
        finishes = sum(1 for p in payloads if p.get("type") in ("message_stop", "message"))
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        return _same_id_blocks([b for b in blocks if b]), uses, finishes
    if ctx.wire == "openai-responses":
        return _scan_responses(payloads)
    seen: dict[str, str] = {}
    calls: list[Any] = []
    repeats: Counter[tuple[Any, str]] = Counter()
    reasons: set[str] = set()
    for choice in (c for p in payloads for c in p.get("choices") or []):
        reasons.add(choice.get("finish_reason") or "")
        for call in (choice.get("delta") or choice.get("message") or {}).get("tool_calls") or []:
            calls.append(call)
            function = call.get("function") or {}
            repeats.update({(call.get("index"), "id"): bool(call.get("id"))})
            repeats.update({(call.get("index"), "name"): bool(function.get("name"))})
            if streamed and "index" not in call:
                seen["Q1"] = "tool-call deltas without index"
            if isinstance(function.get("arguments"), dict):
                seen["Q3"] = "arguments as a JSON object, not a string"
            if call.get("id") == "":
                seen["Q8"] = "an empty tool-call id"
    if streamed and any(count > 1 for count in repeats.values()):
        seen["Q5"] = "the full id and name repeated in every chunk"
    if calls and "stop" in reasons:
        seen["Q10"] = "finish_reason 'stop' with tool calls"
    finishes = sum(1 for p in payloads for c in p.get("choices") or [] if c.get("finish_reason"))
    return seen, calls, finishes


def _scan_responses(payloads: list[dict[str, Any]]) -> tuple[dict[str, str], list[Any], int]:
    """The Responses wire: its calls are ``function_call`` items (of the streamed items, or
    of the response object), its finish records the terminal events or the object itself."""
    terminal = ("response.completed", "response.incomplete")
    streamed = [p for p in payloads if isinstance(p.get("type"), str) and "." in p["type"]]
    finishes = sum(1 for p in streamed if p.get("type") in terminal)
    if streamed:
        items = [
            p.get("item") or {} for p in streamed if p.get("type") == "response.output_item.done"
        ]
    else:
        items = [i for p in payloads for i in p.get("output") or [] if isinstance(i, dict)]
        finishes = len(payloads)
    calls = [i for i in items if isinstance(i, dict) and i.get("type") == "function_call"]
    seen: dict[str, str] = {}
    if any(not isinstance(c.get("arguments"), str) for c in calls):
        seen["Q3"] = "arguments as a JSON object, not a string"
    if any(c.get("call_id") == "" for c in calls):
        seen["Q8"] = "an empty tool-call id"
    return seen, calls, finishes


def _same_id_blocks(blocks: list[dict[str, Any]]) -> dict[str, str]:
    """Q40 when consecutive ``tool_use`` blocks carry one id (one block per stream chunk)."""
    repeats = [
        b.get("id")
        for a, b in pairwise(blocks)
        if a.get("type") == b.get("type") == "tool_use" and b.get("id") and a.get("id") == b["id"]
    ]
    if not repeats:
        return {}
    note = f"{len(repeats) + 1} consecutive tool_use blocks with the id {repeats[0]!r}, one call"
    return {"Q40": note}


def _verdict(seen: dict[str, str], extra: str = "") -> Normalized | None:
    notes = [*seen.values(), extra] if extra else list(seen.values())
    if not notes:
        return None
    return Normalized(tuple(sorted(seen)), "; ".join(notes) + " (absorbed by the adapter)")


async def ask_or_fail(ctx: LiveContext, what: str, **kwargs: Any) -> ChatResult:
    """``ctx.ask``, with a provider error reported as this check's failure."""
    try:
        return await ctx.ask(**kwargs)
    except ProviderError as error:
        quirks = ("Q26",) if error.provider_code == "empty_stream" else ()
        raise CheckFailed(what, str(error)[:200], quirks=quirks) from None


def _modes(ctx: LiveContext) -> tuple[bool, ...]:
    return (False, True) if ctx.target.capabilities.streaming else (False,)


async def forced(
    ctx: LiveContext,
    body: dict[str, Any],
    name: str,
    what: str,
    *,
    stream: bool = False,
    prompt: str,
    spec: ToolSpec,
) -> tuple[RawExchange, ChatResult]:
    """A request naming its tool in ``tool_choice``: an answer that calls it. Without a
    call, the cause is measured: the same request with ``tool_choice: required`` gets one
    (Q48: the server ignores a named choice), or the tools never reach the prompt (Q52);
    otherwise the model saw the tool and answered in text."""
    raw, result = await probe(ctx, body, name, stream=stream)
    expect_answer(result, what)
    if result.message.tool_calls:
        return raw, result
    required = {**body, "tool_choice": {"type": "any"} if ctx.wire == "anthropic" else "required"}
    _, again = await probe(ctx, required, f"{name}-required", stream=stream)
    calls = [c.name for c in again.message.tool_calls]
    answered = f"text ({result.message.content[:60]!r})"
    if calls:
        raise CheckFailed(
            f"{what}: a call of the tool it names",
            f"{answered}; the same request with tool_choice 'required' gets {calls}: the "
            "named tool_choice is ignored",
            quirks=("Q48",),
        )
    here = await measure_tool_prompt(ctx, prompt, spec)
    if here.never:
        raise CheckFailed(
            f"{what}: a call of the tool it names",
            f"{answered}, and no call with tool_choice 'required' either: {TOOLS_NEVER} "
            f"({here.summary()})",
            quirks=("Q52",),
        )
    figures = here.summary() if here.measured else "prompt tokens could not be measured"
    raise ModelBehaviour(
        f"no call for a forced tool choice, 'required' too ({answered}; {figures})"
    )


async def single_forced_live(ctx: LiveContext) -> Normalized | None:
    if not ctx.target.capabilities.has("tool_choice"):
        raise CheckSkipped(capability_hint(["tool_choice"]))
    body = tools_body(ctx, WEATHER_IN_PARIS, TOOL_WEATHER, force=True)
    seen: dict[str, str] = {}
    for stream in _modes(ctx):
        case = "streamed" if stream else "unstreamed"
        raw, result = await forced(
            ctx,
            body,
            f"T1-{case}",
            f"{case}, a named tool_choice",
            stream=stream,
            prompt=WEATHER_IN_PARIS,
            spec=TOOL_WEATHER,
        )
        calls = result.message.tool_calls
        if [c.name for c in calls] != [GET_WEATHER]:
            got = repr([c.name for c in calls] or result.message.content[:80])
            raise CheckFailed(f"{case}: one get_weather call (named tool_choice)", got)
        if calls[0].raw_arguments is not None:
            raise CheckFailed(f"{case}: arguments as an object", repr(calls[0].raw_arguments))
        seen.update(_scan(ctx, raw)[0])
    return _verdict(seen)


async def no_args_live(ctx: LiveContext) -> Normalized | None:
    seen: dict[str, str] = {}
    for stream in _modes(ctx):
        case = "streamed" if stream else "unstreamed"
        if ctx.target.capabilities.has("tool_choice"):
            body = tools_body(ctx, "What time is it?", TOOL_WITHOUT_ARGS, force=True)
            raw, result = await forced(
                ctx,
                body,
                f"T6-{case}",
                f"{case}, a named tool_choice",
                stream=stream,
                prompt="What time is it?",
                spec=TOOL_WITHOUT_ARGS,
            )
            seen.update(_scan(ctx, raw)[0])
        else:
            prompt = "What time is it? Use the get_time tool."
            tools = [TOOL_WITHOUT_ARGS]
            result = await ask_or_fail(
                ctx, f"{case}: an answer", stream=stream, prompt=prompt, tools=tools
            )
            await no_call(ctx, result, f"{case} 'what time is it'", prompt, TOOL_WITHOUT_ARGS)
        calls = result.message.tool_calls
        if [c.name for c in calls] != [GET_TIME] or calls[0].raw_arguments is not None:
            got = repr([(c.name, c.raw_arguments) for c in calls])
            raise CheckFailed(
                f"{case}: one get_time call with arguments {{}}", got, quirks=("Q13",)
            )
        if calls[0].arguments:
            raise ModelBehaviour(f"invented arguments {calls[0].arguments!r}")
    return _verdict(seen)


async def stream_equals_nonstream_live(ctx: LiveContext) -> Normalized | None:
    force = ctx.target.capabilities.has("tool_choice")
    body = tools_body(ctx, WEATHER_IN_PARIS_WITH_TOOL, TOOL_WEATHER, force=force)
    _, plain = await probe(ctx, body, "T7-unstreamed")
    expect_answer(plain, "unstreamed")
    if not force:
        await no_call(ctx, plain, "the weather in Paris", WEATHER_IN_PARIS_WITH_TOOL, TOOL_WEATHER)
    try:
        raw, streamed = await probe(ctx, body, "T7-streamed", stream=True)
    except CheckFailed as failure:
        if not force and "empty" in failure.got and not await streams_tools(ctx):
            note = (
                "an empty 200 for a streamed automatic tool choice; the profile does not stream it"
            )
            return Normalized(("Q26",), note)
        raise
    expect_answer(streamed, "streamed")
    want = [(c.name, c.arguments) for c in plain.message.tool_calls]
    got = [(c.name, c.arguments) for c in streamed.message.tool_calls]
    if got != want:
        raise CheckFailed(f"the streamed calls equal to {want}", repr(got), quirks=("Q12",))
    seen, _, finishes = _scan(ctx, raw)
    roles = raw.text.count('"role"') if ctx.wire == "openai-chat" else 1
    extra = [f"{finishes} finish records"] if finishes != 1 else []
    extra += [f"the role repeated in {roles} chunks"] if roles > 1 else []
    return _verdict(seen, "; ".join(extra))


def auto_choice_body(ctx: LiveContext, prompt: str) -> dict[str, Any]:
    """A raw request offering the weather tool with ``tool_choice: auto`` and the system
    prompt: what an agent loop sends."""
    body = tools_body(ctx, prompt, TOOL_WEATHER)
    body["tool_choice"] = {"type": "auto"} if ctx.wire == "anthropic" else "auto"
    if ctx.wire == "anthropic":
        body["system"] = SYSTEM_PROMPT
    else:
        body["messages"].insert(0, {"role": "system", "content": SYSTEM_PROMPT})
    return body


async def stream_auto_live(ctx: LiveContext) -> Normalized | None:
    """A streamed request with tools and automatic tool choice: what an agent loop sends."""
    prompt = WEATHER_IN_PARIS_WITH_TOOL
    body = auto_choice_body(ctx, prompt)
    raw = await ctx.raw({**body, "stream": True}, name="T16-streamed-auto")
    if raw.status != 200:
        raise CheckFailed("HTTP 200 for a streamed automatic tool choice", f"{raw.status}")
    seen, _, finishes = _scan(ctx, raw) if "data:" in raw.text else ({}, [], 0)
    if finishes:
        answer = _read(ctx, [p for p in raw.sse_payloads() if isinstance(p, dict)])
        if not is_empty(answer):
            return _verdict(seen)
        return await _empty_auto_answer(ctx, answer)
    # Nothing usable came: the adapter must not turn it into an empty success.
    quirks = evolve(ctx.target.profile, stream_with_tools=True, explicit_tool_choice=True)
    try:
        result = await ctx.ask(
            stream=True, quirks=quirks, messages=_auto_history(), tools=[TOOL_WEATHER]
        )
    except ProviderError as error:
        adapter = f"the adapter raises ProviderError {error.kind}/{error.provider_code}"
    else:
        raise CheckFailed(
            "an error for a stream without a finish record",
            f"an empty success from the adapter: {result.finish_reason!r}",
            quirks=("Q26",),
        )
    empty = _nothing(raw.text)
    if not await streams_tools(ctx):
        note = f"an empty 200 stream ({empty}); {adapter}; the profile sends tools unstreamed"
        return Normalized(("Q26",), note)
    raise CheckFailed(
        "a streamed answer (text or tool calls) ending with a finish record",
        f"an HTTP 200 stream with {empty}; {adapter}",
        quirks=("Q26",),
    )


def _nothing(text: str) -> str:
    """What a stream without a finish record held: nothing, SSE comments only (a server's
    keep-alive pings), or events that never finished."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return "no event, no [DONE], no error frame"
    if all(line.startswith(":") for line in lines):
        return f"no event, no [DONE], no error frame ({len(lines)} SSE comment line(s) only)"
    return "no finish record"


def _auto_history() -> list[Message]:
    return [SystemMessage(SYSTEM_PROMPT), UserMessage(WEATHER_IN_PARIS_WITH_TOOL)]


def _said(result: ChatResult) -> str:
    usage = result.usage
    counts = f"usage {usage.input_tokens}/{usage.output_tokens}" if usage else "no usage"
    return f"finish {result.finish_reason!r}, no text, no tool call, {counts}"


async def _empty_auto_answer(ctx: LiveContext, answer: ChatResult) -> Normalized | None:
    """A clean stream that answers nothing: a failure, unless the profile never streams a
    request with tools and the unstreamed request it sends instead does answer."""
    got = f"{EMPTY_ANSWER}: an HTTP 200 stream with {_said(answer)}"
    if await streams_tools(ctx):
        raise CheckFailed(
            "a streamed answer (text or tool calls)",
            f"{got}; the adapter returns it as an empty success",
            quirks=("Q37",),
        )
    how = "the profile sends tools unstreamed"
    try:
        result = await ctx.ask(stream=True, messages=_auto_history(), tools=[TOOL_WEATHER])
    except ProviderError as error:
        raise CheckFailed(
            f"an answer once {how}", f"{got}; unstreamed: {str(error)[:160]}", quirks=("Q37",)
        ) from None
    if is_empty(result):
        raise CheckFailed(
            f"an answer once {how}", f"{got}; unstreamed: {_said(result)}", quirks=("Q37",)
        )
    return Normalized(("Q37",), f"{got}; {how}, and that request answers")


async def parallel_live(ctx: LiveContext) -> Normalized | None:
    prompt = "What is the weather in Paris and in Tokyo? Call get_weather once for each city."
    raw, result = await probe(ctx, tools_body(ctx, prompt, TOOL_WEATHER), "T8-unstreamed")
    calls = result.message.tool_calls
    await no_call(ctx, result, "two cities", prompt, TOOL_WEATHER)
    if len(calls) < 2:
        raise ModelBehaviour(f"{len(calls)} tool call(s) for two cities")
    bad = [c.raw_arguments for c in calls if c.raw_arguments is not None]
    if bad:
        raise CheckFailed("arguments of every call that parse", repr(bad), quirks=("Q12",))
    if len({c.id for c in calls}) != len(calls) or not all(c.id for c in calls):
        raise CheckFailed("distinct non-empty ids", repr([c.id for c in calls]), quirks=("Q7",))
    seen, raw_calls, _ = _scan(ctx, raw)
    raw_ids = [c.get("id") for c in raw_calls]
    if len(set(raw_ids)) != len(raw_ids):
        seen["Q7"] = f"one id reused across parallel calls ({raw_ids})"
    return _verdict(seen)


async def parallel_results_live(ctx: LiveContext) -> Normalized | None:
    calls = [
        ToolCall("call_t9a", GET_WEATHER, PARIS_ARGS),
        ToolCall("call_t9b", GET_WEATHER, TOKYO_ARGS),
    ]
    history: list[Message] = [
        UserMessage("What is the weather in Paris and in Tokyo?"),
        AssistantMessage("", tool_calls=calls),
        ToolMessage("call_t9a", "Paris: sunny, 21 °C."),
        ToolMessage("call_t9b", "Tokyo: rainy, 15 °C."),
    ]
    try:
        result = await ctx.ask(messages=history, tools=[TOOL_WEATHER], max_tokens=96)
    except ProviderError as error:
        got = str(error)[:200]
        quirks = ("Q34",) if refusal(error) else ()
        raise CheckFailed("two results sent together accepted", got, quirks=quirks) from None
    expect_answer(result, "the answer to two results")
    text = result.message.content.lower()
    words = (("21", "sunny", "paris"), ("15", "rain", "tokyo"))
    if result.message.tool_calls or not all(any(w in text for w in ws) for ws in words):
        await results_reach_prompt(ctx, TOOL_WEATHER)
        raise ModelBehaviour(f"the answer does not use both results ({text[:80]!r})")
    return None


async def parallel_flag_live(ctx: LiveContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        raise CheckSkipped(OPENAI_ONLY)
    probes = {
        "with tools": tools_body(ctx, WEATHER_IN_PARIS, TOOL_WEATHER),
        "without tools": {
            "messages": [{"role": "user", "content": SAY_HELLO}],
            "max_tokens": 32,
        },
    }
    rejected, calls = [], 0
    for label, body in probes.items():
        raw = await ctx.raw({**body, "parallel_tool_calls": False}, name=f"T10-{label}")
        if raw.status in (400, 422):
            rejected.append(label)
        elif raw.status != 200:
            got = f"{raw.status}: {raw.text[:200]}"
            raise CheckFailed(f"200, or a 400/422 ({label})", got)
        elif label == "with tools":
            calls = len(_scan(ctx, raw)[1])
    if rejected:
        note = f"parallel_tool_calls: false rejected {' and '.join(rejected)}"
        return Normalized(("Q33",), note + "; the adapter never sends it")
    if calls > 1:
        return Normalized(("Q33",), f"parallel_tool_calls: false ignored ({calls} calls)")
    return None


async def none_live(ctx: LiveContext) -> Normalized | None:
    tools = [TOOL_WEATHER]
    result = await ask_or_fail(ctx, "an answer", prompt=SAY_HELLO, tools=tools, max_tokens=64)
    expect_answer(result, "'say hello' with tools bound")
    if result.message.tool_calls:
        names = [c.name for c in result.message.tool_calls]
        raise ModelBehaviour(f"called {names} for 'say hello'")
    if result.finish_reason not in ("stop", "length"):
        raise CheckFailed("a text answer's finish reason", repr(result.finish_reason))
    if not ctx.target.capabilities.has("tool_choice"):
        return None
    body = tools_body(ctx, WEATHER_IN_PARIS, TOOL_WEATHER)
    body["tool_choice"] = {"type": "none"} if ctx.wire == "anthropic" else "none"
    answer = (await probe(ctx, body, "T11-tool-choice-none"))[1]
    expect_answer(answer, "tool_choice none")
    if answer.message.tool_calls:
        raise CheckFailed("no call with tool_choice none", repr(answer.message.tool_calls))
    return None


async def unicode_args_live(ctx: LiveContext) -> Normalized | None:
    prompt = 'What is the weather in 東京? Call get_weather with the city "東京".'
    seen: dict[str, str] = {}
    if ctx.target.capabilities.has("tool_choice"):
        body = tools_body(ctx, prompt, TOOL_WEATHER, force=True)
        raw, result = await forced(
            ctx, body, "T12", "a named tool_choice", prompt=prompt, spec=TOOL_WEATHER
        )
        seen = _scan(ctx, raw)[0]
    else:
        result = await ask_or_fail(ctx, "an answer", prompt=prompt, tools=[TOOL_WEATHER])
        await no_call(ctx, result, "a CJK city", prompt, TOOL_WEATHER)
    calls = result.message.tool_calls
    if not calls or calls[0].raw_arguments is not None:
        raise CheckFailed("one call whose arguments parse", repr(calls))
    city = calls[0].arguments.get("city")
    if isinstance(city, str) and "\\u" in city:
        raise CheckFailed("the city as characters, not \\u escapes", repr(city))
    if not isinstance(city, str) or not any(ord(ch) > 127 for ch in city):
        raise ModelBehaviour(f"the city argument {city!r} has no CJK character")
    return _verdict(seen)
