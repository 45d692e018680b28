"""``render_diagram``'s return type follows its format: text for Mermaid/DOT, bytes for SVG/PNG.

mypy --strict checks the ``assert_type`` calls; the tests check the same at run time.
"""

from __future__ import annotations

from typing import assert_type

import pytest

from agentfsm.cli._diagram_cmd import DiagramFormat, render_diagram


def test_text_formats_are_str() -> None:
    mermaid = assert_type(render_diagram(), str)
    assert isinstance(mermaid, str)
    assert mermaid == assert_type(render_diagram("mermaid", policies=[]), str)
    dot = assert_type(render_diagram("dot"), str)
    assert isinstance(dot, str)
    assert dot.startswith("digraph")
    wide = assert_type(render_diagram("mermaid", direction="LR"), str)
    assert "direction LR" in wide


@pytest.mark.requires_program("dot", "graphviz")
def test_image_formats_are_bytes() -> None:
    svg = assert_type(render_diagram("svg"), bytes)
    assert isinstance(svg, bytes)
    assert b"<svg" in svg
    assert isinstance(assert_type(render_diagram("svg", direction="LR"), bytes), bytes)
    png = assert_type(render_diagram("png"), bytes)
    assert png.startswith(b"\x89PNG")


@pytest.mark.parametrize(("fmt", "kind"), [("mermaid", str), ("dot", str)])
def test_a_format_known_at_run_time_is_str_or_bytes(fmt: DiagramFormat, kind: type) -> None:
    rendered = assert_type(render_diagram(fmt), str | bytes)
    assert isinstance(rendered, kind)


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown diagram format"):
        render_diagram("jpeg")  # type: ignore[call-overload]
