"""Tool checks in live mode: raw requests to a real server, read with the adapter's own
parsers."""

from __future__ import annotations

from collections import Counter
from typing import Any

from attrs import evolve

from agentfsm.adapters.providers import ProviderError
from agentfsm.adapters.providers.anthropic_wire import EventAccumulator, parse_message
from agentfsm.adapters.providers.openai_wire import StreamAccumulator, parse_completion
from agentfsm.engine.messages import (
    AssistantMessage,
    ChatResult,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)

from ...context import TOOL_WEATHER, TOOL_WITHOUT_ARGS, LiveContext, RawExchange
from ...model import CheckFailed, CheckSkipped, Normalized
from .fixtures import (
    FOREIGN_CALLS,
    GET_TIME,
    GET_WEATHER,
    LONG_CALL_ID,
    OPENAI_ONLY,
    PARIS_ARGS,
    PARIS_JSON,
    SAY_HELLO,
    SYSTEM_PROMPT,
    TOKYO_ARGS,
    WEATHER_IN_PARIS,
    WEATHER_IN_PARIS_WITH_TOOL,
    openai_call,
)

__all__ = [
    "agent_loop_live",
    "foreign_ids_live",
    "no_args_live",
    "none_live",
    "parallel_flag_live",
    "parallel_live",
    "parallel_results_live",
    "single_forced_live",
    "stream_auto_live",
    "stream_equals_nonstream_live",
    "unicode_args_live",
]


# -- live helpers --------------------------------------------------------------------------


def _body(ctx: LiveContext, prompt: str, spec: ToolSpec, force: bool = False) -> dict[str, Any]:
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
        elif ctx.target.quirks.explicit_tool_choice:
            body["tool_choice"] = "auto"
    return {**body, "max_tokens": 128}


async def _probe(
    ctx: LiveContext, body: dict[str, Any], name: str, *, stream: bool = False
) -> tuple[RawExchange, ChatResult]:
    """Send ``body`` raw and read the answer with the adapter's own wire parsers."""
    raw = await ctx.raw({**body, "stream": True} if stream else body, name=name)
    if raw.status != 200:
        raise CheckFailed(f"HTTP 200 ({name})", f"{raw.status}: {raw.text[:200]}")
    if not stream:
        data = raw.json()
        return raw, parse_message(data) if ctx.wire == "anthropic" else parse_completion(data)
    payloads = [p for p in raw.sse_payloads() if isinstance(p, dict)]
    if not payloads:
        raise CheckFailed(f"a streamed answer ({name})", "an empty 200 stream", quirks=("Q26",))
    if ctx.wire == "anthropic":
        events = EventAccumulator()
        for payload in payloads:
            events.add(str(payload.get("type", "")), payload)
        return raw, events.result()
    chunks = StreamAccumulator()
    for payload in payloads:
        chunks.add(payload)
    return raw, chunks.result()


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
        return {}, [b for b in blocks if b.get("type") == "tool_use"], finishes
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


def _verdict(seen: dict[str, str], extra: str = "") -> Normalized | None:
    notes = [*seen.values(), extra] if extra else list(seen.values())
    if not notes:
        return None
    return Normalized(tuple(sorted(seen)), "; ".join(notes) + " (absorbed by the adapter)")


def _model_miss(result: ChatResult, what: str) -> None:
    if not result.message.tool_calls:
        text = result.message.content[:80]
        raise CheckSkipped(f"model behaviour: no tool call for {what} (answered {text!r})")


async def _ask(ctx: LiveContext, what: str, **kwargs: Any) -> ChatResult:
    """``ctx.ask``, with a provider error reported as this check's failure."""
    try:
        return await ctx.ask(**kwargs)
    except ProviderError as error:
        quirks = ("Q26",) if error.provider_code == "empty_stream" else ()
        raise CheckFailed(what, str(error)[:200], quirks=quirks) from None


def _modes(ctx: LiveContext) -> tuple[bool, ...]:
    return (False, True) if ctx.target.capabilities.streaming else (False,)


async def single_forced_live(ctx: LiveContext) -> Normalized | None:
    if not ctx.target.capabilities.has("tool_choice"):
        raise CheckSkipped("capability absent: tool_choice")
    body = _body(ctx, WEATHER_IN_PARIS, TOOL_WEATHER, force=True)
    seen: dict[str, str] = {}
    for stream in _modes(ctx):
        case = "streamed" if stream else "unstreamed"
        raw, result = await _probe(ctx, body, f"T1-{case}", stream=stream)
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
            body = _body(ctx, "What time is it?", TOOL_WITHOUT_ARGS, force=True)
            raw, result = await _probe(ctx, body, f"T6-{case}", stream=stream)
            seen.update(_scan(ctx, raw)[0])
        else:
            prompt = "What time is it? Use the get_time tool."
            tools = [TOOL_WITHOUT_ARGS]
            result = await _ask(
                ctx, f"{case}: an answer", stream=stream, prompt=prompt, tools=tools
            )
            _model_miss(result, "'what time is it'")
        calls = result.message.tool_calls
        if [c.name for c in calls] != [GET_TIME] or calls[0].raw_arguments is not None:
            got = repr([(c.name, c.raw_arguments) for c in calls])
            raise CheckFailed(
                f"{case}: one get_time call with arguments {{}}", got, quirks=("Q13",)
            )
        if calls[0].arguments:
            raise CheckSkipped(f"model behaviour: invented arguments {calls[0].arguments!r}")
    return _verdict(seen)


async def stream_equals_nonstream_live(ctx: LiveContext) -> Normalized | None:
    force = ctx.target.capabilities.has("tool_choice")
    body = _body(ctx, WEATHER_IN_PARIS_WITH_TOOL, TOOL_WEATHER, force=force)
    _, plain = await _probe(ctx, body, "T7-unstreamed")
    if not force:
        _model_miss(plain, "the weather in Paris")
    try:
        raw, streamed = await _probe(ctx, body, "T7-streamed", stream=True)
    except CheckFailed as failure:
        if not force and "empty" in failure.got and not ctx.target.quirks.stream_with_tools:
            note = (
                "an empty 200 for a streamed automatic tool choice; the profile does not stream it"
            )
            return Normalized(("Q26",), note)
        raise
    want = [(c.name, c.arguments) for c in plain.message.tool_calls]
    got = [(c.name, c.arguments) for c in streamed.message.tool_calls]
    if got != want:
        raise CheckFailed(f"the streamed calls equal to {want}", repr(got), quirks=("Q12",))
    seen, _, finishes = _scan(ctx, raw)
    roles = raw.text.count('"role"') if ctx.wire == "openai-chat" else 1
    extra = [f"{finishes} finish records"] if finishes != 1 else []
    extra += [f"the role repeated in {roles} chunks"] if roles > 1 else []
    return _verdict(seen, "; ".join(extra))


async def stream_auto_live(ctx: LiveContext) -> Normalized | None:
    """A streamed request with tools and automatic tool choice: what an agent loop sends."""
    prompt = WEATHER_IN_PARIS_WITH_TOOL
    body = _body(ctx, prompt, TOOL_WEATHER)
    body["tool_choice"] = {"type": "auto"} if ctx.wire == "anthropic" else "auto"
    if ctx.wire == "anthropic":
        body["system"] = SYSTEM_PROMPT
    else:
        body["messages"].insert(0, {"role": "system", "content": SYSTEM_PROMPT})
    raw = await ctx.raw({**body, "stream": True}, name="T16-streamed-auto")
    if raw.status != 200:
        raise CheckFailed("HTTP 200 for a streamed automatic tool choice", f"{raw.status}")
    seen, _, finishes = _scan(ctx, raw) if "data:" in raw.text else ({}, [], 0)
    if finishes:
        return _verdict(seen)
    # Nothing usable came: the adapter must not turn it into an empty success.
    quirks = evolve(ctx.target.quirks, stream_with_tools=True, explicit_tool_choice=True)
    try:
        result = await ctx.ask(
            stream=True,
            quirks=quirks,
            messages=[SystemMessage(SYSTEM_PROMPT), UserMessage(prompt)],
            tools=[TOOL_WEATHER],
        )
    except ProviderError as error:
        adapter = f"the adapter raises ProviderError {error.kind}/{error.provider_code}"
    else:
        raise CheckFailed(
            "an error for a stream without a finish record",
            f"an empty success from the adapter: {result.finish_reason!r}",
            quirks=("Q26",),
        )
    empty = "no event, no [DONE], no error frame" if not raw.text.strip() else "no finish record"
    if not ctx.target.quirks.stream_with_tools:
        note = f"an empty 200 stream ({empty}); {adapter}; the profile sends tools unstreamed"
        return Normalized(("Q26",), note)
    raise CheckFailed(
        "a streamed answer (text or tool calls) ending with a finish record",
        f"an HTTP 200 stream with {empty}; {adapter}",
        quirks=("Q26",),
    )


async def parallel_live(ctx: LiveContext) -> Normalized | None:
    prompt = "What is the weather in Paris and in Tokyo? Call get_weather once for each city."
    raw, result = await _probe(ctx, _body(ctx, prompt, TOOL_WEATHER), "T8-unstreamed")
    calls = result.message.tool_calls
    if len(calls) < 2:
        raise CheckSkipped(f"model behaviour: {len(calls)} tool call(s) for two cities")
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
        raise CheckFailed("two results sent together accepted", got, quirks=("Q34",)) from None
    text = result.message.content.lower()
    words = (("21", "sunny", "paris"), ("15", "rain", "tokyo"))
    if result.message.tool_calls or not all(any(w in text for w in ws) for ws in words):
        raise CheckSkipped(f"model behaviour: the answer does not use both results ({text[:80]!r})")
    return None


async def parallel_flag_live(ctx: LiveContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        raise CheckSkipped(OPENAI_ONLY)
    probes = {
        "with tools": _body(ctx, WEATHER_IN_PARIS, TOOL_WEATHER),
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
            raise CheckFailed(f"200, or a 400/422 ({label})", got, quirks=("Q33",))
        elif label == "with tools":
            calls = len(_scan(ctx, raw)[1])
    if rejected:
        note = f"parallel_tool_calls: false rejected {' and '.join(rejected)}"
        return Normalized(("Q33",), note + "; the adapter never sends it")
    if calls > 1:
        return Normalized(("Q33",), f"parallel_tool_calls: false ignored ({calls} calls)")
    return None


async def none_live(ctx: LiveContext) -> Normalized | None:
    result = await _ask(ctx, "an answer", prompt=SAY_HELLO, tools=[TOOL_WEATHER], max_tokens=64)
    if result.message.tool_calls:
        names = [c.name for c in result.message.tool_calls]
        raise CheckSkipped(f"model behaviour: called {names} for 'say hello'")
    if result.finish_reason not in ("stop", "length"):
        raise CheckFailed("a text answer's finish reason", repr(result.finish_reason))
    if not ctx.target.capabilities.has("tool_choice"):
        return None
    body = _body(ctx, WEATHER_IN_PARIS, TOOL_WEATHER)
    body["tool_choice"] = {"type": "none"} if ctx.wire == "anthropic" else "none"
    answer = (await _probe(ctx, body, "T11-tool-choice-none"))[1]
    if answer.message.tool_calls:
        raise CheckFailed("no call with tool_choice none", repr(answer.message.tool_calls))
    return None


async def unicode_args_live(ctx: LiveContext) -> Normalized | None:
    prompt = 'What is the weather in 東京? Call get_weather with the city "東京".'
    seen: dict[str, str] = {}
    if ctx.target.capabilities.has("tool_choice"):
        raw, result = await _probe(ctx, _body(ctx, prompt, TOOL_WEATHER, force=True), "T12")
        seen = _scan(ctx, raw)[0]
    else:
        result = await _ask(ctx, "an answer", prompt=prompt, tools=[TOOL_WEATHER])
        _model_miss(result, "a CJK city")
    calls = result.message.tool_calls
    if not calls or calls[0].raw_arguments is not None:
        raise CheckFailed("one call whose arguments parse", repr(calls))
    city = calls[0].arguments.get("city")
    if isinstance(city, str) and "\\u" in city:
        raise CheckFailed("the city as characters, not \\u escapes", repr(city))
    if not isinstance(city, str) or not any(ord(ch) > 127 for ch in city):
        raise CheckSkipped(f"model behaviour: the city argument {city!r} has no CJK character")
    return _verdict(seen)


async def foreign_ids_live(ctx: LiveContext) -> Normalized | None:
    history: list[Message] = [UserMessage("What is the weather in Paris, Tokyo and Lima?")]
    for call_id, city in FOREIGN_CALLS:
        call = ToolCall(call_id, GET_WEATHER, {"city": city})
        history += [
            AssistantMessage("", tool_calls=[call]),
            ToolMessage(call_id, f"{city}: sunny."),
        ]
    quirks = ctx.target.quirks
    shape: Normalized | None = None
    try:
        await ctx.ask(stream=False, messages=history, tools=[TOOL_WEATHER], max_tokens=32)
    except ProviderError as error:
        got = str(error)[:200]
        if ctx.wire == "anthropic":
            raise CheckFailed("a history with foreign ids accepted", got, quirks=("Q6",)) from None
        # The same history with the other assistant-content shape: tells ids from content.
        quirks = evolve(quirks, null_assistant_content=not quirks.null_assistant_content)
        try:
            await ctx.ask(
                stream=False, quirks=quirks, messages=history, tools=[TOOL_WEATHER], max_tokens=32
            )
        except ProviderError:
            raise CheckFailed("a history with foreign ids accepted", got, quirks=("Q6",)) from None
        sent = "null" if quirks.null_assistant_content else "''"
        note = f"the ids are accepted once assistant content is {sent} (see A4)"
        shape = Normalized(("Q23",), note)
    if ctx.wire == "anthropic":
        return None
    content = None if quirks.null_assistant_content else ""
    messages = [
        {"role": "user", "content": WEATHER_IN_PARIS},
        {
            "role": "assistant",
            "content": content,
            "tool_calls": [openai_call(LONG_CALL_ID, GET_WEATHER, PARIS_JSON)],
        },
        {"role": "tool", "tool_call_id": LONG_CALL_ID, "content": "Sunny."},
    ]
    raw = await ctx.raw({"messages": messages, "max_tokens": 16}, name="T14-long-id")
    if raw.status in (400, 422):
        return Normalized(("Q6",), "a 60-character id is rejected; the adapter shortens ids to 40")
    return shape


async def agent_loop_live(ctx: LiveContext) -> Normalized | None:
    history: list[Message] = [
        SystemMessage(SYSTEM_PROMPT),
        UserMessage("What is the weather in Paris? Use the get_weather tool."),
    ]
    first = await _ask(ctx, "a first answer", messages=history, tools=[TOOL_WEATHER])
    if not first.message.tool_calls and not ctx.target.quirks.explicit_tool_choice:
        # Some servers only show the tools to the model when tool_choice is given.
        quirks = evolve(ctx.target.quirks, explicit_tool_choice=True, stream_with_tools=False)
        try:
            again = await ctx.ask(
                stream=False, quirks=quirks, messages=history, tools=[TOOL_WEATHER]
            )
        except ProviderError:
            again = first
        if again.message.tool_calls:
            raise CheckFailed(
                "a tool call for the request the profile sends (no tool_choice)",
                "no call; the same request with tool_choice 'auto' gets one: the server ignores "
                "tools unless tool_choice is given (set explicit_tool_choice)",
            )
    _model_miss(first, "the weather in Paris")
    history.append(first.message)
    history += [ToolMessage(c.id, "Paris: sunny, 21 °C.") for c in first.message.tool_calls]
    second = await _ask(ctx, "an answer to the tool result", messages=history, tools=[TOOL_WEATHER])
    if second.message.tool_calls:
        raise CheckSkipped("model behaviour: called a tool again instead of answering")
    if second.finish_reason not in ("stop", "length"):
        raise CheckFailed("a final answer with finish_reason 'stop'", repr(second.finish_reason))
    if not second.message.content.strip():
        raise CheckSkipped("model behaviour: an empty final answer")
    return None
