"""The terminal sanitizer: what it removes, what it keeps, and pieces split anywhere."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentfsm.cli._terminal import StreamSanitizer, cells, json_safe, sanitize

FORBIDDEN = {chr(c) for c in range(0x20) if chr(c) not in "\n\t"} | {
    chr(c) for c in range(0x7F, 0xA0)
}
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def clean(text: str) -> bool:
    surrogates = any(0xD800 <= ord(char) <= 0xDFFF for char in text)
    return not surrogates and not (set(text) & (FORBIDDEN | set(BIDI)))


@pytest.mark.parametrize(
    ("hostile", "shown"),
    [
        ("a\x1b]52;c;cm0gLXJmIH4=\x07b", "ab"),  # OSC 52: write the clipboard
        ("\x1b]0;pwned\x07title", "title"),  # OSC 0: the window title
        ("\x1b]2;pwned\x1b\\title", "title"),  # OSC 2 ended by ST
        ("\x1b]8;;https://evil.example\x1b\\docs\x1b]8;;\x1b\\", "docs"),  # OSC 8 link
        ("\x1b[2J\x1b[Hclear", "clear"),  # clear the screen, cursor home
        ("ok\x1b[1A\x1b[2Kstopped: final", "okstopped: final"),  # rewrite the line above
        ("bad\rgood\r\n", "badgood\n"),  # carriage return overwrite
        ("\x9b2J8bit", "8bit"),  # the 8-bit CSI
        ("\x9d0;t\x9ctitle", "title"),  # the 8-bit OSC and ST
        ("\x1bPq#0;2;0;0;0\x1b\\sixel", "sixel"),  # DCS
        ("\x1b_apc payload\x1b\\z", "z"),  # APC
        ("\x1b^pm\x1b\\y\x1bXsos\x1b\\x", "yx"),  # PM and SOS
        ("\x1bcreset", "reset"),  # full reset
        ("\x1b7save\x1b8", "save"),  # save and restore the cursor
        ("\x1b(Bcharset\x1b#8", "charset"),  # escapes with an intermediate byte
        ("bell\x07back\x08space\x7fdel\x00nul", "bellbackspacedelnul"),
        ("tab\there\nnext", "tab\there\nnext"),
        ("open \x1b]52;c;never ended", "open "),  # unterminated: to the end
        ("csi \x1b[12;", "csi "),
        ("esc at the end \x1b", "esc at the end "),
        ("\u202eevil\u202c", "<U+202E>evil<U+202C>"),
        ("\u2066iso\u2069", "<U+2066>iso<U+2069>"),
        ("caf\udcff \u2028 é", "caf\\udcff \u2028 é"),  # a surrogate as its escape
        ("plain text", "plain text"),
    ],
)
def test_each_form_is_removed(hostile: str, shown: str) -> None:
    assert sanitize(hostile) == shown


def test_a_sequence_split_across_pieces_is_removed_whole() -> None:
    hostile = "before \x1b]52;c;cm0gLXJmIH4=\x07 between \x1b[1A\x1b[2K after \x9b2J end"
    for cut in range(len(hostile) + 1):
        stream = StreamSanitizer()
        assert stream.feed(hostile[:cut]) + stream.feed(hostile[cut:]) == sanitize(hostile)


def test_reset_ends_an_open_sequence() -> None:
    stream = StreamSanitizer()
    assert stream.feed("a\x1b]0;title never ended") == "a"
    stream.reset()
    assert stream.feed("next message") == "next message"


def test_json_safe_escapes_c1_and_bidi_and_reads_back() -> None:
    value = {"text": "a\x9b2J\u202e\x85\x7f\x1b[0m"}
    line = json_safe(json.dumps(value, ensure_ascii=False))
    assert clean(line)
    assert json.loads(line) == value


def test_library_warnings_reach_stderr_sanitized() -> None:
    """The real command's process: Python prints the library's warnings with its last-resort
    handler; under ``main`` they are sanitized."""
    code = (
        "import logging, sys\n"
        "from agentfsm.cli._terminal import sanitized_logging\n"
        "with sanitized_logging():\n"
        "    logging.getLogger('agentfsm.engine.x').warning('w %s', '\\x1b]0;t\\x07\\x9b2Jok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stderr == "w ok\n"


def test_configured_logging_is_left_alone(caplog: pytest.LogCaptureFixture) -> None:
    from agentfsm.cli._terminal import sanitized_logging

    library = logging.getLogger("agentfsm")
    before = list(library.handlers)
    with sanitized_logging():
        assert library.handlers == before


TEXT = st.text(
    st.one_of(
        st.characters(codec=None),
        st.sampled_from(["\x1b", "[", "]", "\\", "\x07", "\x9b", "\x9c", "\x9d", "P", "_", "\r"]),
    ),
    max_size=200,
)


@given(TEXT)
def test_nothing_a_terminal_acts_on_survives(text: str) -> None:
    shown = sanitize(text)
    assert clean(shown)
    assert sanitize(shown) == shown  # idempotent: printing clean text twice is the same


@given(TEXT, st.lists(st.integers(0, 200), max_size=6))
def test_pieces_give_the_same_text_as_the_whole(text: str, cuts: list[int]) -> None:
    stream = StreamSanitizer()
    points = sorted({min(cut, len(text)) for cut in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    assert "".join(stream.feed(piece) for piece in pieces) == sanitize(text)


@given(st.text(st.characters(codec=None, exclude_categories=("Cc", "Cf", "Cs")), max_size=100))
def test_ordinary_text_is_unchanged(text: str) -> None:
    assert sanitize(text) == text


@pytest.mark.parametrize("errors", ["surrogateescape", "surrogatepass", "strict"])
def test_every_lone_surrogate_is_an_escape_whatever_the_stream(errors: str) -> None:
    hidden = "".join(chr(0xDC00 + b) if b >= 0x80 else chr(b) for b in "\u009b2J\u202e".encode())
    text = f"a{hidden}\ud800b"
    shown = sanitize(text)
    assert shown == "a\\udcc2\\udc9b2J\\udce2\\udc80\\udcae\\ud800b"
    assert shown.encode("utf-8", errors).decode("utf-8") == shown  # plain ASCII on any stream
    assert cells(shown) == len(shown)  # the escape's width is counted
    stream = StreamSanitizer()
    assert "".join(stream.feed(c) for c in text) == shown
