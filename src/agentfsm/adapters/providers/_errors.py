"""One error type for every provider failure, and the rules that classify them.

A ``ProviderError`` never carries the request body or any header value; messages taken from
a provider's response are scrubbed of the API key the adapter was given.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeAlias

from ._keys import Secret

__all__ = [
    "RETRYABLE_KINDS",
    "ErrorKind",
    "ProviderError",
    "classify_error_body",
    "classify_status",
    "is_overflow_message",
    "parse_retry_after",
    "redact",
]

ErrorKind: TypeAlias = Literal[
    "rate_limit",
    "quota",
    "overloaded",
    "server",
    "connection",
    "timeout",
    "auth",
    "bad_request",
    "context_overflow",
    "content_filter",
    "aborted",
    "bad_response",
    "too_large",
]

RETRYABLE_KINDS: frozenset[str] = frozenset(
    {"rate_limit", "overloaded", "server", "connection", "timeout"}
)
"""Kinds worth another attempt (quota, auth, bad requests and overflows are not)."""

MAX_RETRY_AFTER = 60.0
"""Server-suggested delays are capped at this many seconds."""


class ProviderError(Exception):
    """A provider call failed.

    Attributes:
        kind: What went wrong (one of :data:`ErrorKind`).
        status: The HTTP status, when there was a response.
        provider_code: The provider's error code (``context_length_exceeded``, …).
        provider_type: The provider's error type (``overloaded_error``, …).
        retry_after: Seconds the provider asked to wait, when it said.
        in_stream: The error arrived inside a 200 streaming response.
        response_started: Output had already been streamed to the caller.
        phase: For ``connection`` and ``timeout``: ``connect``, ``first_byte``, ``idle``,
            ``read`` or ``write``.
        should_retry: The provider's explicit ``x-should-retry`` answer, when given.
        limit: For ``too_large`` (and ``bad_response`` on nesting): the
            :class:`~agentfsm.adapters.providers.Limits` field that was exceeded.

    ``bad_response``: the reply is not what the wire protocol promises (wrong JSON types,
    nesting past ``Limits.max_json_depth``, a redirect the adapter does not follow).
    ``too_large``: the reply exceeded a size or count bound of ``Limits``. Neither is
    retried; a :class:`~agentfsm.adapters.providers.Router` fails over on both.
    """

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        status: int | None = None,
        provider_code: str | None = None,
        provider_type: str | None = None,
        retry_after: float | None = None,
        in_stream: bool = False,
        response_started: bool = False,
        phase: str | None = None,
        should_retry: bool | None = None,
        provider: str | None = None,
        limit: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.status = status
        self.provider_code = provider_code
        self.provider_type = provider_type
        self.retry_after = retry_after
        self.in_stream = in_stream
        self.response_started = response_started
        self.phase = phase
        self.should_retry = should_retry
        self.provider = provider
        self.limit = limit

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles with every attribute (a durable run records a failed step's error)."""
        return (self.__class__, (self.kind, self.message), self.__dict__.copy())

    def scrub(self, secrets: Iterable[str | Secret]) -> ProviderError:
        """Remove ``secrets`` (and long pieces of them) from every string this error carries
        (message, code, type, provider name, ``args``); returns the error itself."""
        secrets = tuple(secrets)
        if not any(len(secret) >= 8 for secret in secrets):
            return self
        self.message = redact(self.message, secrets)
        if self.provider_code is not None:
            self.provider_code = redact(self.provider_code, secrets)
        if self.provider_type is not None:
            self.provider_type = redact(self.provider_type, secrets)
        if self.provider is not None:
            self.provider = redact(self.provider, secrets)
        self.args = tuple(redact(a, secrets) if isinstance(a, str) else a for a in self.args)
        return self

    @property
    def retryable(self) -> bool:
        """Whether another attempt may succeed (never once output was streamed)."""
        if self.response_started or self.kind == "aborted":
            return False
        if self.should_retry is not None:
            return self.should_retry
        if self.provider_code == "empty_stream":
            return False
        return self.kind in RETRYABLE_KINDS

    def __str__(self) -> str:
        where = f" {self.status}" if self.status is not None else ""
        code = f" [{self.provider_code}]" if self.provider_code else ""
        prefix = f"{self.provider}: " if self.provider else ""
        return f"{prefix}{self.kind}{where}{code}: {self.message}"

    def __repr__(self) -> str:
        return f"ProviderError({self.kind!r}, {self.message!r}, status={self.status!r})"


def redact(text: str, secrets: Iterable[str | Secret]) -> str:
    """``text`` with every secret (and any 8+ character piece of one) replaced."""
    for given in secrets:
        if len(given) >= 8:
            secret = given.reveal() if isinstance(given, Secret) else given
            text = text.replace(secret, "[redacted]")
            # Providers echo keys partly masked ("sk-abc***xyz"): hide every fragment of 8
            # or more characters too, wherever it starts in the key.
            text = _without_pieces(text, secret, 8)
    return text


def _without_pieces(text: str, secret: str, size: int) -> str:
    """``text`` with each run of characters covered by a ``size``-character piece of
    ``secret`` replaced by one ``[redacted]``."""
    pieces = {secret[start : start + size] for start in range(len(secret) - size + 1)}
    covered: list[bool] = []
    for piece in pieces:
        found = text.find(piece)
        while found != -1:
            covered = covered or [False] * len(text)
            covered[found : found + size] = [True] * size
            found = text.find(piece, found + 1)
    if not covered:
        return text
    out: list[str] = []
    for index, char in enumerate(text):
        if not covered[index]:
            out.append(char)
        elif index == 0 or not covered[index - 1]:
            out.append("[redacted]")
    return "".join(out)


# -- retry-after -------------------------------------------------------------------------

_TRY_AGAIN = re.compile(r"(?i)try again in\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|sec|seconds?)\b")


def _seconds(value: str | None, scale: float) -> float | None:
    """A finite, non-negative number of seconds (``nan``, ``inf`` and junk are ``None``)."""
    if value is None:
        return None
    try:
        number = float(value) / scale
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _http_date(value: str) -> float | None:
    try:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(0.0, parsed.timestamp() - time.time())
    except (ValueError, TypeError, OverflowError, IndexError):
        return None


def parse_retry_after(headers: Mapping[str, str], message: str = "") -> float | None:
    """Seconds to wait, from ``retry-after-ms``, ``retry-after`` (seconds or HTTP date) or
    a "try again in 1.898s" message; capped at :data:`MAX_RETRY_AFTER`."""
    lowered = {k.lower(): v for k, v in headers.items()}
    delay = _seconds(lowered.get("retry-after-ms"), 1000.0)
    if delay is None:
        delay = _seconds(lowered.get("retry-after"), 1.0)
    if delay is None and "retry-after" in lowered:
        delay = _http_date(lowered["retry-after"].strip())
    if delay is None and message:
        match = _TRY_AGAIN.search(message)
        if match:
            scale = 1000.0 if match.group(2).lower().startswith("m") else 1.0
            delay = _seconds(match.group(1), scale)
    if delay is None:
        return None
    return min(delay, MAX_RETRY_AFTER)


def _should_retry(headers: Mapping[str, str]) -> bool | None:
    value = {k.lower(): v for k, v in headers.items()}.get("x-should-retry")
    if value is None:
        return None
    return value.strip().lower() == "true"


# -- overflow ----------------------------------------------------------------------------

_OVERFLOW = re.compile(
    "|".join(
        [
            r"prompt is too long",
            r"request_too_large",
            r"exceeds? the context window",
            r"context[_ ]length[_ ]exceeded",
            r"input token count.{0,80}exceeds the maximum",
            r"maximum prompt length is",
            r"reduce the length of the messages",
            r"maximum context length is",
            r"longer than the model'?s context length",
            r"exceeds? the available context size",
            r"exceed_context_size_error",
            r"greater than the context length",
            r"too large for model",
            r"prompt too long",
            r"length of all messages is too long",
            r"input is too long",
            r"too many prompt tokens",
            r"context window",
        ]
    ),
    re.IGNORECASE,
)
_THROTTLING = re.compile(r"rate.?limit|too many requests|throttl", re.IGNORECASE)


def is_overflow_message(text: str) -> bool:
    """Whether a provider message says the request exceeds the context window.

    Throttling wording ("Too many tokens" from a rate limiter) is never an overflow.
    """
    return bool(_OVERFLOW.search(text)) and not _THROTTLING.search(text)


# -- classification ----------------------------------------------------------------------

_QUOTA_CODES = {"insufficient_quota", "usage_limit_reached", "usage_not_included", "billing_error"}
_QUOTA_TEXT = re.compile(
    r"insufficient[_ ]quota|exceeded your current quota|billing|credit balance", re.I
)
_FILTER = re.compile(r"content[_ ]filter|content[_ ]policy|safety|responsible ai", re.I)


def classify_status(status: int) -> ErrorKind:
    """The kind an HTTP status means when the body says nothing more specific."""
    if status in (401, 403):
        return "auth"
    if status == 402:
        return "quota"
    if status == 429:
        return "rate_limit"
    if status in (408,):
        return "timeout"
    if status == 409:
        return "server"
    if status == 413:
        return "context_overflow"
    if status in (503, 529):
        return "overloaded"
    if status >= 500:
        return "server"
    return "bad_request"


def _http_status(value: Any) -> int | None:
    """An HTTP status code (100-599) given as a number or as digits, else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) == 3:
        value = int(value)
    if isinstance(value, int) and 100 <= value <= 599:
        return value
    return None


def _error_fields(body: Any) -> tuple[str, str | None, str | None, int | None]:
    """(message, code, type, status) from the common error body shapes; the status is the
    one the body itself states (``status_code``, ``status`` or a numeric ``code``), which an
    error sent inside a 200 stream carries in place of the HTTP status."""
    if isinstance(body, list) and body:
        body = body[0]  # Gemini streams errors as a JSON array
    if not isinstance(body, dict):
        return (str(body) if body is not None else "", None, None, None)
    error = body.get("error", body)
    if isinstance(error, str):
        kind = body.get("type") if isinstance(body.get("type"), str) else None
        return (error, None, kind, _http_status(body.get("status_code", body.get("status"))))
    if not isinstance(error, dict):
        return (json.dumps(body)[:500], None, None, None)
    message = error.get("message") or body.get("message") or body.get("detail") or ""
    code = error.get("code", error.get("status"))
    kind = error.get("type")
    stated = None
    for holder, key in ((error, "status_code"), (error, "status"), (error, "code")):
        stated = _http_status(holder.get(key))
        if stated is not None:
            break
    if stated is None:
        stated = _http_status(body.get("status_code", body.get("status")))
    return (
        str(message) if not isinstance(message, str) else message,
        str(code) if code is not None else None,
        str(kind) if kind is not None else None,
        stated,
    )


def classify_error_body(
    status: int | None,
    body: Any,
    headers: Mapping[str, str] | None = None,
    *,
    in_stream: bool = False,
    secrets: Iterable[str | Secret] = (),
    provider: str | None = None,
) -> ProviderError:
    """Build the :class:`ProviderError` for an error response (or an in-stream error).

    An error inside a 200 stream is classified like the same body sent with an HTTP status:
    the status it states (``status_code``, ``status`` or a numeric ``code``) stands for the
    HTTP one, and ``invalid_request_error`` or a 4xx is ``bad_request`` (neither retried nor
    failed over); ``in_stream`` and the real HTTP ``status`` are kept on the error.
    """
    headers = headers or {}
    message, code, err_type, stated = _error_fields(body)
    if not message and status is not None:
        message = f"HTTP {status}"
    code = code[:200] if code is not None else None
    err_type = err_type[:200] if err_type is not None else None
    # An error inside a 200 stream states its own status: read it as if it were the HTTP one.
    effective = status if status not in (None, 200) else stated
    words = f"{message} {code or ''} {err_type or ''}"
    kind: ErrorKind
    if is_overflow_message(words) or code == "context_length_exceeded":
        kind = "context_overflow"
    elif (code in _QUOTA_CODES) or (err_type in _QUOTA_CODES) or _QUOTA_TEXT.search(message):
        kind = "quota"
    elif err_type in ("overloaded_error",) or code in ("server_is_overloaded", "slow_down"):
        kind = "overloaded"
    elif err_type in ("rate_limit_error", "rate_limit_exceeded", "tokens", "requests") or code in (
        "rate_limit_exceeded",
        "RateLimitReached",
        "RESOURCE_EXHAUSTED",
    ):
        kind = "rate_limit"
    elif err_type in ("authentication_error", "permission_error", "invalid_api_key") or code in (
        "invalid_api_key",
        "PERMISSION_DENIED",
        "UNAUTHENTICATED",
    ):
        kind = "auth"
    elif code == "content_filter" or _FILTER.search(f"{code or ''} {err_type or ''}"):
        kind = "content_filter"
    elif err_type in ("api_error", "internal_server_error", "server_error") and effective in (
        None,
        500,
    ):
        kind = "server"
    elif effective is not None:
        kind = classify_status(effective)
    elif err_type == "invalid_request_error":
        kind = "bad_request"
    else:
        kind = "server"
    text = redact(message, secrets)[:2000]
    return ProviderError(
        kind,
        text,
        status=status,
        provider_code=code,
        provider_type=err_type,
        retry_after=parse_retry_after(headers, message),
        in_stream=in_stream,
        should_retry=_should_retry(headers),
        provider=provider,
    )
