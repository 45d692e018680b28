"""Answer checks: plain text answers, their deltas and finish reasons, and history shapes."""

from __future__ import annotations

from attrs import evolve

from agentfsm.adapters.providers import OpenAIQuirks, ProviderError
from agentfsm.engine import (
    AssistantMessage,
    ChatDelta,
    ChatResult,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agentfsm.testing import Reply, responses_body

from .._context import TOOL_WEATHER, LiveContext, RawExchange, RecordedContext
from .._exchange import RecordedExchange, Verdict, on_success, verdict
from .._frames import DONE, chunk, completion, event, responses_stream
from .._model import Check, CheckFailed, ModelBehaviour, Normalized
from .causes import blocks_as_text, expect_answer, refusal, tool_turn_needs_text

__all__ = ["CHECKS"]

_USAGE = {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}
_PIECES = ["Hel", "lo", ", ", "wörld", " 🌍", "", "\n", "  — done."]


def _answer(ctx: RecordedContext, pieces: list[str], *, stop: str | None = None) -> Reply:
    """A streamed text answer in ``pieces``, ending with ``stop`` (in the wire's own words)."""
    if ctx.wire == "openai-responses":
        return Reply.sse(responses_stream(pieces, incomplete=stop))
    if ctx.wire == "anthropic":
        start = {"model": "fake-model", "usage": {"input_tokens": 9, "output_tokens": 1}}
        block = {"type": "text", "text": ""}
        return Reply.sse(
            [
                event("message_start", {"message": start}),
                event("content_block_start", {"index": 0, "content_block": block}),
                *(
                    event(
                        "content_block_delta",
                        {"index": 0, "delta": {"type": "text_delta", "text": p}},
                    )
                    for p in pieces
                ),
                event("content_block_stop", {"index": 0}),
                event(
                    "message_delta",
                    {"delta": {"stop_reason": stop or "end_turn"}, "usage": {"output_tokens": 5}},
                ),
                event("message_stop", {}),
            ]
        )
    return Reply.sse(
        [
            chunk({"role": "assistant", "content": ""}),
            *(chunk({"content": p}) for p in pieces),
            chunk({}, finish=stop or "stop"),
            chunk(choices=False, usage=_USAGE),
            DONE,
        ]
    )


def _answer_json(ctx: RecordedContext, text: str, *, stop: str | None = None) -> Reply:
    """The same answer unstreamed."""
    if ctx.wire == "openai-responses":
        body = responses_body(text)
        if stop is not None:
            body.update(status="incomplete", incomplete_details={"reason": stop})
        return Reply.json(body)
    if ctx.wire == "anthropic":
        return Reply.json(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "fake-model",
                "content": [{"type": "text", "text": text}],
                "stop_reason": stop or "end_turn",
                "usage": {"input_tokens": 9, "output_tokens": 5},
            }
        )
    message = {"role": "assistant", "content": text}
    return Reply.json(completion(message, finish=stop or "stop", usage=_USAGE))


def _expect_answer(result: ChatResult, how: str, text: str | None = None) -> None:
    content = result.message.content
    if not content.strip() or (text is not None and content != text):
        raise CheckFailed(f"the text {text or 'non-empty'!r} ({how})", repr(content))
    if result.finish_reason != "stop":
        raise CheckFailed(f"finish_reason 'stop' ({how})", repr(result.finish_reason))
    if not result.model:
        raise CheckFailed(f"the model name ({how})", repr(result.model))


def _modes(ctx: LiveContext) -> tuple[bool, ...]:
    return (False, True) if ctx.target.capabilities.streaming else (False,)


def _how(stream: bool) -> str:
    return "streamed" if stream else "unstreamed"


async def basic(ctx: RecordedContext) -> Normalized | None:
    ctx.script(_answer(ctx, ["PO", "NG"]), _answer_json(ctx, "PONG"))
    for how in ("streamed", "unstreamed"):
        _expect_answer(await ctx.ask(prompt="Reply with the single word PONG."), how, "PONG")
    return None


async def basic_live(ctx: LiveContext) -> Normalized | None:
    prompt = "Reply with the single word PONG."
    # The Messages adapter sends text blocks: do they reach the model as their text?
    counts = await blocks_as_text(ctx, prompt) if ctx.wire == "anthropic" else None
    for stream in _modes(ctx):
        result = await ctx.ask(stream=stream, prompt=prompt, max_tokens=256)
        if result.finish_reason == "length":
            measured = (
                f"; prompt tokens as a string {counts[0]}, as a text block {counts[1]}"
                if counts
                else ""
            )
            raise ModelBehaviour(f"the answer to 'reply PONG' hit max_tokens=256{measured}")
        _expect_answer(result, _how(stream))
    return None


def _conserved(result: ChatResult, deltas: list[ChatDelta], text: str | None = None) -> None:
    streamed = "".join(d.text for d in deltas if d.kind == "text")
    if streamed != result.message.content:
        got = f"deltas {streamed!r}, final {result.message.content!r}"
        raise CheckFailed("the concatenated text deltas equal to the final text", got)
    if text is not None and result.message.content != text:
        raise CheckFailed(f"the final text {text!r}", repr(result.message.content))
    if result.finish_reason is None:
        raise CheckFailed("one final record with a finish reason", "no finish reason")


async def text_conservation(ctx: RecordedContext) -> Normalized | None:
    deltas: list[ChatDelta] = []
    ctx.script(_answer(ctx, _PIECES))
    _conserved(await ctx.ask(deltas=deltas), deltas, "".join(_PIECES))
    return None


def _terminal_records(ctx: LiveContext, raw: RawExchange) -> int:
    payloads = [p for p in raw.sse_payloads() if isinstance(p, dict)]
    if ctx.wire == "anthropic":
        return sum(1 for p in payloads if p.get("type") == "message_stop")
    if ctx.wire == "openai-responses":
        terminal = ("response.completed", "response.incomplete")
        return sum(1 for p in payloads if p.get("type") in terminal)
    return sum(
        1
        for p in payloads
        for choice in p.get("choices") or []
        if isinstance(choice, dict) and choice.get("finish_reason")
    )


async def text_conservation_live(ctx: LiveContext) -> Normalized | None:
    prompt = "Write one short sentence about the sea."
    deltas: list[ChatDelta] = []
    _conserved(await ctx.ask(stream=True, prompt=prompt, max_tokens=48, deltas=deltas), deltas)
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 48, "stream": True}
    raw = await ctx.raw(body, name="A2-stream")
    if raw.status != 200:
        raise CheckFailed(
            "HTTP 200 for a plain streamed request", f"{raw.status}: {raw.text[:200]}"
        )
    finals = _terminal_records(ctx, raw)
    if finals == 0:
        raise CheckFailed("one terminal record in the raw stream", "none")
    if finals > 1:
        return Normalized((), f"the raw stream has {finals} terminal records; the adapter kept one")
    return None


async def length(ctx: RecordedContext) -> Normalized | None:
    words = {"anthropic": "max_tokens", "openai-responses": "max_output_tokens"}
    stop = words.get(ctx.wire, "length")
    ctx.script(_answer(ctx, ["1, 2, ", "3,"], stop=stop), _answer_json(ctx, "1, 2, 3,", stop=stop))
    for how in ("streamed", "unstreamed"):
        try:
            result = await ctx.ask(prompt="Count to 100.", max_tokens=5)
        except ProviderError as error:
            raise CheckFailed(
                f"finish_reason 'length' ({how})", f"a {error.kind} error: {error}"
            ) from None
        if result.finish_reason != "length":
            raise CheckFailed(f"finish_reason 'length' ({how})", repr(result.finish_reason))
        if result.message.content != "1, 2, 3,":
            raise CheckFailed(f"the partial text kept ({how})", repr(result.message.content))
    sent = ctx.requests[0].json()
    fields = ("max_tokens", "max_completion_tokens", "max_output_tokens")
    if 5 not in (sent.get(name) for name in fields):
        raise CheckFailed("max_tokens 5 in the request", repr(sent.get("max_tokens")))
    return None


async def length_live(ctx: LiveContext) -> Normalized | None:
    for stream in _modes(ctx):
        prompt = "Count from 1 to 100, separated by commas."
        try:
            result = await ctx.ask(stream=stream, prompt=prompt, max_tokens=5)
        except ProviderError as error:
            raise CheckFailed("finish_reason 'length'", f"a {error.kind} error: {error}") from None
        if result.finish_reason == "length":
            continue
        usage = result.usage
        out = usage.output_tokens if usage else len(result.message.content.split())
        if result.finish_reason == "stop" and out < 5:
            raise ModelBehaviour(f"the answer ended after {out} tokens, before max_tokens")
        got = f"{result.finish_reason!r} after {out} output tokens ({_how(stream)})"
        if out > 5 and usage is not None:  # the limit never reached the model
            got += ": the answer ran past the limit"
            raise CheckFailed("finish_reason 'length' with max_tokens=5", got, quirks=("Q51",))
        longer = await _goes_on(ctx, prompt, stream, out)
        if longer is not None:  # the answer was cut, and the server called it finished
            got += f"; the same request with max_tokens=64 goes on ({longer} output tokens)"
            raise CheckFailed("finish_reason 'length' with max_tokens=5", got, quirks=("Q49",))
        raise CheckFailed("finish_reason 'length' with max_tokens=5", got)
    return None


async def _goes_on(ctx: LiveContext, prompt: str, stream: bool, out: int) -> int | None:
    """The output tokens of the same request with room to go on, when it does go on past
    ``out``; ``None`` otherwise or when it cannot be measured."""
    try:
        result = await ctx.ask(stream=stream, prompt=prompt, max_tokens=64)
    except ProviderError:
        return None
    longer = result.usage.output_tokens if result.usage else 0
    return longer if longer > out else None


_HISTORY: list[Message] = [
    UserMessage("What is the weather in Paris?"),
    AssistantMessage("", tool_calls=[ToolCall("call_a4", "get_weather", {"city": "Paris"})]),
    ToolMessage("call_a4", "Sunny, 21 °C."),
]


async def _rejection(
    ctx: LiveContext, quirks: OpenAIQuirks | None, history: list[Message] = _HISTORY
) -> str | None:
    """Why the history was rejected, or ``None`` when it was answered."""
    try:
        result = await ctx.ask(
            stream=False, quirks=quirks, messages=history, tools=[TOOL_WEATHER], max_tokens=32
        )
    except ProviderError as error:
        return str(error)[:200] if refusal(error) else f"not a refusal: {str(error)[:180]}"
    expect_answer(result, "an answer to the history")
    return None


async def _plain_fails(ctx: LiveContext) -> str | None:
    """Whether the same request without the tool-call turn fails too (then the turn's shape
    is not what the server rejects)."""
    return await _rejection(ctx, None, _HISTORY[:1])


async def content_shapes_live(ctx: LiveContext) -> Normalized | None:
    if ctx.wire == "openai-responses":  # calls are items of their own: no content to shape
        error = await _rejection(ctx, None)
        if error is not None:
            plain = await _plain_fails(ctx)
            got = f"{error}; without the tool-call turn: {plain or 'accepted'}"
            raise CheckFailed("a tool-call history accepted", got)
        return None
    if ctx.wire == "anthropic":
        error = await _rejection(ctx, None)
        if error is not None:
            shape = await tool_turn_needs_text(ctx, TOOL_WEATHER)
            if shape is not None:  # the content of the turn, as with null or '' (Q23)
                raise CheckFailed("a tool-call history accepted", shape, quirks=("Q23",))
            plain = await _plain_fails(ctx)
            got = f"{error}; without the tool-call turn: {plain or 'accepted'}"
            raise CheckFailed("a tool-call history accepted", got)
        return None
    profile = ctx.target.quirks
    null = await _rejection(ctx, evolve(profile, null_assistant_content=True))
    empty = await _rejection(ctx, evolve(profile, null_assistant_content=False))
    if null is not None and empty is not None:
        got = f"null rejected ({null}); '' rejected ({empty})"
        plain = await _plain_fails(ctx)
        if plain is not None:  # everything fails: no shape to blame
            raise CheckFailed("a tool-call history accepted", f"{got}; without it too ({plain})")
        raise CheckFailed("assistant content null or '' accepted", got, quirks=("Q23",))
    if null is not None:
        fix = "OpenAIQuirks(null_assistant_content=False)"
        return Normalized(("Q23",), f"content null rejected ({null}); accepted with {fix}")
    if empty is not None:
        if not profile.null_assistant_content:
            got = f"'' (the profile's shape) rejected: {empty}"
            raise CheckFailed("the profile's assistant content accepted", got, quirks=("Q23",))
        return Normalized(("Q23",), f"content '' rejected ({empty}); null (the default) accepted")
    return None


# -- invariants on a recorded corpus -------------------------------------------------------

_LENGTH_FINISHES = frozenset({"length", "max_tokens", "max_output_tokens"})
_STOP_FINISHES = frozenset({"stop", "end_turn", "stop_sequence", "completed"})


@on_success
def basic_corpus(exchange: RecordedExchange) -> Verdict | None:
    """A text answer: the recorded text, its finish and the model name."""
    reply, result = exchange.reply, exchange.result
    if _LENGTH_FINISHES & set(reply.finish) or reply.calls:
        return None
    content = result.message.content if result else None
    finish = result.finish_reason if result else None
    stop = "stop" if _STOP_FINISHES & set(reply.finish) else None
    holds = isinstance(content, str) and finish is not None and finish == (stop or finish)
    holds = holds and content == reply.text and bool(result and (result.model or not reply.model))
    summary = result if result is not None else exchange.outcome
    return verdict(holds, f"the recorded text, finish {stop or 'set'}, the model", summary)


@on_success
def text_conservation_corpus(exchange: RecordedExchange) -> Verdict | None:
    """A stream's text deltas add up to the final text."""
    if not exchange.reply.streamed:
        return None
    result, streamed = exchange.result, exchange.streamed
    content = result.message.content if result else None
    got = f"deltas {streamed!r:.80}, final {content!r:.80}" if result else exchange.outcome
    return verdict(result is not None and streamed == (content or ""), "equal texts", got)


@on_success
def length_corpus(exchange: RecordedExchange) -> Verdict | None:
    """A ``length`` finish stays one, with the partial text kept."""
    reply, result = exchange.reply, exchange.result
    if not _LENGTH_FINISHES & set(reply.finish):
        return None
    content = result.message.content if result else None
    finish = result.finish_reason if result else None
    holds = finish == "length" and bool(content or not reply.text)
    summary = result if result is not None else exchange.outcome
    return verdict(holds, "finish 'length', the partial text kept", summary)


CHECKS = [
    Check(
        "A1",
        "answer.basic",
        "answers",
        "'reply PONG', streamed and unstreamed",
        "non-empty text, finish_reason 'stop', the model name; live on the Messages wire: a "
        "text block counts as many prompt tokens as its text",
        recorded=basic,
        live=basic_live,
        corpus=basic_corpus,
        responses=("recorded", "live"),
    ),
    Check(
        "A2",
        "answer.text_conservation",
        "answers",
        "a streamed answer in many pieces (unicode, empty)",
        "the concatenated text deltas equal the final text; exactly one final record",
        needs=("streaming",),
        recorded=text_conservation,
        live=text_conservation_live,
        corpus=text_conservation_corpus,
        responses=("recorded", "live"),
    ),
    Check(
        "A3",
        "answer.length",
        "answers",
        "max_tokens=5 on a longer answer",
        "finish_reason 'length', the partial text kept, never an overflow error",
        needs=("max_tokens",),
        quirks=("Q49", "Q51"),
        recorded=length,
        live=length_live,
        corpus=length_corpus,
        responses=("recorded", "live"),
    ),
    Check(
        "A4",
        "history.content_shapes",
        "answers",
        "a history with an assistant tool-call turn whose content is null, then ''",
        "accepted, or accepted with the shape the quirk profile sends",
        needs=("tools",),
        quirks=("Q23", "Q37"),
        live=content_shapes_live,
        responses=("live",),
    ),
]
