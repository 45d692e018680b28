"""Every quirk id the code or the docs cite is described in docs/conformance.md#known-quirks."""

from __future__ import annotations

import re
from pathlib import Path

from agentfsm.conformance._checks import ALL_CHECKS
from agentfsm.conformance._model import QUIRK_NOTES

ROOT = Path(__file__).resolve().parents[2]
QUIRK = re.compile(r"\bQ[1-9][0-9]*\b")


def described() -> dict[str, str]:
    """The rows of the known-quirks table: id -> description."""
    path, _, anchor = QUIRK_NOTES.partition("#")
    text = (ROOT / path).read_text("utf-8")
    headings = list(re.finditer(r"^## (.+)$", text, re.M))
    start = next(h for h in headings if h.group(1).lower().replace(" ", "-") == anchor)
    after = [h.start() for h in headings if h.start() > start.start()]
    section = text[start.end() : after[0] if after else len(text)]
    rows = re.findall(r"^\| (Q\d+) \| (.+?) \|", section, re.M)
    return dict(rows)


def cited(*folders: str, suffixes: tuple[str, ...]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for folder in folders:
        for file in sorted((ROOT / folder).rglob("*")):
            if file.suffix in suffixes and file.is_file():
                for quirk in QUIRK.findall(file.read_text("utf-8", errors="replace")):
                    out.setdefault(quirk, set()).add(str(file.relative_to(ROOT)))
    return out


def test_every_quirk_cited_in_the_source_is_described() -> None:
    rows = described()
    sources = cited("src", suffixes=(".py",))
    assert len(sources) >= 40  # the search itself works
    missing = {q: sorted(files) for q, files in sources.items() if q not in rows}
    assert missing == {}


def test_every_quirk_cited_in_the_docs_and_reports_is_described() -> None:
    rows = described()
    docs = cited("docs", suffixes=(".md", ".json"))
    assert {q: sorted(f) for q, f in docs.items() if q not in rows} == {}


def test_every_check_quirk_is_described_and_the_table_is_in_order() -> None:
    rows = described()
    assert {q for c in ALL_CHECKS for q in c.quirks} <= set(rows)
    numbers = [int(q[1:]) for q in rows]
    assert numbers == list(range(1, len(numbers) + 1))
    assert all(len(text) > 40 for text in rows.values())
