"""Lone surrogates: hashed, serialized and printed without raising."""

from __future__ import annotations

import io
import json

from agentfsm.engine._messages import AssistantMessage, Message
from agentfsm.engine._serialization import dumps, loads
from agentfsm.engine._text import encodable, escape_surrogates, printable, utf8_bytes

ODD = 'a\udcff\\\ud800"é\u2028'


def test_utf8_bytes_passes_surrogates_and_keeps_plain_utf8() -> None:
    assert utf8_bytes("é\u2028") == "é\u2028".encode()
    assert utf8_bytes("\udcff") == b"\xed\xb3\xbf"


def test_dumps_escapes_lone_surrogates_only() -> None:
    message = AssistantMessage(ODD)
    text = dumps(message)
    text.encode("utf-8")
    assert "é\u2028" in text
    assert "\\udcff" in text
    assert "\\ud800" in text
    assert loads(text, Message) == message
    assert json.loads(escape_surrogates(json.dumps([ODD], ensure_ascii=False))) == [ODD]
    assert escape_surrogates('"plain"') == '"plain"'


def test_printable_for_a_stream() -> None:
    utf8 = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    ascii_ = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    tolerant = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape")
    assert printable("é\u2028", utf8) == "é\u2028"
    assert printable("x\udcff é", utf8) == "x\\udcff é"
    assert printable("x\udcff é", ascii_) == "x\\udcff \\xe9"
    assert printable("x\udcff", tolerant) == "x\udcff"
    assert printable("x\udcff") == "x\\udcff"
    assert not encodable("\udcff")
    assert encodable("é")

    class Odd:
        encoding = "no-such-codec"
        errors = None

    assert printable("x\udcff é", Odd()) == "x\\udcff é"
