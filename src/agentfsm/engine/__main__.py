"""`python -m agentfsm.engine`: regenerate what is rendered from the machine (`make diagrams`).

- ``diagrams [OUTDIR]`` writes ``agent_loop.mmd`` and ``agent_loop.svg`` (default
  ``diagrams``), laid out top to bottom so that the SVG reads at README width (about
  700 px); a lone OUTDIR that is not a subcommand does the same.
- ``docs [--check] [PAGE]`` rewrites the generated tables of ``docs/engine.md`` (or PAGE);
  with ``--check`` it writes nothing and exits 1 when the page is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .diagram import DiagramDirection, DiagramUnavailable, write_diagram

DEFAULT_PAGE = Path("docs/engine.md")
COMMITTED_DIRECTION: DiagramDirection = "TB"
"""The layout of the committed diagrams (the README embeds the SVG)."""


def diagrams(argv: list[str]) -> int:
    outdir = Path(argv[0] if argv else "diagrams")
    outdir.mkdir(parents=True, exist_ok=True)
    print(write_diagram(outdir / "agent_loop.mmd", direction=COMMITTED_DIRECTION))
    try:
        print(write_diagram(outdir / "agent_loop.svg", direction=COMMITTED_DIRECTION))
    except DiagramUnavailable as exc:
        print(f"agent_loop.svg not written: {exc}", file=sys.stderr)
        return 1
    return 0


def docs(argv: list[str]) -> int:
    from .docgen import DocgenError, write_docs

    check = "--check" in argv
    rest = [a for a in argv if a != "--check"]
    page = Path(rest[0]) if rest else DEFAULT_PAGE
    try:
        changed = write_docs(page, check=check)
    except DocgenError as exc:
        print(f"{page}: {exc}", file=sys.stderr)
        return 1
    if check:
        if changed:
            print(f"{page} is stale: run `make diagrams`", file=sys.stderr)
            return 1
        print(f"{page} is current")
        return 0
    print(f"{page} {'regenerated' if changed else 'already current'}")
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] == "docs":
        return docs(argv[1:])
    if argv and argv[0] == "diagrams":
        return diagrams(argv[1:])
    return diagrams(argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
