"""A run's HTML picture as a user sees it: rendered in headless Chromium, checked through
the DevTools protocol (the drawing's classes after the page's script ran, the timeline, the
console) and photographed."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentfsm import render_run

from ..chromium import Chromium
from ..conftest import require_program
from ..run_sessions import HOSTILE, long_run, tool_run

pytestmark = pytest.mark.requires_program("chromium", "chromium")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Chromium]:
    chromium = Chromium(require_program("chromium", "chromium"), tmp_path / "profile")
    try:
        yield chromium
    finally:
        chromium.close()


def png_colours(data: bytes) -> tuple[int, int, int]:
    """Width, height and the number of distinct pixel rows of an 8-bit RGB(A) PNG (a blank
    or one-colour picture has one)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    assert depth == 8
    assert colour in (2, 6)
    chunks, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        if kind == b"IDAT":
            chunks.append(data[offset + 8 : offset + 8 + length])
        offset += 12 + length
    raw = zlib.decompress(b"".join(chunks))
    stride = width * (4 if colour == 6 else 3) + 1
    rows = {raw[i * stride + 1 : (i + 1) * stride] for i in range(height)}
    return width, height, len(rows)


def test_the_harness_sees_console_errors_and_blocked_loads(
    tmp_path: Path, browser: Chromium
) -> None:
    """The checks below would notice: a console error, an exception and a load the page's
    policy blocks all reach ``errors``."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta http-equiv='Content-Security-Policy' "
        "content=\"default-src 'none'; script-src 'unsafe-inline'\"></head><body>"
        "<img src='http://127.0.0.1:9/x.png'><script>console.error('boom');"
        "null.x;</script></body></html>",
        "utf-8",
    )
    browser.open(page)
    browser.evaluate("1")
    joined = "\n".join(browser.errors)
    assert "console: boom" in joined
    assert "exception: TypeError" in joined
    assert "Content Security Policy" in joined


async def test_the_path_and_the_end_are_drawn_and_nothing_errs(
    tmp_path: Path, browser: Chromium
) -> None:
    session = await tool_run(tmp_path / "sessions", answer="done " + HOSTILE)
    page = tmp_path / "run.html"
    render_run(session, page)
    browser.open(page)
    assert browser.evaluate("document.body.dataset.ready") == "1"
    taken = browser.evaluate(
        "[...document.querySelectorAll('#machine g.edge.taken')]"
        ".map(e => [e.dataset.edge, e.querySelector('text.count').textContent])"
    )
    assert sorted(taken) == [
        ["compress_check>llm_start", "\u00d73"],
        ["final_check>final", "\u00d71"],
        ["llm_end>final_check", "\u00d71"],
        ["llm_end>run_tools", "\u00d72"],
        ["llm_start>llm_end", "\u00d73"],
        ["run_tools>turn_start", "\u00d72"],
        ["turn_start>compress_check", "\u00d73"],
    ]
    # drawn: a taken edge's stroke is the path colour, thicker than an edge not taken
    widths = browser.evaluate(
        "['turn_start>compress_check', 'turn_start>stopped'].map(k => getComputedStyle("
        "[...document.querySelectorAll('#machine g.edge')].find(e => e.dataset.edge === k)"
        ".querySelector('path')).strokeWidth)"
    )
    assert float(widths[0].removesuffix("px")) > float(widths[1].removesuffix("px"))
    assert browser.evaluate(
        "[...document.querySelectorAll('#machine g.state.ended')].map(s => s.dataset.state)"
    ) == ["final"]
    rows = browser.evaluate("[...document.querySelectorAll('#turns li.turn')].length")
    assert rows == 3
    detail = browser.evaluate("document.getElementById('detail').textContent")
    assert "done " + HOSTILE in detail  # the last turn is open; its markup shows as text
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('img, iframe, object, embed').length") == 0
    shot = browser.screenshot(tmp_path / "run.png")
    width, height, distinct = png_colours(shot)
    assert (width, height) == (1400, 900)
    assert distinct > 200  # text, boxes and edges, not a blank page
    assert browser.errors == []


async def test_a_500_turn_run_pages_its_timeline(tmp_path: Path, browser: Chromium) -> None:
    session = await long_run(tmp_path / "sessions", 500)
    page = tmp_path / "long.html"
    render_run(session, page)
    browser.open(page)
    assert browser.evaluate("document.querySelectorAll('#turns li.turn').length") == 50
    assert browser.evaluate("document.getElementById('page').textContent").startswith(
        "turns 451\u2013500 of 500"
    )
    browser.evaluate("document.getElementById('prev').click()")
    assert browser.evaluate("document.querySelector('#turns li.turn').dataset.turn") == "400"
    browser.evaluate("agentfsmRun.goTo(0); agentfsmRun.show(0, null)")
    assert "src/module_0.py" in browser.evaluate("document.getElementById('detail').textContent")
    assert (
        browser.evaluate(
            "[...document.querySelectorAll('#machine g.edge.taken')].find("
            "e => e.dataset.edge === 'run_tools>turn_start').querySelector('text.count').textContent"
        )
        == "\u00d7499"
    )
    assert browser.errors == []


# Every label read from the browser's own geometry: on its edge, clear of the states.
_LABEL_GEOMETRY = """(() => {
  const boxes = [...document.querySelectorAll('#machine g.state')].map(
    s => [s.dataset.state, s.querySelector('rect').getBBox()]);
  const edges = [...document.querySelectorAll('#machine g.edge')];
  const distance = (path, x, y) => {
    const length = path.getTotalLength();
    let best = Infinity;
    for (let i = 0; i <= 400; i++) {
      const p = path.getPointAtLength(length * i / 400);
      best = Math.min(best, Math.hypot(p.x - x, p.y - y));
    }
    return best;
  };
  const found = [];
  for (const edge of edges) {
    for (const text of edge.querySelectorAll('text')) {
      if (!text.textContent) continue;
      const b = text.getBBox();
      const x = b.x + b.width / 2, y = b.y + b.height / 2;
      const own = distance(edge.querySelector('path'), x, y);
      const nearest = Math.min(...edges.filter(e => e !== edge).map(
        e => distance(e.querySelector('path'), x, y)));
      const covers = boxes.filter(([, s]) => b.x < s.x + s.width && s.x < b.x + b.width
        && b.y < s.y + s.height && s.y < b.y + b.height).map(([id]) => id);
      found.push([edge.dataset.edge, text.getAttribute('class'), text.textContent,
                  Math.round(own), Math.round(nearest), covers]);
    }
  }
  return found;
})()"""


async def test_every_label_sits_on_its_own_edge_clear_of_the_states(
    tmp_path: Path, browser: Chromium
) -> None:
    session = await tool_run(tmp_path / "sessions", answer="done")
    page = tmp_path / "run.html"
    render_run(session, page)
    browser.open(page)
    assert browser.evaluate("document.body.dataset.ready") == "1"
    labels = browser.evaluate(_LABEL_GEOMETRY)
    assert len(labels) >= 17  # every guard, and the counts of the edges taken
    for edge, kind, text, own, nearest, covers in labels:
        assert covers == [], f"{kind} {text!r} of {edge} covers {covers}"
        if kind == "guard":
            assert own <= 3, f"{text!r} of {edge} is {own} px off its edge"
        # a count reads as its own edge's: none is nearer to it
        assert own <= nearest, f"{kind} {text!r} of {edge}: {own} px, another edge {nearest}"
    budget = [
        text for edge, kind, text, *_ in labels if edge == "llm_end>budget" and kind == "guard"
    ]
    assert budget == ["has_tool_calls, last_turn"]  # taken on the last turn only
    print(f"labels checked: {len(labels)}")


def test_the_header_counts_as_trace_and_sessions_list_do(
    tmp_path: Path, browser: Chromium, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose last reply asked for calls the budget closed (not run), then a run
    aborted before its reply: the picture's header, ``trace --json`` and ``sessions list
    --json`` count the same turns (replies) and tool calls (that ran)."""
    import json

    from agentfsm.cli import main

    def line(kind: str, payload: object) -> str:
        return json.dumps({"ts": "2026-01-01T00:00:00.000Z", "kind": kind, kind: payload}) + "\n"

    def asks(*ids: str) -> str:
        calls = [{"id": i, "name": "read_file", "arguments": {}} for i in ids]
        return line("message", {"role": "assistant", "content": "", "tool_calls": calls})

    def result(call_id: str) -> str:
        return line("message", {"role": "tool", "tool_call_id": call_id, "content": "x"})

    folder = tmp_path / "sessions"
    folder.mkdir()
    text = "".join(
        [
            line("meta", {"event": "run_start"}),
            line("message", {"role": "user", "content": "go"}),
            asks("a", "b"),
            line("meta", {"event": "tool_call_start", "call_id": "a", "turn": 1}),
            line("meta", {"event": "tool_call_start", "call_id": "b", "turn": 1}),
            result("a"),
            result("b"),
            asks("c", "d", "e"),  # the last turn: closed by the budget, never run
            line("meta", {"event": "budget_exhausted", "turns_used": 2}),
            line("message", {"role": "tool", "tool_call_id": "c", "content": "x"}),
            line("meta", {"event": "run_end", "stopped_reason": "budget"}),
            line("meta", {"event": "run_start"}),
            line("message", {"role": "user", "content": "again"}),
            line(
                "meta", {"event": "run_end", "stopped_reason": "aborted", "last_state": "llm_start"}
            ),
        ]
    )
    session = folder / "20260101T000000Z-0001.jsonl"
    session.write_text(text, "utf-8")
    assert main(["trace", "latest", "--json", "--session-dir", str(folder)]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert main(["sessions", "list", "--json", "--session-dir", str(folder)]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    page = tmp_path / "run.html"
    render_run(session, page)
    browser.open(page)
    header = browser.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#summary dt')]"
        ".map(dt => [dt.textContent, dt.nextElementSibling.textContent]))"
    )
    turns = sum(run["turns"] for run in runs)
    calls = sum(sum(run["tool_calls"].values()) for run in runs)
    assert (turns, calls) == (2, 2)
    assert (listed["turns"], listed["tool_calls"]) == (turns, calls)
    assert (header["turns"], header["tool calls"]) == (str(turns), str(calls))
