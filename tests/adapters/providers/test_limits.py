"""The bounded SSE decoder, depth checks, scrubbing and Retry-After edge cases."""

from __future__ import annotations

import pytest

from agentfsm.adapters.providers import Limits, ProviderError
from agentfsm.adapters.providers._errors import parse_retry_after
from agentfsm.adapters.providers._limits import BadShape, TooLarge, loads_bounded
from agentfsm.adapters.providers._sse import SSEDecoder

STREAM = (
    "data: a\u2028b\r\n\r\nevent: x\rdata: 1\r\r: comment\nid: 5\n\ndata: q\ndata: r\n\n"
).encode()


def _decode(pieces: list[bytes]) -> list[tuple[str, str]]:
    decoder = SSEDecoder(max_line_bytes=100, max_event_bytes=200)
    events = [e for piece in pieces for e in decoder.feed(piece)]
    return [(e.event, e.data) for e in events]


EXPECTED = [("message", "a\u2028b"), ("x", "1"), ("message", "q\nr")]


def test_lines_end_only_at_cr_lf_and_crlf() -> None:
    assert _decode([STREAM]) == EXPECTED


def test_any_split_of_the_bytes_gives_the_same_events() -> None:
    assert _decode([STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED
    for cut in range(len(STREAM)):
        assert _decode([STREAM[:cut], STREAM[cut:]]) == EXPECTED


def test_a_byte_order_mark_opening_the_stream_is_ignored_however_split() -> None:
    marked = "\ufeff".encode() + STREAM
    for cut in range(5):
        assert _decode([marked[:cut], marked[cut:]]) == EXPECTED
    assert _decode([marked[i : i + 1] for i in range(len(marked))]) == EXPECTED
    inner = b"data: 1\n\n" + "\ufeff".encode() + b"data: 2\n\n"
    assert _decode([inner]) == [("message", "1")]  # a mark past the start is text


def test_a_long_line_is_too_large_before_it_is_held() -> None:
    decoder = SSEDecoder(max_line_bytes=10, max_event_bytes=100)
    decoder.feed(b"data: 1234")
    with pytest.raises(TooLarge) as raised:
        decoder.feed(b"5")
    assert raised.value.limit == "max_line_bytes"


def test_a_large_event_is_too_large() -> None:
    decoder = SSEDecoder(max_line_bytes=100, max_event_bytes=20)
    with pytest.raises(TooLarge) as raised:
        decoder.feed(b"data: 0123456789\ndata: 0123456789\n")
    assert raised.value.limit == "max_event_bytes"


def test_depth() -> None:
    assert loads_bounded('{"a": [1, {"b": []}]}', 4) == {"a": [1, {"b": []}]}
    with pytest.raises(BadShape):
        loads_bounded('{"a": [1, {"b": []}]}', 3)
    with pytest.raises(BadShape):
        loads_bounded("[" * 100_000 + "]" * 100_000, Limits().max_json_depth)
    with pytest.raises(ValueError, match="Expecting"):
        loads_bounded("{", 5)


def test_scrub_covers_every_string() -> None:
    key = "sk-test-0123456789abcdefghij"
    error = ProviderError(
        "auth", f"bad {key}", status=403, provider_code=key, provider_type=f"t {key[:14]}"
    )
    error.scrub((key,))
    text = f"{error} {error!r} {error.args} {error.provider_code} {error.provider_type}"
    assert "0123456789" not in text
    assert str(error).startswith("auth 403 [[redacted]]")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "1e999", "soon", ""])
def test_retry_after_that_is_not_a_delay(value: str) -> None:
    assert parse_retry_after({"retry-after": value}) is None
    assert parse_retry_after({"retry-after-ms": value}) is None


def test_retry_after_ms_falls_back_to_retry_after() -> None:
    assert parse_retry_after({"retry-after-ms": "nan", "retry-after": "3"}) == 3.0


def test_tool_call_ids_with_lone_surrogates_are_made_safe() -> None:
    from agentfsm.adapters.providers._openai_wire import safe_tool_call_id

    made = safe_tool_call_id("\udcff" * 50)
    assert made.startswith("call_")
    assert made.isascii()
    assert safe_tool_call_id("") != made
