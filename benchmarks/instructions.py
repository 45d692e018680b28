"""CPU instructions a model call, counted by valgrind's callgrind (the machine's load does not
change them): the difference between one run and ``1 + --runs`` runs of a variant (each
after a warm-up run), divided by the calls of the runs counted.

    .venv/bin/python benchmarks/instructions.py [--turns 200] [--runs 1] [VARIANT ...]

Variants: those of ``benchmarks/peers/agentfsm_workload.py`` (``core_default``,
``agent_coding_session`` …), ``agent_bare`` (``Agent`` with neither preset nor session),
``agent_no_session``, ``agent_no_policies``, ``agent_without_<policy class>`` (the full
product less one policy of the preset, e.g. ``agent_without_loop_health``) and the other
variants of ``agentfsm_workload.product_variant`` with ``agent_`` in front
(``agent_hollow_prune_tool_results`` …). Needs valgrind.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
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


def variant(name: str, turns: int) -> Callable[[], Awaitable[object]]:
    """One run of the variant ``name`` at ``turns`` tool turns."""
    if name in workload.VARIANTS:
        return lambda: workload.VARIANTS[name](turns)
    if not name.startswith("agent_"):
        raise SystemExit(f"unknown variant {name!r}")
    policies, folder = workload.product_variant(
        name.removeprefix("agent_"), workload.WORKSPACE.name
    )
    return workload.agent_run(workload.workload_agent(turns, policies, folder), turns)


async def runs(name: str, turns: int, count: int) -> None:
    """A warm-up run, then ``count`` runs (the collector emptied and everything made so far
    frozen in between: a collection then walks the same objects at the same moments in the
    processes of one and of two runs, instead of the whole heap wherever it happens to fall)."""
    run = variant(name, turns)
    for index in range(count + 1):
        Counter.calls = 0
        await run()
        if index == 0:
            gc.collect()
            gc.freeze()


def counted(name: str, turns: int, count: int) -> int:
    """Instructions of this script doing ``count`` runs (after the warm-up), by callgrind."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            __file__,
            "--child",
            name,
            str(turns),
            str(count),
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        asyncio.run(runs(args[1], int(args[2]), int(args[3])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="runs counted after the first (more: closer to a long-running process's steady "
        "state, where code run once a run is specialized too)",
    )
    parser.add_argument("variants", nargs="*", default=["core_default", "agent_coding_session"])
    options = parser.parse_args(args)
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (Debian/Ubuntu: apt-get install valgrind)")
    if options.runs < 1:
        parser.error("--runs must be at least 1")
    calls = (options.turns + 1) * options.runs
    base: float | None = None
    for name in options.variants:
        more = counted(name, options.turns, 1 + options.runs)
        per_call = (more - counted(name, options.turns, 1)) / calls
        base = per_call if base is None else base
        print(f"{name:32s} {per_call:12,.0f} instructions a model call  x{per_call / base:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
