"""What each part of the full product costs in wall time, measured in place: paired, rotated
ablations in one process.

    .venv/bin/python benchmarks/ablate.py [--turns 10] [--rounds 40] [VARIANT ...]

Every round times each variant once (one untimed run, then ``--repeat`` runs, as a sample of
``benchmarks/peers.py``'s harness), in an order
that rotates from round to round, so no variant always follows the same one; a variant's
figure is the median over the rounds of its difference from ``full`` in the same round,
given as a share of that round's core-loop run (``core_default``). ``full2`` is ``full``
timed a second time: its difference is the noise floor of the method.

Variants (``product_variant`` of ``benchmarks/peers/agentfsm_workload.py``, on its workload,
files on a memory file system when there is one): ``no_session``, ``no_policies``, ``bare``
(neither), ``without_<policy>`` (the preset less that policy), ``hollow_<policy>`` (that
policy kept, its hooks doing nothing: the difference from ``without_<policy>`` is what calling
them costs), ``hollow`` (every policy so), ``quiet_loop_health`` (stagnation never warns).

A part's cost in place differs from its cost alone (``instructions.py``, or a loop over the
part): code that runs once a turn or once a run finds little of itself in the processor's
caches, so each step of it costs more than in a tight loop.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))

if TYPE_CHECKING:  # the type checker sees the folder as a package; the script runs beside it
    from benchmarks.peers import agentfsm_workload as workload
    from benchmarks.peers._harness import Counter, RunOnce, sample
else:
    import agentfsm_workload as workload
    from _harness import Counter, RunOnce, sample


def variant(name: str, turns: int, folder: str) -> RunOnce:
    """Runs of the variant ``name`` (``run_once(turns)``, as the workloads of ``peers.py``)."""
    if name == "core":
        return workload.VARIANTS["core_default"]
    policies, session = workload.product_variant("full" if name == "full2" else name, folder)
    run = workload.agent_run(workload.workload_agent(turns, policies, session), turns)

    async def run_once(_turns: int) -> int:  # the agent was built for ``turns``
        await run()
        return Counter.calls

    return run_once


async def measure(runs: dict[str, RunOnce], rounds: int, repeat: int, turns: int) -> None:
    names = list(runs)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            # µs a run: the harness's sample (µs a model call) times the run's calls
            samples[name].append(await sample(runs[name], turns, repeat) * (turns + 1))
    core, full = samples["core"], samples["full"]
    print(f"{'variant':28s} {'µs a run':>9s} {'x core':>7s} {'vs full, % of core':>19s}")
    for name in names:
        own = samples[name]
        ratio = statistics.median(a / c for a, c in zip(own, core, strict=True))
        share = statistics.median(
            (a - f) / c * 100 for a, f, c in zip(own, full, core, strict=True)
        )
        print(f"{name:28s} {statistics.median(own):9.1f} {ratio:7.3f} {share:+18.1f}%")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=10, help="timed runs a sample")
    parser.add_argument("variants", nargs="*", default=["no_session", "no_policies", "hollow"])
    options = parser.parse_args(argv)
    memory = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="agentfsm-ablate-", dir=memory) as folder:
        names = ["core", "full", "full2", *(v for v in options.variants if v not in ("full",))]
        runs = {name: variant(name, options.turns, folder) for name in dict.fromkeys(names)}
        asyncio.run(measure(runs, options.rounds, options.repeat, options.turns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
