"""docs/conformance/matrix.md is the matrix of the committed reports, as
``make conformance-local`` (examples/conformance_local.py) writes it: regenerating the direct
reports keeps the LiteLLM columns the live tier wrote."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from agentfsm.conformance import Report, matrix_markdown

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "docs" / "conformance"


def test_the_committed_matrix_is_the_one_the_example_writes() -> None:
    spec = importlib.util.spec_from_file_location(
        "conformance_local", ROOT / "examples" / "conformance_local.py"
    )
    assert spec is not None
    assert spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    stems = [*example.PROFILES, *example.PROXIED]
    reports = [
        Report.from_dict(json.loads((FOLDER / f"{s}.json").read_text("utf-8"))) for s in stems
    ]
    assert len(reports) == 10
    expected = example.MATRIX_HEAD + matrix_markdown(reports)
    assert (FOLDER / "matrix.md").read_text("utf-8") == expected
