"""What the second reading shares across wires: what it answers (:class:`Answer`,
:class:`Failure`, :class:`Reading`), the event-stream splitting, JSON and shape checks, tool
calls and their arguments, finish reasons, usage and the errors a reply makes."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeAlias

from attrs import frozen

from agentfsm.adapters.providers import (
    Limits,
    RecordedResponse,
    classify_error_body,
    normalize_finish,
)
from agentfsm.engine import Usage, json_shape

__all__ = [
    "LIMITS",
    "Answer",
    "Bad",
    "Call",
    "Event",
    "Failure",
    "Large",
    "Reading",
    "Unsettled",
    "WireName",
    "anthropic_usage",
    "as_array",
    "as_object",
    "as_text",
    "calls_of",
    "decode",
    "empty_answer",
    "failed",
    "finish_of",
    "malformed",
    "merge",
    "named",
    "openai_usage",
    "payloads",
    "sse_events",
    "stream_error",
]


WireName: TypeAlias = Literal["openai-chat", "anthropic", "openai-responses"]

LIMITS = Limits()
"""The adapters' default bounds, which the replayed adapters keep."""
_LINE_END = re.compile(r"\r\n|\r|\n")


@frozen
class Call:
    """One tool call as the recorded bytes carry it."""

    id: str | None
    """The provider's id; ``None`` when it gave none, or one an earlier call of the same
    reply already has (the adapter then makes up an id of its own, unique in the reply)."""
    name: str
    arguments: dict[str, Any]
    """The arguments, decoded (``{}`` when they are not a JSON object)."""
    raw_arguments: str | None = None
    """The argument text when it is not a JSON object."""


@frozen
class Answer:
    """A success: what the adapter's :class:`~agentfsm.ChatResult` should hold."""

    text: str = ""
    reasoning: str | None = None
    reasoning_items: tuple[dict[str, Any], ...] = ()
    calls: tuple[Call, ...] = ()
    finish_reason: str | None = None
    finish_reason_raw: str | None = None
    usage: Usage | None = None
    response_id: str | None = None
    model: str | None = None


@frozen
class Failure:
    """An error: the :class:`~agentfsm.adapters.providers.ProviderError` the adapter should
    raise."""

    kind: str
    status: int | None
    retryable: bool
    why: str = ""
    """What in the bytes makes it an error (for reports)."""


@frozen
class Reading:
    """What one recorded response says."""

    outcome: Answer | Failure | None
    """``None`` when the recording cannot settle it (see :attr:`unjudged`)."""
    streamed: bool = False
    """The response is an event stream (its recorded ``content-type`` says so)."""
    unjudged: str = ""
    """Why the recording cannot settle what the server sent (empty when it can)."""


class Bad(Exception):
    """The payload breaks the wire's shape: the adapter answers ``bad_response``."""


class Large(Exception):
    """The reply passes a bound of :class:`~agentfsm.adapters.providers.Limits`."""


class Unsettled(Exception):
    """The bytes do not settle what the answer is (the message says why): unjudged."""


def sse_events(text: str) -> Iterator[tuple[str, str]]:
    """(event type, data) of each event of a ``text/event-stream`` body, as the SSE
    specification dispatches them: at a blank line, with a leading BOM, comments and events
    without data left out, and an event the body does not close with a blank line dropped."""
    text = text.removeprefix("\ufeff")
    kind, data, size = "", list[str](), 0
    lines = _LINE_END.split(text)
    for line in lines[:-1]:  # the last piece is not a finished line
        if len(line.encode("utf-8", "surrogatepass")) > LIMITS.max_line_bytes:
            raise Large("max_line_bytes")
        if not line:
            if data:
                yield kind or "message", "\n".join(data)
            kind, data, size = "", [], 0
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
            size += len(value) + 1
            if size > LIMITS.max_event_bytes:
                raise Large("max_event_bytes")
        elif name == "event":
            kind = value


def decode(text: str) -> Any:
    """``text`` as JSON (``ValueError`` when it is not); too deep is :class:`Bad`."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise Bad("nested too deeply") from None
    if json_shape(text)[0] > LIMITS.max_json_depth:
        raise Bad("nested too deeply")
    return value


def stream_error(payload: Any, response: RecordedResponse, started: bool) -> Failure:
    """An error event of a 200 stream (classified like the same body with a status)."""
    error = classify_error_body(200, payload, dict(response.headers), in_stream=True)
    error.response_started = started
    return Failure(error.kind, 200, error.retryable, "an error event in the stream")


def empty_answer(response: RecordedResponse) -> Failure:
    return Failure("server", response.status, False, "an empty 200 answer")


def failed(response: RecordedResponse, body: Any) -> Failure:
    error = classify_error_body(response.status, body, dict(response.headers))
    return Failure(error.kind, response.status, error.retryable, "an error object in a 200 body")


def malformed(started: bool) -> Failure:
    return Failure("server", None, not started, "a stream frame that is not JSON")


def as_object(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Bad(f"{where} is not an object")
    return value


def as_array(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Bad(f"{where} is not an array")
    return value


def as_text(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise Bad(f"{where} is not a string")


def named(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _arguments(value: Any) -> tuple[dict[str, Any], str | None]:
    """Arguments as sent (an object, JSON text, JSON text of JSON text, or nothing) as
    (decoded object, the text when it is not one)."""
    if isinstance(value, dict):
        return value, None
    if value is None:
        return {}, None
    text = value if isinstance(value, str) else json.dumps(value)
    if len(text) > LIMITS.max_argument_bytes:
        raise Large("max_argument_bytes")
    if not text.strip():
        return {}, None
    try:
        decoded = decode(text)
    except ValueError:
        return {}, text
    if isinstance(decoded, dict):
        return decoded, None
    if isinstance(decoded, str):
        inner, bad = _arguments(decoded)
        return (inner, None) if bad is None else ({}, text)
    return {}, text


def calls_of(found: list[tuple[Any, str, Any]]) -> tuple[Call, ...]:
    """(id, name, arguments) as sent, in order, as :class:`Call` s with unique ids."""
    if len(found) > LIMITS.max_tool_calls:
        raise Large("max_tool_calls")
    seen: set[str] = set()
    out = []
    for given, name, arguments in found:
        ident = given if isinstance(given, str) and given and given not in seen else None
        seen.add(ident or "")
        decoded, raw = _arguments(arguments)
        out.append(Call(ident, name, decoded, raw))
    return tuple(out)


_CUTS = ("length", "content_filter")


def finish_of(raw: str | None, calls: tuple[Call, ...]) -> tuple[str | None, str | None]:
    """(normalized, raw) finish reason from the provider's own string: its word in the
    documented vocabulary (:func:`~agentfsm.adapters.providers.normalize_finish` names it),
    then ``tool_calls`` for an answer with calls, unless the word says the answer was cut
    (``length``, ``content_filter``): a cut is never hidden by the calls it cut."""
    word, kept = normalize_finish(raw, False)
    if calls and word not in _CUTS:
        return "tool_calls", kept
    return word, kept


def merge(into: dict[str, Any], update: Any) -> None:
    """A usage record folded into ``into``: later non-null values win, objects merge."""
    for key, value in (update or {}).items() if isinstance(update, dict) else ():
        if isinstance(value, dict):
            into[key] = into.get(key) if isinstance(into.get(key), dict) else {}
            merge(into[key], value)
        elif value is not None:
            into[key] = value


def _count(usage: dict[str, Any], name: str) -> int:
    """A token count: an integer, a whole number written as a float or as decimal digits;
    absent or ``null`` is 0; anything else is no count (:class:`Bad`)."""
    value = usage.get(name)
    if value is None:
        return 0
    if type(value) is int and value >= 0:
        return value
    if type(value) is float and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    if type(value) is str and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    raise Bad(f"usage.{name} is not a token count")


def openai_usage(usage: Any) -> Usage | None:
    """Chat Completions and Responses usage: the prompt (input) total already holds its
    cached and cache-write parts; output holds reasoning (xAI reports it apart: then its
    total is at least prompt + completion + reasoning); DeepSeek's hit and miss counts are
    the prompt's two parts."""
    if not isinstance(usage, dict) or not usage:
        return None
    prompt = _count(usage, "prompt_tokens" if "prompt_tokens" in usage else "input_tokens")
    completion = _count(
        usage, "completion_tokens" if "completion_tokens" in usage else "output_tokens"
    )
    given_in = usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
    given_out = usage.get("completion_tokens_details") or usage.get("output_tokens_details")
    inputs = given_in if isinstance(given_in, dict) else {}
    outputs = given_out if isinstance(given_out, dict) else {}
    read, written = _count(inputs, "cached_tokens"), _count(inputs, "cache_write_tokens")
    if "prompt_cache_hit_tokens" in usage:
        read = _count(usage, "prompt_cache_hit_tokens")
        prompt = max(prompt, read + _count(usage, "prompt_cache_miss_tokens"))
    reasoning = _count(outputs, "reasoning_tokens")
    total = usage.get("total_tokens")
    apart = reasoning and isinstance(total, int) and total >= prompt + completion + reasoning
    return Usage(
        input_tokens=max(prompt, read, written),
        output_tokens=completion + reasoning if apart else max(completion, reasoning),
        cache_read_tokens=read,
        cache_write_tokens=written,
        reasoning_tokens=reasoning,
    )


def anthropic_usage(usage: Any) -> Usage | None:
    """Messages usage: ``input_tokens`` leaves out the cache reads and writes."""
    if not isinstance(usage, dict) or not usage:
        return None
    read = _count(usage, "cache_read_input_tokens")
    written = _count(usage, "cache_creation_input_tokens")
    return Usage(
        input_tokens=_count(usage, "input_tokens") + read + written,
        output_tokens=_count(usage, "output_tokens"),
        cache_read_tokens=read,
        cache_write_tokens=written,
    )


@frozen
class Event:
    kind: str
    payload: Any


def payloads(
    text: str, stop: Callable[[Event], bool], done: Literal["ends", "skipped", "a frame"]
) -> Iterator[Event | str]:
    """Each event's JSON payload, up to the one ``stop`` says ends the stream; the frame's
    text for a frame that is not JSON. Events with empty data carry nothing. ``[DONE]``
    (Chat Completions' last frame) ``ends`` the stream, is ``skipped``, or is read as ``a
    frame`` like any other, by the wire's rule."""
    for kind, data in sse_events(text):
        stripped = data.strip()
        if not stripped or (stripped == "[DONE]" and done == "skipped"):
            continue
        if stripped == "[DONE]" and done == "ends":
            return
        try:
            payload = decode(stripped)
        except ValueError:
            yield stripped
            return
        event = Event(kind, payload)
        yield event
        if stop(event):
            return
