"""Wire checks: how the adapter copes with the SSE framing servers really send."""

from __future__ import annotations

import json

from agentfsm.adapters.providers import ProviderError
from agentfsm.testing import Pause, Reply

from .._context import RecordedContext
from .._exchange import CALL_TIMEOUT, RecordedExchange, Verdict, ints, on_error, on_success, verdict
from .._frames import DONE, chunk, data, event
from .._model import Check, CheckFailed, Normalized

__all__ = ["CHECKS"]


def _text_frames(ctx: RecordedContext, text: str = "pong") -> list[str]:
    if ctx.wire == "anthropic":
        return [
            event("message_start", {"message": {"usage": {"input_tokens": 5, "output_tokens": 1}}}),
            event(
                "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}
            ),
            event(
                "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}}
            ),
            event("content_block_stop", {"index": 0}),
            event(
                "message_delta",
                {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
            ),
            event("message_stop", {}),
        ]
    return [chunk({"role": "assistant", "content": text}), chunk({}, finish="stop")]


async def field_tolerance(ctx: RecordedContext) -> Normalized | None:
    frames = _text_frames(ctx, "pong")
    # data: without a space, comments, CRLF, and an unknown event type.
    odd = [": keep-alive\r\n\r\n", "event: unknown_kind\ndata: {}\n\n"]
    for frame in frames:
        odd.append(frame.replace("data: ", "data:").replace("\n", "\r\n"))
    if ctx.wire == "openai-chat":
        odd.append("data:[DONE]\r\n\r\n")
    ctx.script(Reply.sse(odd))
    result = await ctx.ask()
    if result.message.content != "pong":
        raise CheckFailed(
            "the text 'pong' from frames with 'data:' and CRLF",
            repr(result.message.content),
            quirks=("Q24",),
        )
    return Normalized(
        ("Q24",), "'data:' without a space, comments, CRLF and unknown events absorbed"
    )


async def terminal_without_done(ctx: RecordedContext) -> Normalized | None:
    frames = _text_frames(ctx, "done")
    if ctx.wire == "anthropic":
        frames = frames[:-1]  # no message_stop
    ctx.script(Reply.sse([*frames, Pause(4)]))  # and the connection stays open
    result = await ctx.ask()
    if result.message.content != "done":
        raise CheckFailed(
            "the answer once the final record arrived",
            repr(result.message.content),
            quirks=("Q25",),
        )
    return Normalized(("Q25",), "a stream without [DONE] that stays open after its final record")


async def empty_choices(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        frames = [event("ping", {}), *_text_frames(ctx, "ok")]
        ctx.script(Reply.sse(frames))
        result = await ctx.ask()
        if result.message.content != "ok":
            raise CheckFailed("'ok' after ping events", repr(result.message.content))
        return None
    frames = [
        chunk(choices=False, prompt_filter_results=[]),
        chunk({"content": "ok"}),
        chunk({}, finish="stop"),
        chunk(
            choices=False, usage={"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}
        ),
        DONE,
    ]
    ctx.script(Reply.sse(frames))
    result = await ctx.ask()
    if result.message.content != "ok":
        raise CheckFailed(
            "'ok' despite chunks with choices: []", repr(result.message.content), quirks=("Q18",)
        )
    if result.usage is None or result.usage.input_tokens != 9:
        raise CheckFailed(
            "usage from the choices-less last chunk (9 in)",
            repr(result.usage),
            quirks=("Q18", "Q21"),
        )
    return Normalized(("Q18",), "choices: [] preamble and usage-only chunks")


async def error_in_200(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        error = event("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}})
        frames = [_text_frames(ctx)[0], error]
    else:
        error = data({"error": {"message": "upstream failed", "code": 502}})
        frames = [chunk({"content": "par"}), error]
    ctx.script(Reply.sse(frames), Reply.sse(frames), Reply.sse(frames), Reply.sse(frames))
    try:
        result = await ctx.ask()
    except ProviderError as raised:
        if not raised.in_stream:
            raise CheckFailed(
                "an error marked in_stream", f"in_stream={raised.in_stream}"
            ) from None
        return None
    except Exception as raised:  # a typed error of another adapter is fine too
        if (
            "error" in str(raised).lower()
            or "overload" in str(raised).lower()
            or "fail" in str(raised).lower()
        ):
            return None
        raise CheckFailed(
            "an error raised for the in-stream error frame", f"{type(raised).__name__}: {raised}"
        ) from None
    raise CheckFailed(
        "an error, never a success",
        f"a success with text {result.message.content!r}",
        quirks=("Q26", "Q28"),
    )


async def unframed_error_body(ctx: RecordedContext) -> Normalized | None:
    body = {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size",
            "type": "exceed_context_size_error",
        }
    }
    ctx.script(Reply.raw(json.dumps(body), status=400, headers={"content-type": "text/plain"}))
    try:
        result = await ctx.ask()
    except ProviderError as raised:
        if raised.status != 400:
            raise CheckFailed(
                "an error carrying status 400", f"status {raised.status}", quirks=("Q27",)
            ) from None
        return None
    except Exception as raised:
        if "400" in str(raised) or "context" in str(raised).lower():
            return None
        raise CheckFailed(
            "an error with the status and body",
            f"{type(raised).__name__}: {raised}",
            quirks=("Q27",),
        ) from None
    raise CheckFailed(
        "an error for a 400 body without SSE framing",
        f"a success {result.message.content!r}",
        quirks=("Q27",),
    )


# -- invariants on a recorded corpus -------------------------------------------------------


def field_tolerance_corpus(exchange: RecordedExchange) -> Verdict | None:
    """Every call that comes back gives a result or a typed error."""
    if exchange.hung:
        return None
    outcome = exchange.outcome
    crash = f"unexpected {type(outcome).__name__}: {str(outcome)[:200]}"
    return verdict(not exchange.crashed, "a ChatResult or a ProviderError", crash)


def terminal_without_done_corpus(exchange: RecordedExchange) -> Verdict | None:
    """No call hangs; a stream without its terminal record still completes."""
    if exchange.hung:
        return Verdict(False, "the call completes (no hang)", f"no answer in {CALL_TIMEOUT:g} s")
    reply = exchange.reply
    if exchange.crashed or not reply.streamed or reply.terminal:
        return None
    return Verdict(True, "the call completes (no hang)")


@on_success
def empty_choices_corpus(exchange: RecordedExchange) -> Verdict | None:
    """The usage of a chunk without choices is kept."""
    usage_chunk = exchange.reply.empty_choices_usage
    if usage_chunk is None:
        return None
    result = exchange.result
    usage = result.usage if result else None
    got = usage if result is not None else exchange.outcome
    prompt = ints(usage_chunk, "prompt_tokens")[:1]
    holds = usage is not None and [usage.input_tokens] == (prompt or [usage.input_tokens])
    return verdict(holds, f"the usage of the chunk without choices (prompt {prompt})", got)


@on_error
def error_in_200_corpus(exchange: RecordedExchange) -> Verdict | None:
    """An error inside a 200 (an empty 200 stream included) is a typed in-stream error."""
    if exchange.reply.status >= 400:
        return None
    error = exchange.error
    holds = error is not None and error.in_stream
    expected = "a ProviderError marked in_stream, never a success"
    return verdict(holds, expected, exchange.outcome)


@on_error
def unframed_error_body_corpus(exchange: RecordedExchange) -> Verdict | None:
    """An HTTP error is a typed error carrying its status."""
    status = exchange.reply.status
    if status < 400:
        return None
    error = exchange.error
    holds = error is not None and error.status == status and not error.in_stream
    return verdict(holds, f"a ProviderError with status {status}", exchange.outcome)


CHECKS = [
    Check(
        "W1",
        "sse.field_tolerance",
        "wire",
        "frames with 'data:' and no space, comments, CRLF, unknown events",
        "the same answer as canonical framing",
        needs=("streaming",),
        quirks=("Q24",),
        recorded=field_tolerance,
        corpus=field_tolerance_corpus,
    ),
    Check(
        "W2",
        "sse.terminal_without_done",
        "wire",
        "a final record, then neither [DONE] nor EOF",
        "the call completes (no hang)",
        needs=("streaming",),
        quirks=("Q25",),
        recorded=terminal_without_done,
        corpus=terminal_without_done_corpus,
    ),
    Check(
        "W3",
        "sse.empty_choices",
        "wire",
        "choices: [] preamble and usage-only chunks",
        "no crash; usage kept",
        needs=("streaming",),
        quirks=("Q18", "Q21"),
        recorded=empty_choices,
        corpus=empty_choices_corpus,
    ),
    Check(
        "W4",
        "sse.error_in_200",
        "wire",
        "an error object / error event inside a 200 stream",
        "a typed error marked in_stream, never an empty success",
        needs=("streaming",),
        quirks=("Q26", "Q28"),
        recorded=error_in_200,
        corpus=error_in_200_corpus,
    ),
    Check(
        "W5",
        "sse.unframed_error_body",
        "wire",
        "a 400 with a JSON error body but no SSE framing",
        "an error carrying the status and the body",
        quirks=("Q27",),
        recorded=unframed_error_body,
        corpus=unframed_error_body_corpus,
    ),
]
