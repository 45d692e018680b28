"""A second reading of a recorded response: what an adapter should answer, from the bytes.

``replay-vcr`` holds each adapter's answer to this reading. It shares no streaming or
parsing code with the adapters: it takes the whole body at once, splits an event stream as
the SSE specification says (events end at a blank line; lines end at CR, LF or CRLF and
never at U+2028; ``data:`` lines of one event are joined with ``\\n``), decodes each
payload with :func:`json.loads` and folds the payloads of each wire into one expected
answer: text, reasoning and reasoning items, every tool call's id, name and arguments, the
finish reason (normalized and raw), every usage count, the response's id and model; or an
expected error (kind, HTTP status, retryability).

What it shares with the adapters is vocabulary, not reading: finish reasons are normalized
by :func:`~agentfsm.adapters.providers._finish.normalize_finish` (the documented
``FINISH_REASONS``), and an error body is classified by
:func:`~agentfsm.adapters.providers._errors.classify_error_body` (the documented error
kinds), once this reading has found the body and its status.

Some recordings cannot settle what the server sent; they are :attr:`Reading.unjudged`,
with the reason: an event stream recorded without its ``content-type`` header (the adapters
tell a stream from a body by that header only: the recorder lost what decides how the body
is read), a redirect (an answer the recording does not hold). A recording cut short is
judged: the adapter must read the bytes it holds as the error they make.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeAlias

from attrs import define, evolve, field, frozen

from agentfsm.adapters.providers import Limits
from agentfsm.adapters.providers._errors import classify_error_body
from agentfsm.adapters.providers._finish import normalize_finish
from agentfsm.adapters.providers._replay import RecordedResponse
from agentfsm.engine._messages import Usage
from agentfsm.engine._serialization import nests_deeper_than

__all__ = [
    "Answer",
    "Call",
    "Failure",
    "Reading",
    "read_recorded",
    "sse_events",
]

WireName: TypeAlias = Literal["openai-chat", "anthropic", "openai-responses"]

_LIMITS = Limits()
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


class _Bad(Exception):
    """The payload breaks the wire's shape: the adapter answers ``bad_response``."""


class _Large(Exception):
    """The reply passes a bound of :class:`~agentfsm.adapters.providers.Limits`."""


# -- the body ------------------------------------------------------------------------------


def sse_events(text: str) -> Iterator[tuple[str, str]]:
    """(event type, data) of each event of a ``text/event-stream`` body, as the SSE
    specification dispatches them: at a blank line, with a leading BOM, comments and events
    without data left out, and an event the body does not close with a blank line dropped."""
    text = text.removeprefix("\ufeff")
    kind, data, size = "", list[str](), 0
    lines = _LINE_END.split(text)
    for line in lines[:-1]:  # the last piece is not a finished line
        if len(line.encode("utf-8", "surrogatepass")) > _LIMITS.max_line_bytes:
            raise _Large("max_line_bytes")
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
            if size > _LIMITS.max_event_bytes:
                raise _Large("max_event_bytes")
        elif name == "event":
            kind = value


def _json(text: str) -> Any:
    """``text`` as JSON (``ValueError`` when it is not); too deep is :class:`_Bad`."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise _Bad("nested too deeply") from None
    if nests_deeper_than(value, _LIMITS.max_json_depth):
        raise _Bad("nested too deeply")
    return value


def _header(response: RecordedResponse, name: str) -> str | None:
    values = [v for k, v in response.headers if k.lower() == name]
    return ",".join(values) if values else None


def _looks_like_stream(text: str) -> bool:
    return re.search(r"^(data|event):", text[:65536], re.M) is not None


def read_recorded(response: RecordedResponse, wire: WireName) -> Reading:
    """What ``response``, recorded on ``wire``, says an adapter should answer."""
    content_type = _header(response, "content-type")
    streamed = content_type is not None and "text/event-stream" in content_type
    text = response.body.decode("utf-8", "replace")
    if 300 <= response.status < 400:
        return Reading(None, streamed, f"a {response.status} redirect, not an answer")
    if response.status >= 400:
        return Reading(_http_error(response), streamed)
    if content_type is None and _looks_like_stream(text):
        why = "an event stream recorded without its content-type header (the adapters read "
        why += "a stream only when the header says text/event-stream)"
        return Reading(None, True, why)
    try:
        if streamed:
            return _stream(response, text, wire)
        return Reading(_body(response, text, wire))
    except (_Bad, _Large) as error:
        # Reading a stream, the adapter gives no status to such errors; a body, its own.
        kind, why = (
            ("bad_response", str(error))
            if isinstance(error, _Bad)
            else (
                "too_large",
                f"past Limits.{error}",
            )
        )
        status = None if streamed else response.status
        return Reading(Failure(kind, status, False, why), streamed)


def _http_error(response: RecordedResponse) -> Failure:
    text = response.body[: _LIMITS.max_error_body_bytes].decode("utf-8", "replace")
    body: Any
    try:
        body = _json(text)
    except (ValueError, _Bad):
        body = text.strip()[:2000]
    headers = dict(response.headers)
    error = classify_error_body(response.status, body, headers)
    return Failure(error.kind, response.status, error.retryable, f"HTTP {response.status}")


def _stream_error(payload: Any, response: RecordedResponse, started: bool) -> Failure:
    """An error event of a 200 stream (classified like the same body with a status)."""
    error = classify_error_body(200, payload, dict(response.headers), in_stream=True)
    error.response_started = started
    return Failure(error.kind, 200, error.retryable, "an error event in the stream")


def _empty(response: RecordedResponse) -> Failure:
    return Failure("server", response.status, False, "an empty 200 answer")


# -- shapes --------------------------------------------------------------------------------


def _dict(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Bad(f"{where} is not an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Bad(f"{where} is not an array")
    return value


def _str(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _Bad(f"{where} is not a string")


def _arguments(value: Any) -> tuple[dict[str, Any], str | None]:
    """Arguments as sent (an object, JSON text, JSON text of JSON text, or nothing) as
    (decoded object, the text when it is not one)."""
    if isinstance(value, dict):
        return value, None
    if value is None:
        return {}, None
    text = value if isinstance(value, str) else json.dumps(value)
    if len(text) > _LIMITS.max_argument_bytes:
        raise _Large("max_argument_bytes")
    if not text.strip():
        return {}, None
    try:
        decoded = _json(text)
    except ValueError:
        return {}, text
    if isinstance(decoded, dict):
        return decoded, None
    if isinstance(decoded, str):
        inner, bad = _arguments(decoded)
        return (inner, None) if bad is None else ({}, text)
    return {}, text


def _calls(found: list[tuple[Any, str, Any]]) -> tuple[Call, ...]:
    """(id, name, arguments) as sent, in order, as :class:`Call` s with unique ids."""
    if len(found) > _LIMITS.max_tool_calls:
        raise _Large("max_tool_calls")
    seen: set[str] = set()
    out = []
    for given, name, arguments in found:
        ident = given if isinstance(given, str) and given and given not in seen else None
        seen.add(ident or "")
        decoded, raw = _arguments(arguments)
        out.append(Call(ident, name, decoded, raw))
    return tuple(out)


def _finish(raw: str | None, calls: tuple[Call, ...]) -> tuple[str | None, str | None]:
    return normalize_finish(raw, bool(calls))


def _merge(into: dict[str, Any], update: Any) -> None:
    """A usage record folded into ``into``: later non-null values win, objects merge."""
    for key, value in (update or {}).items() if isinstance(update, dict) else ():
        if isinstance(value, dict):
            into[key] = into.get(key) if isinstance(into.get(key), dict) else {}
            _merge(into[key], value)
        elif value is not None:
            into[key] = value


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return int(value)


def _openai_usage(usage: Any) -> Usage | None:
    """Chat Completions and Responses usage: the prompt (input) total already holds its
    cached and cache-write parts; output holds reasoning (xAI reports it apart: then its
    total is at least prompt + completion + reasoning); DeepSeek's hit and miss counts are
    the prompt's two parts."""
    if not isinstance(usage, dict) or not usage:
        return None
    prompt = _count(
        usage["prompt_tokens"] if "prompt_tokens" in usage else usage.get("input_tokens")
    )
    completion = _count(
        usage["completion_tokens"] if "completion_tokens" in usage else usage.get("output_tokens")
    )
    given_in = usage.get("prompt_tokens_details") or usage.get("input_tokens_details")
    given_out = usage.get("completion_tokens_details") or usage.get("output_tokens_details")
    inputs = given_in if isinstance(given_in, dict) else {}
    outputs = given_out if isinstance(given_out, dict) else {}
    read, written = _count(inputs.get("cached_tokens")), _count(inputs.get("cache_write_tokens"))
    if "prompt_cache_hit_tokens" in usage:
        read = _count(usage["prompt_cache_hit_tokens"])
        prompt = max(prompt, read + _count(usage.get("prompt_cache_miss_tokens")))
    reasoning = _count(outputs.get("reasoning_tokens"))
    total = usage.get("total_tokens")
    apart = reasoning and isinstance(total, int) and total >= prompt + completion + reasoning
    return Usage(
        input_tokens=max(prompt, read, written),
        output_tokens=completion + reasoning if apart else max(completion, reasoning),
        cache_read_tokens=read,
        cache_write_tokens=written,
        reasoning_tokens=reasoning,
    )


def _anthropic_usage(usage: Any) -> Usage | None:
    """Messages usage: ``input_tokens`` leaves out the cache reads and writes."""
    if not isinstance(usage, dict) or not usage:
        return None
    read = _count(usage.get("cache_read_input_tokens"))
    written = _count(usage.get("cache_creation_input_tokens"))
    return Usage(
        input_tokens=_count(usage.get("input_tokens")) + read + written,
        output_tokens=_count(usage.get("output_tokens")),
        cache_read_tokens=read,
        cache_write_tokens=written,
    )


def _named(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# -- non-streamed bodies -------------------------------------------------------------------


def _body(response: RecordedResponse, text: str, wire: WireName) -> Answer | Failure:
    if len(response.body) > _LIMITS.max_body_bytes:
        raise _Large("max_body_bytes")
    if not text.strip():
        return _empty(response)
    try:
        data = _json(text)
    except ValueError:
        return Failure("server", response.status, True, "a 200 body that is not JSON")
    if not isinstance(data, dict):
        raise _Bad("the body is not a JSON object")
    read = {"openai-chat": _chat_body, "anthropic": _messages_body}.get(wire, _responses_body)
    return read(response, data)


def _failed(response: RecordedResponse, body: Any) -> Failure:
    error = classify_error_body(response.status, body, dict(response.headers))
    return Failure(error.kind, response.status, error.retryable, "an error object in a 200 body")


def _content_text(content: Any) -> str:
    """Chat Completions content: a string, ``null`` or a list of parts (text parts count)."""
    if content is None or isinstance(content, str):
        return content or ""
    parts = []
    for part in _list(content, "content"):
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and part.get("type") in (None, "text"):
            parts.append(_str(part.get("text"), "content[].text") or "")
    return "".join(parts)


def _chat_reasoning(holder: dict[str, Any]) -> str:
    """``reasoning_content`` or ``reasoning`` (the first given), else Mistral's ``thinking``
    content parts."""
    for key in ("reasoning_content", "reasoning"):
        if holder.get(key):
            return _str(holder[key], key) or ""
    content = holder.get("content")
    parts = [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []
    thinking = [p.get("thinking") for p in parts if p.get("type") == "thinking"]
    return "".join(t if isinstance(t, str) else _content_text(t) for t in thinking)


def _first_choice(data: dict[str, Any]) -> dict[str, Any]:
    choices = _list(data.get("choices"), "choices")
    for choice in choices:
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            return choice
    return _dict(choices[0], "choices[0]") if choices else {}


def _chat_body(response: RecordedResponse, data: dict[str, Any]) -> Answer | Failure:
    if "error" in data and not data.get("choices"):
        return _failed(response, data)
    choice = _first_choice(data)
    message = _dict(choice.get("message"), "message")
    found = []
    for call in _list(message.get("tool_calls"), "tool_calls"):
        function = _dict(_dict(call, "tool_calls[]").get("function"), "function")
        found.append(
            (call.get("id"), _str(function.get("name"), "name") or "", function.get("arguments"))
        )
    calls = _calls(found)
    text = _content_text(message.get("content"))
    if not text and isinstance(message.get("refusal"), str):
        text = message["refusal"]
    reasoning = _chat_reasoning(message)
    finish = _finish(_str(choice.get("finish_reason"), "finish_reason"), calls)
    usage = data.get("usage") or _dict(data.get("x_groq"), "x_groq").get("usage")
    return Answer(
        text,
        reasoning or None,
        (),
        calls,
        *finish,
        _openai_usage(_dict(usage, "usage")),
        _named(data.get("id")),
        _named(data.get("model")),
    )


def _messages_body(response: RecordedResponse, data: dict[str, Any]) -> Answer | Failure:
    if data.get("type") == "error":
        return _failed(response, data)
    blocks = [b for b in _list(data.get("content"), "content") if isinstance(b, dict)]
    if len(blocks) > _LIMITS.max_blocks:
        raise _Large("max_blocks")
    text = "".join(_str(b.get("text"), "text") or "" for b in blocks if b.get("type") == "text")
    reasoning = "".join(
        _str(b.get("thinking"), "thinking") or "" for b in blocks if b.get("type") == "thinking"
    )
    uses = [b for b in blocks if b.get("type") == "tool_use"]
    calls = _calls(
        [(_str(b.get("id"), "id"), _str(b.get("name"), "name") or "", b.get("input")) for b in uses]
    )
    return Answer(
        text,
        reasoning or None,
        (),
        calls,
        *_finish(_str(data.get("stop_reason"), "stop_reason"), calls),
        _anthropic_usage(_dict(data.get("usage"), "usage")),
        _named(data.get("id")),
        _named(data.get("model")),
    )


def _parts(parts: Any, kinds: tuple[str, ...], key: str) -> str:
    found = [p for p in _list(parts, "content") if isinstance(p, dict) and p.get("type") in kinds]
    return "".join(_str(p.get(key), key) or "" for p in found)


def _reasoning_item(item: dict[str, Any]) -> dict[str, Any] | None:
    """What a reasoning item gives back to the next request: its encrypted content, id and
    summary texts (nothing without encrypted content)."""
    encrypted = _str(item.get("encrypted_content"), "encrypted_content")
    if not encrypted:
        return None
    kept: dict[str, Any] = {"type": "reasoning", "encrypted_content": encrypted}
    if isinstance(item.get("id"), str):
        kept["id"] = item["id"]
    summary = [p for p in _list(item.get("summary"), "summary") if isinstance(p, dict)]
    kept["summary"] = [
        {"type": "summary_text", "text": p["text"]}
        for p in summary
        if isinstance(p.get("text"), str)
    ]
    return kept


_UNFINISHED = ("queued", "in_progress")


def _responses_finish(
    data: dict[str, Any], calls: tuple[Call, ...]
) -> tuple[str | None, str | None]:
    """A response's ``status`` (and ``incomplete_details.reason``) as a finish reason:
    ``completed`` is a stop, ``incomplete`` its reason (or ``incomplete`` itself when it
    gives none), any other status read as a reason; ``queued`` and ``in_progress`` are not
    answers at all."""
    status = _str(data.get("status"), "status") or "completed"
    if status in _UNFINISHED:
        raise _Bad(f"the response is {status}: nothing was generated yet")
    if status == "incomplete":
        details = _dict(data.get("incomplete_details"), "incomplete_details")
        reason = _str(details.get("reason"), "incomplete_details.reason")
        if reason is None:
            return ("tool_calls" if calls else "other"), "incomplete"
        return _finish(reason, calls)
    return _finish("stop" if status == "completed" else status, calls)


def _failure_body(response: dict[str, Any]) -> dict[str, Any]:
    error = response.get("error")
    if not isinstance(error, dict):
        return {"error": {"code": "server_error", "message": "failed without an error"}}
    return {"error": error}


@define
class _Item:
    """One Responses output item: whole (``output_item.done``, or a response's output), and
    what its deltas said."""

    kind: str = "message"
    whole: dict[str, Any] | None = None
    text: list[str] = field(factory=list)
    reasoning: list[str] = field(factory=list)
    arguments: list[str] = field(factory=list)
    call_id: str = ""
    name: str = ""


def _fold_items(items: list[_Item], data: dict[str, Any], usage: Usage | None) -> Answer:
    """Output items into an answer: a message's text (its refusal when it has no text), a
    reasoning item's summary (else its text) and what it gives back, function calls. A part
    the whole item leaves empty is what the item's deltas said."""
    if len(items) > _LIMITS.max_blocks:
        raise _Large("max_blocks")
    text, reasoning, kept, found = [], [], [], []
    for item in items:
        whole = item.whole or {}
        kind = whole.get("type") if item.whole is not None else item.kind
        if kind == "message":
            content = whole.get("content")
            said = (
                content
                if isinstance(content, str)
                else (
                    _parts(content, ("output_text", "text"), "text")
                    or _parts(content, ("refusal",), "refusal")
                )
            )
            text.append(said or "".join(item.text))
        elif kind == "reasoning":
            summary = _parts(whole.get("summary"), ("summary_text",), "text")
            thought = summary or _parts(whole.get("content"), ("reasoning_text", "text"), "text")
            reasoning.append(thought or "".join(item.reasoning))
            given = _reasoning_item(whole) if item.whole is not None else None
            kept += [given] if given is not None else []
        elif kind == "function_call":
            arguments = whole.get("arguments")
            if not arguments and "".join(item.arguments):
                arguments = "".join(item.arguments)
            call_id = _str(whole.get("call_id"), "call_id") or item.call_id
            name = _str(whole.get("name"), "name") or item.name
            found.append((call_id, name, arguments))
        elif item.whole is None:
            text.append("".join(item.text))
    calls = _calls(found)
    return Answer(
        "".join(text),
        "\n\n".join(r for r in reasoning if r) or None,
        tuple(kept),
        calls,
        *_responses_finish(data, calls),
        usage,
        _named(data.get("id")),
        _named(data.get("model")),
    )


def _whole_response(data: dict[str, Any], usage: Any) -> Answer:
    """A whole response object (a body, or a stream's final response when no item came as
    events): its output items, and ``output_text`` (the SDKs' convenience field) when it
    has no message."""
    output = [_dict(i, "output[]") for i in _list(data.get("output"), "output")]
    answer = _fold_items([_Item(whole=i) for i in output], data, _openai_usage(usage))
    given = data.get("output_text")
    if isinstance(given, str) and not any(i.get("type") == "message" for i in output):
        return evolve(answer, text=given)
    return answer


def _responses_body(response: RecordedResponse, data: dict[str, Any]) -> Answer | Failure:
    if data.get("status") == "failed":
        return _failed(response, _failure_body(data))
    if data.get("error") and not data.get("output"):
        return _failed(response, data)
    return _whole_response(data, _dict(data.get("usage"), "usage"))


# -- streams -------------------------------------------------------------------------------


@frozen
class _Event:
    kind: str
    payload: Any


def _payloads(
    text: str, stop: Callable[[_Event], bool], done: Literal["ends", "skipped", "a frame"]
) -> Iterator[_Event | str]:
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
            payload = _json(stripped)
        except ValueError:
            yield stripped
            return
        event = _Event(kind, payload)
        yield event
        if stop(event):
            return


def _index(payload: dict[str, Any], default: int) -> int:
    index = payload.get("index")
    if index is None:
        return default
    if isinstance(index, bool) or not isinstance(index, int):
        raise _Bad("index is not an integer")
    return index


def _stream(response: RecordedResponse, text: str, wire: WireName) -> Reading:
    read = {"openai-chat": _chat_stream, "anthropic": _messages_stream}.get(wire, _responses_stream)
    return Reading(read(response, text), True)


def _malformed(started: bool) -> Failure:
    return Failure("server", None, not started, "a stream frame that is not JSON")


@define
class _ChatCall:
    """One tool call as a Chat Completions stream's fragments build it."""

    index: int | None
    id: str = ""
    name: str = ""
    text: list[str] = field(factory=list)
    size: int = 0
    """Characters of argument text so far."""
    checked: int = 0
    """Its size when it last was not a whole object (re-read only once it doubled, so many
    fragments cost linear time)."""
    whole: dict[str, Any] | None = None
    """Arguments sent as an object (not JSON text)."""

    def complete(self) -> bool:
        """Whether the argument text forms a whole JSON object."""
        if not self.size or (self.checked and self.size < 2 * self.checked):
            return False
        try:
            if isinstance(json.loads("".join(self.text)), dict):
                return True
        except (ValueError, RecursionError):
            pass
        self.checked = self.size
        return False


def _chat_stream(response: RecordedResponse, text: str) -> Answer | Failure:
    said: list[str] = []
    thought: list[str] = []
    model = ident = finish = None
    empty_finish = started = False
    usage: dict[str, Any] = {}
    calls: list[_ChatCall] = []
    for event in _payloads(text, lambda _event: False, "ends"):
        if isinstance(event, str):
            return _malformed(started)
        payload = event.payload
        if event.kind == "error" or (isinstance(payload, dict) and payload.get("error")):
            return _stream_error(payload, response, started)
        if not isinstance(payload, dict):
            continue
        model = (
            payload["model"]
            if isinstance(payload.get("model"), str) and payload["model"]
            else model
        )
        if ident is None and isinstance(payload.get("id"), str) and payload["id"]:
            ident = payload["id"]
        given = payload.get("usage")
        if given is None:
            given = _dict(payload.get("x_groq"), "x_groq").get("usage")
        _merge(usage, _dict(given, "usage"))
        for choice in _list(payload.get("choices"), "choices"):
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = _dict(choice.get("delta") or choice.get("message"), "delta")
            refusal = delta.get("refusal")
            pieces = [_content_text(delta.get("content")), _chat_reasoning(delta)]
            pieces[0] += refusal if isinstance(refusal, str) else ""
            said.append(pieces[0])
            thought.append(pieces[1])
            started = started or any(pieces)
            for fragment in _list(delta.get("tool_calls"), "tool_calls"):
                _chat_fragment(calls, _dict(fragment, "tool_calls[]"))
            reason = _str(choice.get("finish_reason"), "finish_reason")
            finish = reason or finish
            empty_finish = empty_finish or reason == ""
    answer, reasoning = "".join(said), "".join(thought)
    if not answer and not calls and finish is None:
        return _empty(response)
    found = []
    for call in calls:
        if call.name or call.id or call.size or call.whole is not None:
            arguments = call.whole if call.whole is not None else "".join(call.text)
            found.append((call.id, call.name, arguments))
    tools = _calls(found)
    return Answer(
        answer,
        reasoning or None,
        (),
        tools,
        *_finish("" if finish is None and empty_finish else finish, tools),
        _openai_usage(usage),
        ident,
        model,
    )


def _chat_fragment(calls: list[_ChatCall], fragment: dict[str, Any]) -> None:
    """One tool-call fragment of a stream into ``calls``: by its ``index``; without one, a
    fragment opens a new call when its id (or, without an id, its name) differs from the
    last call's, or when it names the last call's tool again while that call's arguments
    already form a whole object (a second call of the same tool)."""
    function = _dict(fragment.get("function"), "function")
    given_id: str = fragment["id"] if isinstance(fragment.get("id"), str) else ""
    name = _str(function.get("name"), "name") or ""
    arguments = function.get("arguments")
    index = fragment.get("index")
    at = None
    if isinstance(index, int) and not isinstance(index, bool):
        at = next((n for n, c in enumerate(calls) if c.index == index), None)
        if at is None:
            calls.append(_ChatCall(index))
            at = len(calls) - 1
    elif calls:
        last = calls[-1]
        fresh = (
            (given_id and last.id and given_id != last.id)
            or (not given_id and name and last.name and name != last.name)
            or (name and name == last.name and last.whole is not None)
            or (
                not given_id
                and name
                and name == last.name
                and isinstance(arguments, str)
                and arguments.lstrip().startswith("{")
                and last.complete()
            )
        )
        at = None if fresh else len(calls) - 1
    if at is None:
        calls.append(_ChatCall(None))
        at = len(calls) - 1
    if len(calls) > _LIMITS.max_tool_calls:
        raise _Large("max_tool_calls")
    call = calls[at]
    call.id = call.id or given_id
    call.name = call.name or name
    if isinstance(arguments, dict):
        call.whole = arguments
    elif isinstance(arguments, str):
        call.text.append(arguments)
        call.size += len(arguments)
    elif arguments is not None:
        raise _Bad("function.arguments is not a string")


def _messages_stream(response: RecordedResponse, text: str) -> Answer | Failure:
    model = ident = reason = None
    usage: dict[str, Any] = {}
    blocks: dict[Any, dict[str, Any]] = {}  # index -> {type, text, id, name, json, input}
    order: list[Any] = []
    said_any = stopped = False

    def block(index: Any, kind: str) -> dict[str, Any]:
        if index not in blocks:
            order.append(index)
            if len(order) > _LIMITS.max_blocks:
                raise _Large("max_blocks")
        blocks[index] = {"type": kind, "text": [], "json": []}
        return blocks[index]

    def stops(event: _Event) -> bool:
        return isinstance(event.payload, dict) and _kind(event) == "message_stop"

    for event in _payloads(text, stops, "a frame"):
        if isinstance(event, str):
            return _malformed(said_any)
        payload = event.payload
        if not isinstance(payload, dict):
            continue
        kind = _kind(event)
        if kind == "ping":
            continue
        if kind == "error" or payload.get("type") == "error":
            return _stream_error(payload, response, said_any)
        if kind == "message_start":
            message = _dict(payload.get("message"), "message")
            model = message["model"] if isinstance(message.get("model"), str) else model
            ident = message["id"] if isinstance(message.get("id"), str) else ident
            _merge(usage, _dict(message.get("usage"), "usage"))
        elif kind == "content_block_start":
            index = _index(payload, len(order))
            started = _dict(payload.get("content_block"), "content_block")
            last = blocks[order[-1]] if order else None
            same_call = (
                started.get("type") == "tool_use"
                and started.get("id")
                and last is not None
                and last["type"] == "tool_use"
                and last.get("id") == started.get("id")
            )
            if same_call and last is not None:  # LiteLLM: one call in several blocks
                blocks[index] = last
                continue
            entry = block(index, _str(started.get("type"), "type") or "")
            entry["id"] = _str(started.get("id"), "id") or ""
            entry["name"] = _str(started.get("name"), "name") or ""
            entry["input"] = started.get("input")
            if entry["type"] in ("text", "thinking"):
                entry["text"] = [_str(started.get(entry["type"]), entry["type"]) or ""]
        elif kind == "content_block_delta":
            index = _index(payload, -1)
            delta = _dict(payload.get("delta"), "delta")
            entry = blocks.get(index) or block(index, "text")
            part = delta.get("type")
            if part == "text_delta":
                entry["text"].append(_str(delta.get("text"), "text") or "")
                said_any = said_any or bool(delta.get("text"))
            elif part == "thinking_delta":
                entry["text"].append(_str(delta.get("thinking"), "thinking") or "")
                said_any = said_any or bool(delta.get("thinking"))
            elif part == "input_json_delta":
                entry["json"].append(_str(delta.get("partial_json"), "partial_json") or "")
        elif kind == "message_delta":
            delta = _dict(payload.get("delta"), "delta")
            reason = _str(delta.get("stop_reason"), "stop_reason") or reason
            _merge(usage, _dict(payload.get("usage"), "usage"))
        elif kind == "message_stop":
            stopped = True
    if not order and reason is None:
        return _empty(response)
    if not stopped and reason is None:
        return Failure("connection", None, not said_any, "a stream cut before message_stop")
    entries = [blocks[i] for i in dict.fromkeys(order) if i in blocks]
    unique = list({id(e): e for e in entries}.values())
    text_out = "".join("".join(e["text"]) for e in unique if e["type"] == "text")
    thinking = "".join("".join(e["text"]) for e in unique if e["type"] == "thinking")
    found = [
        (e["id"], e["name"], "".join(e["json"]) if "".join(e["json"]).strip() else e["input"])
        for e in unique
        if e["type"] == "tool_use"
    ]
    calls = _calls(found)
    return Answer(
        text_out,
        thinking or None,
        (),
        calls,
        *_finish(reason, calls),
        _anthropic_usage(usage),
        ident,
        model,
    )


def _kind(event: _Event) -> str:
    """A Messages event's type: its SSE event name, else its payload's ``type``."""
    if event.kind and event.kind != "message":
        return event.kind
    payload = event.payload
    return str(payload.get("type", "")) if isinstance(payload, dict) else ""


_TERMINAL = ("response.completed", "response.incomplete")


def _responses_kind(event: _Event) -> str:
    payload = event.payload
    given = payload.get("type") if isinstance(payload, dict) else None
    return str(given or event.kind or "")


def _responses_stream(response: RecordedResponse, text: str) -> Answer | Failure:
    meta: dict[str, Any] = {"id": None, "model": None, "status": None}
    usage: dict[str, Any] = {}
    final: dict[str, Any] | None = None
    items: dict[int, _Item] = {}
    opened: list[int] = []
    by_id: dict[str, int] = {}
    said_any = False

    def item(payload: dict[str, Any], kind: str, opens: bool = False) -> _Item:
        """The item an event is about: by its ``output_index``, else the one its
        ``item_id`` names, else a new one (``opens``) or the last one opened."""
        index = payload.get("output_index")
        if isinstance(index, bool) or (index is not None and not isinstance(index, int)):
            raise _Bad("output_index is not an integer")
        item_id = payload.get("item_id", _dict(payload.get("item"), "item").get("id"))
        if index is None and isinstance(item_id, str):
            index = by_id.get(item_id)
        if index is None:
            index = opened[-1] if opened and not opens else max(items, default=-1) + 1
        if index not in items:
            items[index] = _Item(kind)
            opened.append(index)
        if isinstance(item_id, str) and item_id and "item" in payload:
            by_id[item_id] = index
        return items[index]

    def response_of(payload: dict[str, Any]) -> dict[str, Any]:
        body = _dict(payload.get("response"), "response")
        if isinstance(body.get("model"), str) and body["model"]:
            meta["model"] = body["model"]
        if meta["id"] is None and isinstance(body.get("id"), str):
            meta["id"] = body["id"]
        _merge(usage, _dict(body.get("usage"), "usage"))
        return body

    for event in _payloads(text, lambda e: _responses_kind(e) in _TERMINAL, "skipped"):
        if isinstance(event, str):
            return _malformed(said_any)
        payload = event.payload
        if not isinstance(payload, dict):
            continue
        kind = _responses_kind(event)
        if kind == "error" or event.kind == "error":
            return _stream_error(payload, response, said_any)
        if kind == "response.failed":
            failed = _dict(payload.get("response"), "response")
            return _stream_error(_failure_body(failed), response, said_any)
        if kind in ("response.created", "response.in_progress", "response.queued"):
            response_of(payload)
        elif kind in _TERMINAL:
            final = response_of(payload)
            meta["status"] = _str(final.get("status"), "status") or kind.removeprefix("response.")
        elif kind in ("response.output_item.added", "response.output_item.done"):
            whole = _dict(payload.get("item"), "item")
            entry = item(payload, "message", opens=kind.endswith("added"))
            entry.kind = _str(whole.get("type"), "item.type") or "message"
            entry.call_id = entry.call_id or _str(whole.get("call_id"), "call_id") or ""
            entry.name = entry.name or _str(whole.get("name"), "name") or ""
            if kind.endswith("done"):
                entry.whole = whole
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            piece = _str(payload.get("delta"), "delta") or ""
            item(payload, "message").text.append(piece)
            said_any = said_any or bool(piece)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            piece = _str(payload.get("delta"), "delta") or ""
            item(payload, "reasoning").reasoning.append(piece)
            said_any = said_any or bool(piece)
        elif kind == "response.function_call_arguments.delta":
            piece = _str(payload.get("delta"), "delta") or ""
            item(payload, "function_call").arguments.append(piece)
    if not items and final is None:
        return _empty(response)
    if final is None:
        return Failure("connection", None, not said_any, "a stream cut before its last event")
    if not items and _list(final.get("output"), "output"):
        return _whole_response({**final, "status": meta["status"]}, usage or final.get("usage"))
    if final.get("incomplete_details") is not None:
        meta["incomplete_details"] = final["incomplete_details"]
    if isinstance(final.get("model"), str):
        meta["model"] = final["model"]
    return _fold_items([items[i] for i in sorted(items)], meta, _openai_usage(usage))
