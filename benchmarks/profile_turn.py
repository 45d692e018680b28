"""Where a turn's time goes: cProfile of a run, own time summed by part of the product.

Profiles the workload of ``benchmarks/peers.py`` (one async ``echo`` tool call a turn,
through a ``ToolBox``), by default the full product: ``Agent`` with the coding-agent preset
and a session file. Own time (``tottime``) of every function is summed into the part it
belongs to (by its file), and each part's share of the run is printed with the functions
that cost most. Profiling makes every Python call several times slower than it is, so read
the shares, not the times.

    .venv/bin/python benchmarks/profile_turn.py [--variant agent_coding_session] [--turns 200]
        [--runs 5] [--top 12]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))

if TYPE_CHECKING:  # the type checker sees the folder as a package; the script runs beside it
    from benchmarks.peers import agentfsm_workload as workload
    from benchmarks.peers._harness import Counter
else:
    import agentfsm_workload as workload
    from _harness import Counter

PARTS = (
    ("policies", "/agentfsm/policies/"),
    ("policy hooks (engine/_policy.py)", "/agentfsm/engine/_policy"),
    ("session recording", "/agentfsm/adapters/sessions/"),
    ("tools (ToolBox, pydantic)", "/agentfsm/adapters/tools/"),
    ("tools (ToolBox, pydantic)", "/pydantic"),
    ("events", "/agentfsm/engine/_events.py"),
    ("machine (stepper, guards)", "/agentfsm/engine/_stepper.py"),
    ("machine (stepper, guards)", "/agentfsm/engine/_machine.py"),
    ("machine (stepper, guards)", "/statemachine/"),
    ("loop (runner, context, history)", "/agentfsm/engine/"),
    ("agent (Agent.run)", "/agentfsm/agent/"),
    ("the scripted model", "agentfsm_workload.py"),
    ("asyncio", "/asyncio/"),
    ("json", "/json/"),
)


def part_of(filename: str) -> str:
    for part, marker in PARTS:
        if marker in filename:
            return part
    return "other (builtins, attrs, …)"


async def runs(variant: str, turns: int, count: int) -> None:
    run = workload.VARIANTS[variant]
    for _ in range(count):
        Counter.calls = 0
        await run(turns)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="agent_coding_session", choices=workload.VARIANTS)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)

    asyncio.run(runs(args.variant, args.turns, 1))  # warm-up: imports, caches, first files
    profile = cProfile.Profile()
    profile.enable()
    asyncio.run(runs(args.variant, args.turns, args.runs))
    profile.disable()

    stats = pstats.Stats(profile)
    table = stats.stats  # type: ignore[attr-defined]
    by_part: dict[str, float] = defaultdict(float)
    rows = []
    for (filename, line, name), (_, calls, tottime, _, _) in table.items():
        by_part[part_of(filename)] += tottime
        rows.append((tottime, calls, f"{Path(filename).name}:{line}({name})"))
    total = sum(by_part.values())
    calls = args.turns * args.runs
    print(f"{args.variant}: {args.runs} runs of {args.turns} tool turns, profiled")
    print(f"{'part':36} {'share':>6} {'µs/turn (profiled)':>20}")
    for part, seconds in sorted(by_part.items(), key=lambda kv: -kv[1]):
        print(f"{part:36} {seconds / total:6.1%} {seconds / calls * 1e6:20.1f}")
    print(f"\nfunctions by own time (top {args.top}):")
    for tottime, ncalls, where in sorted(rows, reverse=True)[: args.top]:
        print(f"  {tottime / total:6.1%}  {ncalls / calls:5.1f} calls/turn  {where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
