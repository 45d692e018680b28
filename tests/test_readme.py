"""The README's example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_opens_with_the_two_commands() -> None:
    text = README.read_text("utf-8")
    first_block = text.split("```")[1]
    assert "make demo" in first_block
    assert "make test" in first_block


def test_readme_quick_start_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text("utf-8"), re.S)
    assert len(blocks) == 2, "the README has two Python examples"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})
    printed = capsys.readouterr().out.split()
    assert printed == [
        "turn_start",
        "llm_start",
        "llm_end",
        "tool_call_start",
        "tool_call_end",
        "turn_start",
        "llm_start",
        "llm_end",
        "final",
        "turn_end",
    ]
