"""Control checks: abort, timeouts by phase, and no blind replay once output was streamed."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from agentfsm.adapters.providers import ProviderError, RetryPolicy, Timeouts
from agentfsm.engine import AbortController, ChatDelta, ChatFn, ChatResult, UserMessage
from agentfsm.testing import Drop, Frame, Pause, Reply, responses_body

from .._context import LiveContext, RecordedContext
from .._frames import DONE, chunk, completion, event, responses_stream
from .._model import Check, CheckFailed, CheckSkipped, ModelBehaviour, Normalized

__all__ = ["CHECKS"]

TIGHT = Timeouts(connect=2, first_byte=0.5, idle=0.5, terminal_grace=0.3)
"""The timeouts C2 gives the adapter: the scripted stalls last four times as long."""
QUICK = 1.0
"""Seconds an aborted call may take to return."""


def _frames(
    ctx: RecordedContext, text: Sequence[str | Pause | Drop], thinking: Sequence[str | Pause] = ()
) -> list[Frame]:
    """A whole stream: ``thinking`` then ``text`` pieces, with pauses and drops in place."""
    if ctx.wire == "openai-responses":
        return responses_stream(text, thinking)
    if ctx.wire == "anthropic":
        usage = {"input_tokens": 5, "output_tokens": 1}
        out: list[Frame] = [event("message_start", {"message": {"id": "msg_1", "usage": usage}})]
        blocks = [("thinking", thinking), ("text", text)] if thinking else [("text", text)]
        for index, (kind, parts) in enumerate(blocks):
            start = {"index": index, "content_block": {"type": kind, kind: ""}}
            out.append(event("content_block_start", start))
            for part in parts:
                delta = {"index": index, "delta": {"type": f"{kind}_delta", kind: part}}
                out.append(event("content_block_delta", delta) if isinstance(part, str) else part)
            out.append(event("content_block_stop", {"index": index}))
        end = {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}
        return [*out, event("message_delta", end), event("message_stop", {})]
    out = [chunk({"role": "assistant", "content": ""})]
    out.extend(chunk({"reasoning_content": p}) if isinstance(p, str) else p for p in thinking)
    out.extend(chunk({"content": p}) if isinstance(p, str) else p for p in text)
    return [*out, chunk({}, finish="stop"), DONE]


def _ok(ctx: RecordedContext) -> Reply:
    if ctx.wire == "openai-responses":
        return Reply.json(responses_body("ok"))
    if ctx.wire == "anthropic":
        content = [{"type": "text", "text": "ok"}]
        message = {"type": "message", "role": "assistant", "content": content}
        return Reply.json({**message, "stop_reason": "end_turn", "usage": {"input_tokens": 5}})
    return Reply.json(completion({"role": "assistant", "content": "ok"}))


def _kind(error: BaseException) -> str:
    kind = getattr(error, "kind", None)
    return kind if isinstance(kind, str) else type(error).__name__


async def _close(chat: ChatFn) -> None:
    close = getattr(chat, "aclose", None)
    if callable(close):
        await close()


async def _call(chat: ChatFn, deltas: list[ChatDelta], **options: Any) -> ChatResult | Exception:
    """One call the way the loop makes it; the error it raised, if it raised."""
    try:
        return await chat([UserMessage("Say hello.")], [], on_delta=deltas.append, **options)
    except Exception as error:
        return error


def _said(answer: ChatResult | Exception) -> str:
    if isinstance(answer, Exception):
        return f"{_kind(answer)} ({str(answer)[:160]})"
    return f"a success {answer.message.content[:60]!r}"


# -- C1 ------------------------------------------------------------------------------------


async def _abort_after_first_delta(
    chat: ChatFn, prompt: str
) -> tuple[ChatResult | Exception, float | None, float]:
    """Call ``chat``, aborting on the first delta: (answer, when aborted, when it returned)."""
    controller = AbortController()
    aborted: list[float] = []

    def on_delta(delta: ChatDelta) -> None:
        if not aborted:
            aborted.append(time.monotonic())
            controller.abort()

    try:
        answer: ChatResult | Exception = await chat(
            [UserMessage(prompt)], [], max_tokens=1024, signal=controller.signal, on_delta=on_delta
        )
    except Exception as error:
        answer = error
    finally:
        await _close(chat)
    return answer, (aborted[0] if aborted else None), time.monotonic()


def _judge_abort(answer: ChatResult | Exception, took: float) -> None:
    if isinstance(answer, ChatResult):
        if answer.finish_reason == "aborted" and took < QUICK:
            return
        got = f"{_said(answer)} {took:.2f} s after the abort"
        raise CheckFailed(f"the call ends within {QUICK:g} s of the abort", got, quirks=("Q35",))
    if _kind(answer) not in ("aborted", "AbortError"):
        raise CheckFailed("a ProviderError of kind aborted (or AbortError)", _said(answer))
    if took >= QUICK:
        raise CheckFailed(f"the call ends within {QUICK:g} s of the abort", f"{took:.2f} s")


async def abort(ctx: RecordedContext) -> Normalized | None:
    ctx.script(Reply.sse(_frames(ctx, ["Hel", Pause(2.5), "lo, world"])))
    answer, aborted, ended = await _abort_after_first_delta(ctx.chat(), "Say hello.")
    if aborted is None:
        raise CheckFailed("a text delta before the pause", _said(answer))
    _judge_abort(answer, ended - aborted)
    if len(ctx.requests) != 1:
        raise CheckFailed("no retry after an abort", f"{len(ctx.requests)} requests")
    return None


async def abort_live(ctx: LiveContext) -> Normalized | None:
    prompt = "Count from 1 to 300, separated by spaces."
    answer, aborted, ended = await _abort_after_first_delta(ctx.chat(stream=True), prompt)
    if aborted is None:
        if isinstance(answer, Exception):
            raise CheckFailed("a streamed answer to abort", _said(answer))
        raise ModelBehaviour(f"no text delta arrived ({_said(answer)})")
    took = ended - aborted
    if isinstance(answer, ChatResult) and answer.finish_reason != "aborted" and took < QUICK:
        raise ModelBehaviour("the answer ended before the abort could be seen")
    _judge_abort(answer, took)
    return None


# -- C2 ------------------------------------------------------------------------------------


def _timed_out(answer: ChatResult | Exception, phase: str, what: str) -> None:
    kind = _kind(answer) if isinstance(answer, Exception) else None
    if kind != "timeout" or getattr(answer, "phase", None) != phase:
        got = _said(answer)
        if isinstance(answer, Exception) and hasattr(answer, "phase"):
            got = f"{got}, phase {getattr(answer, 'phase', None)!r}"
        raise CheckFailed(f"{what}: a timeout error, phase {phase}", got, quirks=("Q36",))


async def timeout_phases(ctx: RecordedContext) -> Normalized | None:
    chat = ctx.chat()
    try:
        if not isinstance(getattr(chat, "timeouts", None), Timeouts):
            raise CheckSkipped("the adapter's timeouts cannot be set")
        try:
            setattr(chat, "timeouts", TIGHT)  # noqa: B010 - ChatFn declares no such attribute
            if isinstance(getattr(chat, "retry", None), RetryPolicy):
                setattr(chat, "retry", RetryPolicy(max_attempts=1))  # noqa: B010
        except (AttributeError, TypeError):
            raise CheckSkipped("the adapter's timeouts cannot be set") from None
        ctx.server.handler = lambda _request: Reply.stall(2.0)  # for retries, if any
        ctx.script(Reply.stall(2.0, _ok(ctx)))
        _timed_out(await _call(chat, []), "first_byte", "no headers for 2 s")
        ctx.script(Reply.sse(_frames(ctx, ["Hel", Pause(2.0), "lo"])))
        _timed_out(await _call(chat, []), "idle", "a stream silent for 2 s after a delta")
        steady: list[str | Pause] = [".", Pause(0.2)] * 4
        text: list[str | Pause | Drop] = ["a", Pause(0.2)] * 4
        ctx.script(Reply.sse(_frames(ctx, text, steady)))
        answer = await _call(chat, [])
        if not isinstance(answer, ChatResult) or answer.message.content != "aaaa":
            expected = "'aaaa' from a 1.6 s stream with a piece every 0.2 s (reasoning first)"
            raise CheckFailed(expected, _said(answer), quirks=("Q36",))
    finally:
        ctx.server.handler = None
        await _close(chat)
    return None


# -- C3 ------------------------------------------------------------------------------------


async def no_blind_replay(ctx: RecordedContext) -> Normalized | None:
    partial = Reply.sse(_frames(ctx, ["The answer is ", Drop()]))
    ctx.script(partial, partial, partial, _ok(ctx))
    deltas: list[ChatDelta] = []
    chat = ctx.chat()
    try:
        answer = await _call(chat, deltas)
    finally:
        await _close(chat)
    text = "".join(delta.text for delta in deltas if delta.kind == "text")
    if isinstance(answer, ChatResult):
        got = f"{_said(answer)} after {len(ctx.requests)} request(s); deltas {text!r}"
        raise CheckFailed("an error once the stream broke after output", got, quirks=("Q28",))
    if len(ctx.requests) != 1 or text != "The answer is ":
        got = f"{len(ctx.requests)} requests; deltas {text!r}"
        raise CheckFailed("1 request, 'The answer is ' streamed once", got, quirks=("Q28",))
    if isinstance(answer, ProviderError) and not answer.response_started:
        raise CheckFailed("response_started on the error", _said(answer))
    return None


CHECKS = [
    Check(
        "C1",
        "control.abort",
        "control",
        "an abort on the first delta; recorded: a stream that pauses 2.5 s after it",
        "the call returns within 1 s, as aborted (ProviderError kind aborted or AbortError)",
        needs=("streaming",),
        quirks=("Q35",),
        recorded=abort,
        live=abort_live,
        responses=("recorded", "live"),
    ),
    Check(
        "C2",
        "control.timeout_phases",
        "control",
        "with 0.5 s timeouts: a 2 s stall before headers, 2 s of silence mid-stream, "
        "and a steady 1.6 s stream (reasoning first)",
        "timeout phase first_byte, then idle; the steady stream is not cut",
        needs=("streaming",),
        quirks=("Q36",),
        recorded=timeout_phases,
        responses=("recorded",),
    ),
    Check(
        "C3",
        "control.no_blind_replay",
        "control",
        "a connection reset after text reached on_delta",
        "an error, not a silent retry: 1 request, no duplicated text",
        needs=("streaming",),
        quirks=("Q28",),
        recorded=no_blind_replay,
        responses=("recorded",),
    ),
]
