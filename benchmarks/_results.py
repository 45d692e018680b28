"""``merge_results``: one benchmark's figures into ``benchmarks/results.json``, others kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def merge_results(path: Path, key: str, value: Any) -> None:
    """Set ``key`` of the JSON object in ``path`` to ``value``, keeping every other key."""
    report: dict[str, Any] = {}
    if path.exists():
        report = json.loads(path.read_text("utf-8"))
    report[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n", "utf-8")
