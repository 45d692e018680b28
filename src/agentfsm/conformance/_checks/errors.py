"""Error checks: each failure gets the right kind, and only the retryable ones are retried.

Retries happen inside the adapter, under its own policy: the scripted server counts the
requests. Replies that should be retried ask for no delay (``retry-after: 0``), so a check
stays fast whatever the adapter's backoff.
"""

from __future__ import annotations

import re
import time
from typing import Any

from attrs import evolve, frozen

from agentfsm.adapters.providers import ProviderError, is_overflow_message
from agentfsm.engine import ChatDelta, ChatResult, UserMessage
from agentfsm.testing import Drop, Reply, responses_body

from .._context import LiveContext, RecordedContext
from .._exchange import CorpusJudge, RecordedExchange, RecordedReply, Verdict, on_error, verdict
from .._frames import chunk, completion, data, event, response_event, responses_stream
from .._hints import capability_hint
from .._model import Check, CheckFailed, CheckSkipped, Normalized

__all__ = ["CHECKS"]

PONG = "Reply with the single word PONG."
NOW = {"retry-after": "0"}
_ANTHROPIC_TYPES = {401: "authentication_error", 413: "request_too_large", 429: "rate_limit_error"}


@frozen
class _Outcome:
    result: ChatResult | None
    error: Exception | None
    requests: int
    seconds: float


def _kind(error: BaseException) -> str:
    kind = getattr(error, "kind", None)
    return kind if isinstance(kind, str) else type(error).__name__


def _describe(out: _Outcome) -> str:
    if out.error is not None:
        text = f"{_kind(out.error)} error ({str(out.error)[:160]})"
    else:
        text = f"a success {out.result.message.content if out.result else None!r}"
    return f"{text} after {out.requests} request(s)"


async def _run(
    ctx: RecordedContext, *replies: Reply, deltas: list[ChatDelta] | None = None
) -> _Outcome:
    """Script ``replies``, call a fresh adapter once, and count the requests it made."""
    before = len(ctx.requests)
    ctx.script(*replies)
    started = time.monotonic()
    result: ChatResult | None = None
    error: Exception | None = None
    try:
        result = await ctx.ask(prompt=PONG, deltas=deltas)
    except Exception as raised:
        error = raised
    return _Outcome(result, error, len(ctx.requests) - before, time.monotonic() - started)


def _ok(ctx: RecordedContext) -> Reply:
    if ctx.wire == "openai-responses":
        return Reply.json(responses_body("ok"))
    if ctx.wire == "anthropic":
        content = [{"type": "text", "text": "ok"}]
        message = {"type": "message", "role": "assistant", "content": content}
        return Reply.json({**message, "stop_reason": "end_turn", "usage": {"input_tokens": 5}})
    return Reply.json(completion({"role": "assistant", "content": "ok"}))


def _error(
    ctx: RecordedContext,
    status: int,
    message: str,
    *,
    kind: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """An error body shaped the way the wire's own provider shapes it."""
    body: dict[str, Any]
    if ctx.wire == "anthropic":
        default = "invalid_request_error" if status < 500 else "api_error"
        error = {"type": kind or _ANTHROPIC_TYPES.get(status, default), "message": message}
        body = {"type": "error", "error": {**error, **({"code": code} if code else {})}}
    else:
        body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return Reply.json(body, status=status, headers=headers)


def _stream_error(ctx: RecordedContext, before: str | None) -> Reply:
    """A 200 stream carrying an overloaded error, after the text ``before`` if given."""
    overloaded = {"type": "overloaded_error", "message": "Overloaded"}
    if ctx.wire == "openai-responses":
        frames = responses_stream([before] if before is not None else [])[:-1]
        if before is None:
            frames = frames[:1]  # no item before the error
        failure = {"code": "server_is_overloaded", "message": "Overloaded", "param": None}
        return Reply.sse([*frames, response_event("error", failure)], headers=NOW)
    if ctx.wire == "anthropic":
        frames = [
            event("message_start", {"message": {"id": "msg_1", "usage": {"input_tokens": 5}}})
        ]
        if before is not None:
            block = {"type": "text", "text": ""}
            frames.append(event("content_block_start", {"index": 0, "content_block": block}))
            delta = {"type": "text_delta", "text": before}
            frames.append(event("content_block_delta", {"index": 0, "delta": delta}))
        frames.append(event("error", {"error": overloaded}))
    else:
        frames = [chunk({"role": "assistant", "content": before})] if before is not None else []
        frames.append(data({"error": overloaded}))
    return Reply.sse(frames, headers=NOW)


async def _fails(
    ctx: RecordedContext, reply: Reply, kind: str, what: str, quirks: tuple[str, ...] = ()
) -> _Outcome:
    """``reply`` makes the call fail with ``kind`` at once: one request, no retry."""
    out = await _run(ctx, reply, deltas=[])
    if out.error is None or _kind(out.error) != kind or out.requests != 1:
        expected = f"{what}: an error of kind {kind} after exactly 1 request"
        raise CheckFailed(expected, _describe(out), quirks=quirks)
    return out


async def _recovers(
    ctx: RecordedContext, reply: Reply, what: str, quirks: tuple[str, ...] = (), wait: float = 0
) -> None:
    """After ``reply`` the call is retried once (waiting ``wait`` s or more) and succeeds."""
    out = await _run(ctx, reply, _ok(ctx), deltas=[])
    answer = out.result.message.content if out.result is not None else None
    if out.error is not None or out.requests != 2 or answer != "ok":
        raise CheckFailed(f"{what}: retried once, then 'ok'", _describe(out), quirks=quirks)
    if out.seconds < wait:
        raise CheckFailed(
            f"{what}: a wait of {wait:g} s or more", f"{out.seconds:.2f} s", quirks=quirks
        )


# -- E1, E2 --------------------------------------------------------------------------------


async def auth(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        await _fails(ctx, _error(ctx, 401, "invalid x-api-key"), "auth", "401")
        return None
    message = "Incorrect API key provided: sk-wrong. You can find your API key on your account."
    reply = _error(ctx, 401, message, kind="invalid_request_error", code="invalid_api_key")
    await _fails(ctx, reply, "auth", "401")
    bare = Reply.json({"detail": "Invalid API Key"}, status=401)
    await _fails(ctx, bare, "auth", "401 with a bare {'detail': ...} body")
    return None


async def auth_live(ctx: LiveContext) -> Normalized | None:
    wrong = LiveContext(evolve(ctx.target, api_key="sk-agentfsm-conformance-wrong-key-0000"))
    try:
        result = await wrong.ask(stream=False, prompt=PONG, max_tokens=8)
    except ProviderError as error:
        if error.kind != "auth":
            raise CheckFailed("an auth error for a wrong key", f"{error.kind} ({error})") from None
        return None
    raise CheckSkipped(f"the endpoint accepts any key (answered {result.message.content[:40]!r})")


async def bad_request(ctx: RecordedContext) -> Normalized | None:
    if ctx.wire == "anthropic":
        reply = _error(ctx, 400, "temperature: range: 0..1")
        await _fails(ctx, reply, "bad_request", "400 invalid_request_error")
        return None
    message = "Invalid 'temperature': decimal above maximum value. Expected a value <= 2."
    reply = _error(ctx, 400, message, kind="invalid_request_error", code="decimal_above_max_value")
    await _fails(ctx, reply, "bad_request", "400 invalid_request_error")
    detail = [{"type": "less_than_equal", "loc": ["body", "temperature"], "msg": "<= 2"}]
    await _fails(ctx, Reply.json({"detail": detail}, status=422), "bad_request", "422 detail")
    return None


async def bad_request_live(ctx: LiveContext) -> Normalized | None:
    for temperature in (99.0, -1.0):
        body = {"messages": [{"role": "user", "content": PONG}], "max_tokens": 8}
        raw = await ctx.raw({**body, "temperature": temperature}, name="errors.bad_request")
        if raw.status < 400:
            continue
        if raw.status >= 500 or raw.status == 429:
            got = f"HTTP {raw.status}: {raw.text[:160]}"
            raise CheckFailed(f"a 4xx for temperature={temperature:g}", got)
        chat = ctx.chat(stream=False)
        try:
            result = await chat([UserMessage(PONG)], [], temperature=temperature, max_tokens=8)
        except ProviderError as error:
            if error.kind != "bad_request":
                raise CheckFailed("a bad_request error", f"{error.kind} ({error})") from None
            return None
        finally:
            close = getattr(chat, "aclose", None)
            if callable(close):
                await close()
        got = f"a success {result.message.content[:40]!r}"
        raise CheckFailed(f"a bad_request error, as raw temperature={temperature:g} got", got)
    raise CheckSkipped("the endpoint accepts temperature 99 and -1")


# -- E3, E4, E5, E6 ------------------------------------------------------------------------

_RPM = "Rate limit reached for gpt-4o on requests per min (RPM): Limit 3, Used 3, Requested 1."


async def rate_limit(ctx: RecordedContext) -> Normalized | None:
    openai = ctx.wire == "openai-chat"

    def limit(message: str = _RPM, **headers: str) -> Reply:
        code = "rate_limit_exceeded" if openai else None
        return _error(
            ctx, 429, message, kind="requests" if openai else None, code=code, headers=headers
        )

    await _recovers(ctx, limit(**NOW), "429 with Retry-After: 0")
    await _recovers(ctx, limit(**{"retry-after-ms": "300"}), "429, retry-after-ms: 300", wait=0.28)
    again = limit(f"{_RPM} Please try again in 0.398s.")
    await _recovers(ctx, again, "429 saying 'try again in 0.398s'", wait=0.35)
    await _recovers(ctx, limit(**NOW, **{"x-should-retry": "true"}), "429, x-should-retry: true")
    told = limit(**NOW, **{"x-should-retry": "false"})
    await _fails(ctx, told, "rate_limit", "429 with x-should-retry: false")
    return None


async def quota(ctx: RecordedContext) -> Normalized | None:
    q32 = ("Q32",)
    if ctx.wire == "anthropic":
        low = "Your credit balance is too low to access the Anthropic API."
        await _fails(ctx, _error(ctx, 400, low), "quota", "a credit-balance error", q32)
        minute = "This request would exceed your rate limit of 50 requests per minute."
        await _recovers(ctx, _error(ctx, 429, minute, headers=NOW), "a per-minute 429", q32)
        return None
    exhausted = "You exceeded your current quota, please check your plan and billing details."
    kind = code = "insufficient_quota"
    reply = _error(ctx, 429, exhausted, kind=kind, code=code, headers=NOW)
    await _fails(ctx, reply, "quota", "429 insufficient_quota", q32)
    reached = _error(ctx, 429, "The usage limit has been reached", kind="usage_limit_reached")
    await _fails(ctx, reached, "quota", "429 usage_limit_reached", q32)
    reply = _error(ctx, 429, _RPM, kind="requests", code="rate_limit_exceeded", headers=NOW)
    await _recovers(ctx, reply, "a per-minute 429", q32)
    return None


async def overloaded(ctx: RecordedContext) -> Normalized | None:
    busy = _error(ctx, 529, "Overloaded", kind="overloaded_error", headers=NOW)
    await _recovers(ctx, busy, "529 overloaded_error")
    slow = _error(ctx, 503, "Reduce your rate.", kind="api_error", code="slow_down", headers=NOW)
    await _recovers(ctx, slow, "503 slow_down")
    first = _stream_error(ctx, None)
    await _recovers(ctx, first, "an overloaded error as the stream's first event", ("Q28",))
    late = _stream_error(ctx, "Hel")
    out = await _fails(ctx, late, "overloaded", "an overloaded error after a delta", ("Q28",))
    if getattr(out.error, "response_started", True) is not True:
        raise CheckFailed("response_started on the error", _describe(out), quirks=("Q28",))
    return Normalized(("Q28",), "overloaded_error inside a 200 stream: retried before output only")


async def transient_5xx(ctx: RecordedContext) -> Normalized | None:
    for status, message in ((500, "The server had an error"), (504, "upstream request timeout")):
        reply = _error(ctx, status, message, kind="api_error", headers=NOW)
        await _recovers(ctx, reply, f"HTTP {status}")
    for status, message in ((408, "Request Timeout"), (409, "Conflict; retry the request")):
        await _recovers(ctx, _error(ctx, status, message, headers=NOW), f"HTTP {status}")
    html = {"content-type": "text/html", **NOW}
    gateway = Reply.raw("<html><h1>502 Bad Gateway</h1></html>", status=502, headers=html)
    await _recovers(ctx, gateway, "HTTP 502 with an HTML body")
    await _recovers(ctx, Reply.sse([Drop()]), "a connection reset before any output")
    ctx.server.handler = lambda _request: Reply.sse([Drop()])
    try:
        out = await _run(ctx)
    finally:
        ctx.server.handler = None
    if out.error is None or _kind(out.error) != "connection" or out.requests < 2:
        raise CheckFailed("resets every time: retried, then a connection error", _describe(out))
    if isinstance(out.error, ProviderError) and not out.error.phase:
        raise CheckFailed("the connection phase on the error", f"phase={out.error.phase!r}")
    return None


# -- E7, E8 --------------------------------------------------------------------------------

OVERFLOW = (
    "This model's maximum context length is 128000 tokens; your messages resulted in 130412.",
    "prompt is too long: 212345 tokens > 200000 maximum",
    "Your input exceeds the context window of this model.",
    "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
    "This model's maximum prompt length is 131072 but the request contains 140000 tokens.",
    "Please reduce the length of the messages or completion.",
    "Input validation error: the input is longer than the model's context length",
    "the request exceeds the available context size, try increasing it",
    "the model is loaded with context length of 4096, which is greater than the context length",
    "Prompt contains 40000 tokens, too large for model with 32768 maximum context length",
    "prompt too long; exceeded max context length by 1000 tokens",
)
"""Overflow wordings of real providers (CONFORMANCE-NOTES §3), sent as 400s."""
THROTTLING = (
    "ThrottlingException: Too many tokens, please wait before trying again.",
    "Rate limit reached for gpt-4 on tokens per min (TPM): Limit 30000, Requested 4000.",
)


async def overflow_classified(ctx: RecordedContext) -> Normalized | None:
    cases = [
        *((f"400 {message[:48]!r}", _error(ctx, 400, message)) for message in OVERFLOW),
        (
            "400 code context_length_exceeded",
            _error(ctx, 400, "Invalid.", code="context_length_exceeded"),
        ),
        ("413 request_too_large", _error(ctx, 413, "Request exceeds the maximum allowed size.")),
        ("413 without a body", Reply.raw(b"", status=413)),
    ]
    for what, reply in cases:
        await _fails(ctx, reply, "context_overflow", what, ("Q30",))
    for message in THROTTLING:
        out = await _run(ctx, _error(ctx, 429, message, headers=NOW), _ok(ctx))
        if out.error is not None and _kind(out.error) == "context_overflow":
            what = f"429 {message[:40]!r}: not an overflow"
            raise CheckFailed(what, _describe(out), quirks=("Q31",))
    return Normalized(("Q30",), f"{len(cases)} provider wordings of an overflow recognised")


_WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while")


async def _overflow(ctx: LiveContext) -> tuple[ChatResult | ProviderError, int, int]:
    """Send a prompt about 1.3 times the window: (result or error, word estimate, window)."""
    window = ctx.target.capabilities.context_window
    if not window:
        raise CheckSkipped(capability_hint(["context_window"]))
    words = [_WORDS[i % len(_WORDS)] for i in range(int(window * 1.3) + 64)]
    try:
        return await ctx.ask(stream=False, prompt=" ".join(words), max_tokens=8), len(words), window
    except ProviderError as error:
        return error, len(words), window


async def overflow_classified_live(ctx: LiveContext) -> Normalized | None:
    answer, estimate, window = await _overflow(ctx)
    if isinstance(answer, ProviderError):
        if answer.kind != "context_overflow":
            raise CheckFailed(
                f"context_overflow for ~{estimate} tokens (window {window})",
                f"{answer.kind} ({answer})",
                quirks=("Q30",),
            )
        return None
    if answer.usage is None:
        raise CheckSkipped("a 200 without usage: overflow or truncation cannot be told")
    if answer.usage.input_tokens < 0.8 * estimate:
        return Normalized(
            ("Q29",),
            f"no error: a 200 with input_tokens={answer.usage.input_tokens} for ~{estimate} "
            "tokens (silent truncation, see E8)",
        )
    raise CheckSkipped(
        f"the model took {answer.usage.input_tokens} input tokens: its window exceeds {window}"
    )


async def overflow_silent_live(ctx: LiveContext) -> Normalized | None:
    answer, estimate, window = await _overflow(ctx)
    if isinstance(answer, ProviderError):
        if answer.kind == "context_overflow":
            return None
        raise CheckSkipped(f"the server refused with {answer.kind}; E7 covers the classification")
    if answer.usage is None:
        raise CheckSkipped("a 200 without usage: truncation cannot be measured")
    if answer.usage.input_tokens < 0.8 * estimate:
        raise CheckFailed(
            f"an overflow error, or input_tokens near the ~{estimate}-token estimate",
            f"HTTP 200 with input_tokens={answer.usage.input_tokens} (window {window})",
            quirks=("Q29",),
        )
    return None


# -- invariants on a recorded corpus -------------------------------------------------------

_QUOTA = re.compile(r"insufficient[_ ]quota|exceeded your current quota|billing|credit", re.I)
_NEVER_RETRIED = frozenset({"auth", "bad_request", "context_overflow", "quota"})


def _recorded_kind(reply: RecordedReply) -> str | None:
    """The error kind the recorded bytes call for; ``None`` for another in-stream error."""
    words, status = reply.error or "", reply.status
    if status == 429:
        return "quota" if _QUOTA.search(words) else "rate_limit"
    if is_overflow_message(words) or "context_length_exceeded" in words:
        return "context_overflow"
    if status in (401, 403):
        return "auth"
    if status in (503, 529) or "overloaded_error" in words:
        return "overloaded"
    if status >= 400:
        return "server" if status >= 500 else "bad_request"
    return None


def _kind_verdict(exchange: RecordedExchange, kind: str) -> Verdict:
    """The adapter raised ``kind``, after exactly one request when it is never retried."""
    error, requests = exchange.error, exchange.requests
    once = kind in _NEVER_RETRIED
    holds = error is not None and error.kind == kind and (requests == 1 or not once)
    got = exchange.outcome if error is None or error.kind != kind else f"{requests} requests"
    return verdict(holds, f"kind {kind}" + (" after exactly 1 request" if once else ""), got)


def _kind_corpus(kind: str) -> CorpusJudge:
    """The invariant of the check about errors of ``kind``."""

    @on_error
    def judge(exchange: RecordedExchange) -> Verdict | None:
        if _recorded_kind(exchange.reply) != kind:
            return None
        return _kind_verdict(exchange, kind)

    judge.__name__ = judge.__qualname__ = f"{kind}_corpus"
    return judge


@on_error
def overflow_classified_corpus(exchange: RecordedExchange) -> Verdict | None:
    """Throttling is never an overflow; an overflow is ``context_overflow``, not retried."""
    if exchange.reply.status == 429:
        error = exchange.error
        holds = error is not None and error.kind != "context_overflow"
        return verdict(holds, "throttling is not an overflow", exchange.outcome)
    if _recorded_kind(exchange.reply) != "context_overflow":
        return None
    return _kind_verdict(exchange, "context_overflow")


CHECKS = [
    Check(
        "E1",
        "errors.auth",
        "errors",
        "401 with OpenAI, Anthropic and bare bodies; live: a wrong key",
        "kind auth, exactly 1 request",
        quirks=("Q50",),
        recorded=auth,
        live=auth_live,
        corpus=_kind_corpus("auth"),
        responses=("recorded", "live"),
    ),
    Check(
        "E2",
        "errors.bad_request",
        "errors",
        "400/422 for an invalid parameter; live: temperature 99 raw and through the adapter",
        "kind bad_request, not retried",
        quirks=("Q23",),
        recorded=bad_request,
        live=bad_request_live,
        corpus=_kind_corpus("bad_request"),
        responses=("recorded", "live"),
    ),
    Check(
        "E3",
        "errors.rate_limit",
        "errors",
        "429 with Retry-After, retry-after-ms, 'try again in 0.398s', x-should-retry",
        "retried once with the delay asked; x-should-retry honoured both ways",
        recorded=rate_limit,
        corpus=_kind_corpus("rate_limit"),
        responses=("recorded",),
    ),
    Check(
        "E4",
        "errors.quota",
        "errors",
        "429 insufficient_quota / usage_limit_reached, a credit-balance 400, a per-minute 429",
        "kind quota after 1 request; the per-minute 429 is retried",
        quirks=("Q32",),
        recorded=quota,
        corpus=_kind_corpus("quota"),
        responses=("recorded",),
    ),
    Check(
        "E5",
        "errors.overloaded",
        "errors",
        "529 overloaded_error, 503 slow_down, overloaded inside a 200 stream",
        "retried before the first delta, surfaced after it",
        quirks=("Q28",),
        recorded=overloaded,
        corpus=_kind_corpus("overloaded"),
        responses=("recorded",),
    ),
    Check(
        "E6",
        "errors.transient_5xx",
        "errors",
        "500/502/504/408/409 and a connection reset before output",
        "retried; a persistent reset is a connection error with its phase",
        recorded=transient_5xx,
        corpus=_kind_corpus("server"),
        responses=("recorded",),
    ),
    Check(
        "E7",
        "errors.overflow_classified",
        "errors",
        "the overflow wordings of §3 and a throttling 429; live: a prompt "
        "longer than context_window",
        "kind context_overflow, not retried; throttling is not an overflow",
        quirks=("Q30", "Q31"),
        recorded=overflow_classified,
        live=overflow_classified_live,
        corpus=overflow_classified_corpus,
        responses=("recorded", "live"),
    ),
    Check(
        "E8",
        "errors.overflow_silent",
        "errors",
        "a prompt longer than context_window",
        "an overflow error, or input_tokens near the estimate (never silent truncation)",
        needs=("context_window",),
        quirks=("Q29",),
        live=overflow_silent_live,
        responses=("live",),
    ),
]
