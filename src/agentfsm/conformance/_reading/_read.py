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

import re
from typing import Any

from agentfsm.adapters.providers import RecordedResponse, classify_error_body

from ._chat import chat_body, chat_stream
from ._common import (
    LIMITS,
    Answer,
    Bad,
    Failure,
    Large,
    Reading,
    WireName,
    decode,
    empty_answer,
)
from ._messages import messages_body, messages_stream
from ._responses import responses_body, responses_stream

__all__ = ["read_recorded"]


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
    except (Bad, Large) as error:
        # Reading a stream, the adapter gives no status to such errors; a body, its own.
        kind, why = (
            ("bad_response", str(error))
            if isinstance(error, Bad)
            else (
                "too_large",
                f"past Limits.{error}",
            )
        )
        status = None if streamed else response.status
        return Reading(Failure(kind, status, False, why), streamed)


def _header(response: RecordedResponse, name: str) -> str | None:
    values = [v for k, v in response.headers if k.lower() == name]
    return ",".join(values) if values else None


def _looks_like_stream(text: str) -> bool:
    return re.search(r"^(data|event):", text[:65536], re.M) is not None


def _http_error(response: RecordedResponse) -> Failure:
    text = response.body[: LIMITS.max_error_body_bytes].decode("utf-8", "replace")
    body: Any
    try:
        body = decode(text)
    except (ValueError, Bad):
        body = text.strip()[:2000]
    headers = dict(response.headers)
    error = classify_error_body(response.status, body, headers)
    return Failure(error.kind, response.status, error.retryable, f"HTTP {response.status}")


def _body(response: RecordedResponse, text: str, wire: WireName) -> Answer | Failure:
    if len(response.body) > LIMITS.max_body_bytes:
        raise Large("max_body_bytes")
    if not text.strip():
        return empty_answer(response)
    try:
        data = decode(text)
    except ValueError:
        return Failure("server", response.status, True, "a 200 body that is not JSON")
    if not isinstance(data, dict):
        raise Bad("the body is not a JSON object")
    read = {"openai-chat": chat_body, "anthropic": messages_body}.get(wire, responses_body)
    return read(response, data)


def _stream(response: RecordedResponse, text: str, wire: WireName) -> Reading:
    read = {"openai-chat": chat_stream, "anthropic": messages_stream}.get(wire, responses_stream)
    return Reading(read(response, text), True)
