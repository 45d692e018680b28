"""`python -m agentfsm.engine OUTDIR`: write the diagrams (what `make diagrams` runs)."""

from __future__ import annotations

import sys
from pathlib import Path

from .diagram import DiagramUnavailable, write_diagram


def main(argv: list[str]) -> int:
    outdir = Path(argv[0] if argv else "diagrams")
    outdir.mkdir(parents=True, exist_ok=True)
    print(write_diagram(outdir / "agent_loop.mmd"))
    try:
        print(write_diagram(outdir / "agent_loop.svg"))
    except DiagramUnavailable as exc:
        print(f"agent_loop.svg not written: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
