"""The recorded corpus that ships with agentfsm: real provider exchanges as JSON fixtures.

``corpus_data/`` (package data, so it is there after ``pip install``) holds one
``agentfsm.wire-fixture/1`` file per recorded exchange, in a folder per provider, and
``index.json``: every fixture's id, file, provider, API, wire, kind, tags, source repository
and commit, and the SHA-256 of the file. ``scripts/import_wire.py`` writes both; the format
is described in docs/conformance.md.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = [
    "CORPUS_DIR",
    "CorpusMissingError",
    "bundled_corpus",
    "corpus_index",
    "index_problems",
]

CORPUS_DIR = Path(__file__).resolve().with_name("corpus_data")
"""Where the bundled corpus is installed (see :func:`bundled_corpus`)."""

INDEX = "index.json"
INDEX_FORMAT = "agentfsm.wire-index/1"


class CorpusMissingError(FileNotFoundError):
    """A recorded corpus is not where it should be."""


def corpus_index(folder: str | Path) -> dict[str, Any]:
    """The parsed ``index.json`` of a corpus folder (:class:`CorpusMissingError` if absent)."""
    file = Path(folder) / INDEX
    if not file.is_file():
        raise CorpusMissingError(f"no recorded corpus: {file} is missing")
    data = json.loads(file.read_text("utf-8"))
    if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
        raise ValueError(f"{file} is not an {INDEX_FORMAT} index")
    return data


def bundled_corpus() -> Path:
    """The folder of the corpus that ships with agentfsm.

    Raises :class:`CorpusMissingError` (never returns an empty folder) when the package was
    installed without its data: the recorded tests and ``agentfsm conformance corpus`` then
    fail loudly instead of replaying nothing."""
    index = corpus_index(CORPUS_DIR)
    missing = [e["file"] for e in index["exchanges"] if not (CORPUS_DIR / e["file"]).is_file()]
    if missing:
        shown = ", ".join(missing[:3]) + (" …" if len(missing) > 3 else "")
        raise CorpusMissingError(
            f"the bundled corpus in {CORPUS_DIR} lacks {len(missing)} indexed files: {shown}"
        )
    return CORPUS_DIR


def index_problems(folder: str | Path) -> list[str]:
    """What is wrong between a corpus folder and its index (an empty list: nothing).

    Each indexed file must exist with the recorded SHA-256 and id; every fixture file must be
    indexed, once; ``count`` and ``providers`` must match the entries."""
    root = Path(folder)
    index = corpus_index(root)
    problems: list[str] = []
    entries: list[dict[str, Any]] = index["exchanges"]
    files = [e["file"] for e in entries]
    problems += [f"{f}: indexed twice" for f in sorted({f for f in files if files.count(f) > 1})]
    for entry in entries:
        path = root / entry["file"]
        if not path.is_file():
            problems.append(f"{entry['file']}: indexed but missing")
            continue
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            problems.append(f"{entry['file']}: sha256 differs from the index")
        if json.loads(data).get("id") != entry["id"]:
            problems.append(f"{entry['file']}: its id is not {entry['id']!r}")
    on_disk = {p.relative_to(root).as_posix() for p in root.glob("*/*.json")}
    problems += [f"{f}: not in the index" for f in sorted(on_disk - set(files))]
    if index.get("count") != len(entries):
        problems.append(f"count {index.get('count')} but {len(entries)} entries")
    providers: dict[str, int] = {}
    for entry in entries:
        providers[entry["provider"]] = providers.get(entry["provider"], 0) + 1
    if index.get("providers") != providers:
        problems.append("the providers tally does not match the entries")
    return problems
