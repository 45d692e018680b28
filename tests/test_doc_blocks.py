"""Every ```python block of README.md and docs/**/*.md runs.

Conventions (for whoever writes the docs):

- The blocks of one page run in order in one shared namespace, like a doctest session: a
  later block may use what an earlier one defined.
- Top-level ``await`` is not supported. A block that defines ``async def main()`` has it
  run with ``asyncio.run(main())`` right after the block (a block may also call
  ``asyncio.run`` itself).
- A block that cannot run here (network, a real API key, the local model) is marked with an
  HTML comment on the line directly above its fence, giving the reason:
  ``<!-- not-run: needs a real API key -->``. A marker without a reason, or one that is not
  directly above a python block, fails the suite. Prefer rewriting the block with the
  public test doubles (``agentfsm.testing.ScriptedChat``, ``FakeProviderServer``).
- Blocks run in a temporary working directory.
- Only ``python`` (also ``py``, ``python3``) blocks run; ``sh``, ``json``, ``text`` … do not.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import sys
import textwrap
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYTHON = frozenset({"python", "py", "python3"})

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^\s`]*)")
_MARKER = re.compile(r"^\s*<!--\s*not-run\b(?P<rest>.*?)-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced python block of a page."""

    page: Path
    line: int
    """1-based line of the block's first line of code."""
    code: str
    skip: str | None
    """The reason given by a ``<!-- not-run: … -->`` marker, if any."""


@dataclass(frozen=True)
class Page:
    name: str
    blocks: tuple[Block, ...]
    problems: tuple[str, ...]
    """Malformed or misplaced skip markers."""


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def parse(path: Path, root: Path = ROOT) -> Page:
    """The python blocks of a page, with their skip markers."""
    lines = path.read_text("utf-8").splitlines()
    name = path.relative_to(root).as_posix()
    blocks: list[Block] = []
    problems: list[str] = []
    markers: dict[int, str] = {}  # line index -> reason, until a python block claims it
    last_text: int | None = None  # index of the last non-blank line outside fences
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence is None:
            marker = _MARKER.match(line)
            if marker is not None:
                reason = marker.group("rest").strip().lstrip(":").strip()
                if not reason:
                    problems.append(f"{name}:{i + 1}: a not-run marker must give its reason")
                markers[i] = reason
            if line.strip():
                last_text = i
            i += 1
            continue
        opening = fence.group("fence")
        info = fence.group("info").lower()
        end = i + 1
        while end < len(lines):
            closing = lines[end].strip()
            if closing.startswith(opening[0] * len(opening)) and not closing.strip(opening[0]):
                break
            end += 1
        marker_reason = markers.pop(last_text, None) if last_text is not None else None
        if info in PYTHON:
            # A fence indented inside a list item: its lines carry the same indent.
            body = textwrap.dedent("\n".join(lines[i + 1 : end]) + "\n")
            blocks.append(Block(path, i + 2, body, marker_reason))
        elif marker_reason is not None:
            problems.append(
                f"{name}:{i + 1}: a not-run marker sits above a {info or 'plain'} block"
            )
        last_text = None
        i = end + 1
    problems += [
        f"{name}:{m + 1}: a not-run marker must sit directly above a python block" for m in markers
    ]
    return Page(name, tuple(blocks), tuple(problems))


def python_blocks(path: Path) -> list[Block]:
    """The python blocks of one page (used by the per-page behaviour tests)."""
    return list(parse(path).blocks)


def block_defining(path: Path, name: str) -> str:
    """The code of the one python block of ``path`` that defines or assigns ``name``."""
    pattern = re.compile(
        rf"^(?:(?:async )?def|class) {re.escape(name)}\b|^{re.escape(name)} =", re.M
    )
    (block,) = [b for b in python_blocks(path) if pattern.search(b.code)]
    return block.code


def run_blocks(blocks: list[Block], module_name: str) -> tuple[dict[str, Any], int]:
    """Run the blocks not marked not-run, in order, in one namespace; it and how many ran."""
    module = types.ModuleType(module_name)
    sys.modules[module_name] = module  # dataclasses and pickling look classes up there
    namespace = module.__dict__
    ran = 0
    try:
        for block in blocks:
            if block.skip is not None:
                continue
            source = "\n" * (block.line - 1) + block.code  # tracebacks show page lines
            before = namespace.get("main")
            exec(compile(source, str(block.page), "exec"), namespace)
            main = namespace.get("main")
            if main is not before and inspect.iscoroutinefunction(main):
                asyncio.run(main())
            ran += 1
    finally:
        sys.modules.pop(module_name, None)
    return namespace, ran


def all_pages() -> Iterator[Page]:
    for path in pages():
        yield parse(path)


PAGES = [page for page in all_pages() if page.blocks]


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_page_blocks_run(page: Page, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not page.problems, page.problems
    monkeypatch.chdir(tmp_path)
    module_name = "doc_blocks_" + re.sub(r"\W", "_", page.name)
    _, ran = run_blocks(list(page.blocks), module_name)
    assert ran == sum(1 for b in page.blocks if b.skip is None)


def test_skip_markers_give_reasons_and_blocks_are_counted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parsed = list(all_pages())
    problems = [p for page in parsed for p in page.problems]
    blocks = [b for page in parsed for b in page.blocks]
    skipped = [b for b in blocks if b.skip is not None]
    with capsys.disabled():
        print(
            f"\ndoc blocks: {len(blocks) - len(skipped)} python blocks run, "
            f"{len(skipped)} skipped, on {len(PAGES)} pages"
        )
        for b in skipped:
            print(f"  not run: {b.page.relative_to(ROOT)}:{b.line}: {b.skip}")
    assert not problems, problems
    assert len(blocks) > len(skipped)


def test_parser_reads_markers_and_fences(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# t\n\n```python\nx = 1\n```\n\n<!-- not-run: needs a real API key -->\n"
        "```python\nraise SystemExit\n```\n\n<!-- not-run -->\n```py\ny = 2\n```\n"
        "````sh\n```python\nnot python\n```\n````\n\n<!-- not-run: wrong -->\n```json\n{}\n```\n"
        "- a list item:\n\n    ```python\n    z = 3\n    ```\n",
        "utf-8",
    )
    parsed = parse(page, tmp_path)
    assert [(b.line, b.code, b.skip) for b in parsed.blocks] == [
        (4, "x = 1\n", None),
        (9, "raise SystemExit\n", "needs a real API key"),
        (14, "y = 2\n", ""),
        (29, "z = 3\n", None),
    ]
    assert [p.split(": ", 1)[1] for p in parsed.problems] == [
        "a not-run marker must give its reason",
        "a not-run marker sits above a json block",
    ]
