"""A second reading of a recorded response: what an adapter should answer, from the bytes.

``replay-vcr`` holds each adapter's answer to this reading. It shares no streaming, parsing
or decoding code with the adapters: it undoes the body's content encoding itself, the whole
body at once (:mod:`._body`), tells an event stream by its label or its bytes, splits it as
the SSE specification says (events end at a blank line; lines end at CR, LF or CRLF and
never at U+2028; ``data:`` lines of one event are joined with ``\\n``), decodes each payload
with :func:`json.loads` and folds the payloads of each wire by that wire's documented rules
into one expected answer: text, reasoning and reasoning items, every tool call's id, name
and arguments, the finish reason (normalized and raw), every usage count, the response's id
and model; or an expected error (kind, HTTP status, retryability).

What it shares with the adapters is vocabulary, not reading: the word a provider's finish
reason stands for is looked up with :func:`~agentfsm.adapters.providers.normalize_finish`
(the documented ``FINISH_REASONS``; what calls do to it is this reading's own rule), and an
error body is classified by :func:`~agentfsm.adapters.providers.classify_error_body` (the
documented error kinds), once this reading has found the body and its status.

Some recordings cannot settle what the server sent; they are :attr:`Reading.unjudged`,
with the reason: a redirect (the answer is not in the recording), a body in a coding this
reading does not undo (``br``, ``zstd``), an event stream whose coding breaks partway or
that decodes past the bounds, tool-call fragments the wire's rules do not part into calls
one way only. A recording cut short is judged: the adapter must read the bytes it holds as
the error they make.
"""

from __future__ import annotations

from typing import Any

from agentfsm.adapters.providers import RecordedResponse, classify_error_body

from ._body import decoded_body, labelled_stream, opens_like_a_stream
from ._chat import chat_body, chat_stream
from ._common import (
    LIMITS,
    Answer,
    Bad,
    Failure,
    Large,
    Reading,
    Unsettled,
    WireName,
    decode,
    empty_answer,
)
from ._messages import messages_body, messages_stream
from ._responses import responses_body, responses_stream

__all__ = ["read_recorded"]

_NOT_JSON = object()


def read_recorded(response: RecordedResponse, wire: WireName) -> Reading:
    """What ``response``, recorded on ``wire``, says an adapter should answer."""
    if 300 <= response.status < 400:
        return Reading(None, False, f"a {response.status} redirect, not an answer")
    limit = LIMITS.max_error_body_bytes if response.status >= 400 else LIMITS.max_body_bytes
    body = decoded_body(response, limit)
    if body.unknown:
        why = f"a body in the {body.unknown} content encoding, which this reading does not undo"
        return Reading(None, False, why)
    if body.broken and not labelled_stream(response):
        why = "a body that does not decode with its content-encoding"
        return Reading(Failure("bad_response", response.status, False, why))
    if response.status >= 400:
        return Reading(_http_error(response, body.data))
    text = body.data.decode("utf-8", "replace")
    streamed = labelled_stream(response)
    try:
        data = _NOT_JSON if streamed or body.over else _json(text)
        streamed = streamed or (data is _NOT_JSON and opens_like_a_stream(text))
        if streamed and (body.broken or body.over):
            why = "an event stream that breaks partway in its content encoding"
            if body.over:
                why = f"an event stream over {LIMITS.max_body_bytes} bytes once decoded"
            return Reading(None, True, why)
        if body.over:
            raise Large("max_body_bytes")
        if streamed:
            read = {"openai-chat": chat_stream, "anthropic": messages_stream}
            return Reading(read.get(wire, responses_stream)(response, text), True)
        return Reading(_body(response, text, data, wire))
    except Unsettled as unsettled:
        return Reading(None, streamed, str(unsettled))
    except (Bad, Large) as error:
        # Reading a stream, the adapter gives no status to such errors; a body, its own.
        kind, why = (
            ("bad_response", str(error))
            if isinstance(error, Bad)
            else ("too_large", f"past Limits.{error}")
        )
        return Reading(Failure(kind, None if streamed else response.status, False, why), streamed)


def _json(text: str) -> Any:
    """``text`` as JSON, :data:`_NOT_JSON` when it is not (too deep is :class:`Bad`)."""
    try:
        return decode(text)
    except ValueError:
        return _NOT_JSON


def _http_error(response: RecordedResponse, data: bytes) -> Failure:
    text = data[: LIMITS.max_error_body_bytes].decode("utf-8", "replace")
    body: Any
    try:
        body = decode(text)
    except (ValueError, Bad):
        body = text.strip()[:2000]
    headers = dict(response.headers)
    error = classify_error_body(response.status, body, headers)
    return Failure(error.kind, response.status, error.retryable, f"HTTP {response.status}")


def _body(response: RecordedResponse, text: str, data: Any, wire: WireName) -> Answer | Failure:
    if not text.strip():
        return empty_answer(response)
    if data is _NOT_JSON:
        return Failure("server", response.status, True, "a 200 body that is not JSON")
    if not isinstance(data, dict):
        raise Bad("the body is not a JSON object")
    read = {"openai-chat": chat_body, "anthropic": messages_body}.get(wire, responses_body)
    return read(response, data)
