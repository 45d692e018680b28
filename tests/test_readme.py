"""The README's examples run as written (tests/test_doc_blocks.py runs every doc block)."""

from __future__ import annotations

from pathlib import Path

from .test_doc_blocks import python_blocks, run_blocks

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_opens_with_the_two_commands() -> None:
    text = README.read_text("utf-8")
    first_block = text.split("```")[1]
    assert "make demo" in first_block
    assert "make test" in first_block


def test_readme_opens_with_a_model_free_quick_start() -> None:
    """The install, the fake server and a run against it come first (tests/cli/
    test_cli_fake_server.py runs those lines)."""
    lines = README.read_text("utf-8").split("```")[1].splitlines()[1:]
    assert lines[0].startswith("pip install -e '.[cli]'")
    assert lines[1].startswith("agentfsm fake-server &")
    assert lines[2].startswith("agentfsm run --base-url http://127.0.0.1:8765/v1 --model fake")


def test_readme_python_examples_run() -> None:
    blocks = python_blocks(README)
    assert len(blocks) == 2
    assert all(block.skip is None for block in blocks)
    namespace, ran = run_blocks(blocks, "readme_examples")
    assert ran == 2
    assert namespace["outcome"].stopped_reason == "policy"
    assert namespace["local"].model == "qwen3"
