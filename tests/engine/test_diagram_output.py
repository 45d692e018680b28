"""``render_diagram``: SVG is bytes or a file (``out=``), and the commas between the
policies of a guard survive Graphviz's line wrapping."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from agentfsm import render_diagram
from agentfsm.policies import stop_when, tokens_over, tool_called, verifier, verify, wrap_up

POLICIES = [
    verify("make check"),
    verifier(),
    wrap_up(),
    stop_when(tool_called("submit") | tokens_over(5)),
    stop_when(tool_called("give_up")),
]


def svg_lines(svg: bytes) -> list[str]:
    """The text lines Graphviz drew, unescaped."""
    texts = re.findall(rb"<text[^>]*>(.*?)</text>", svg, re.DOTALL)
    return [html.unescape(text.decode("utf-8")) for text in texts]


@pytest.mark.requires_program("dot", "graphviz")
def test_commas_between_policies_survive_wrapping_in_svg() -> None:
    lines = svg_lines(render_diagram("svg", policies=POLICIES))
    # Each policy of a guard is on its own line; every line but a guard's last ends with
    # the comma that separates it from the next policy.
    first = next(i for i, line in enumerate(lines) if "[gate_retry ←" in line)
    assert lines[first] == "[gate_retry ← verify('make check'),"
    assert lines[first + 1].startswith("verifier(max_turns=15)")
    stop = next(i for i, line in enumerate(lines) if "[policy_stop ←" in line)
    joined = " ".join(lines[stop : stop + 2])
    assert joined == (
        "[policy_stop ← stop_when(tool_called('submit') | tokens_over(5)), "
        "stop_when(tool_called('give_up'))]"
    )


def test_mermaid_and_dot_separate_policies_with_commas() -> None:
    mermaid = render_diagram("mermaid", policies=POLICIES)
    assert "[gate_retry ← verify('make check'), verifier(max_turns=15)" in mermaid
    dot = render_diagram("dot", policies=POLICIES)
    assert "verify(&#x27;make check&#x27;),<br/>verifier(max_turns=15)" in dot


@pytest.mark.requires_program("dot", "graphviz")
def test_svg_is_bytes_and_out_writes_it(tmp_path: Path) -> None:
    target = tmp_path / "loop.svg"
    svg = render_diagram("svg", out=target)
    assert isinstance(svg, bytes)
    assert target.read_bytes() == svg
    assert svg.decode("utf-8").lstrip().startswith("<?xml")


def test_out_writes_text_formats_as_utf8(tmp_path: Path) -> None:
    target = tmp_path / "loop.mmd"
    text = render_diagram("mermaid", policies=POLICIES, out=str(target))
    assert isinstance(text, str)
    assert target.read_text("utf-8") == text
    assert "←" in text
