"""The session file's system calls inside runs of the full product (not in ``make bench``).

Runs the full product of ``benchmarks/peers.py`` (``Agent`` + coding-agent preset + session
file, one async ``echo`` tool call a turn) and times, inside the runs, the calls the session
store makes to the operating system: creating the run's file (``open`` with ``O_EXCL``, plus
the verify gate's look for ``package.json``, which also goes through ``os.open``), each
write, and closing the file. These are the costs CPU-instruction counts
(``benchmarks/instructions.py``) do not see; they depend on the file system and the machine's
disk, so read them next to the wall-clock ratios of the same moment.

    .venv/bin/python benchmarks/session_io.py [--turns 10] [--runs 200] [--samples 3] [--compare]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import agentfsm.adapters.sessions._store as store

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peers"))

if TYPE_CHECKING:  # the type checker sees the folder as a package; the script runs beside it
    from benchmarks.peers import agentfsm_workload as workload
    from benchmarks.peers._harness import Counter
else:
    import agentfsm_workload as workload
    from _harness import Counter

SPENT: dict[str, int] = {"open": 0, "write": 0, "close": 0}
"""Nanoseconds in each kind of call since the last reset."""
_open = os.open


PRECREATED: list[int] = []
"""With ``--compare``: descriptors of files made before a sample, handed out instead of
creating a session's file while ``PRECREATE`` is on."""
PRECREATE = [False]


class _TimedOs:
    """``os`` as the session store sees it, with ``open``, ``write`` and ``close`` timed."""

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    @staticmethod
    def open(path: Any, flags: int, mode: int = 0o777) -> int:
        started = time.perf_counter_ns()
        try:
            if PRECREATE[0] and flags & os.O_EXCL and PRECREATED:
                return PRECREATED.pop()
            return _open(path, flags, mode)
        finally:
            SPENT["open"] += time.perf_counter_ns() - started

    @staticmethod
    def write(fd: int, data: Any, /) -> int:
        started = time.perf_counter_ns()
        try:
            return os.write(fd, data)
        finally:
            SPENT["write"] += time.perf_counter_ns() - started

    @staticmethod
    def close(fd: int, /) -> None:
        started = time.perf_counter_ns()
        try:
            os.close(fd)
        finally:
            SPENT["close"] += time.perf_counter_ns() - started


async def _timed(run: Any, turns: int, runs: int) -> float:
    """µs a run of ``run`` over ``runs`` runs."""
    started = time.perf_counter_ns()
    for _ in range(runs):
        Counter.calls = 0
        await run(turns)
    return (time.perf_counter_ns() - started) / runs / 1000


async def sample(turns: int, runs: int) -> dict[str, float]:
    """µs a run: the whole run and each kind of call, over ``runs`` runs."""
    for key in SPENT:
        SPENT[key] = 0
    total = await _timed(workload.agent_coding_session, turns, runs)
    return {"run": total, **{k: v / runs / 1000 for k, v in SPENT.items()}}


async def measure(turns: int, runs: int, samples: int) -> dict[str, float]:
    setattr(store, "os", _TimedOs())  # noqa: B010 - the store's own reference, replaced
    await _timed(workload.agent_coding_session, turns, 3)  # warm-up
    found = [await sample(turns, runs) for _ in range(samples)]
    return {key: statistics.median(s[key] for s in found) for key in found[0]}


async def compare(turns: int, runs: int, samples: int) -> dict[str, float]:
    """µs a run, medians of interleaved samples: the core loop, the full product, and the full
    product whose session file creation is replaced by a descriptor opened before the sample
    (``O_EXCL`` creates only)."""
    core = workload.VARIANTS["core_default"]
    product = workload.agent_coding_session
    found: dict[str, list[float]] = {"core": [], "product": [], "precreated": []}
    for run in (core, product):
        await _timed(run, turns, 3)
    folder = workload.WORKSPACE.name
    for index in range(samples):
        found["core"].append(await _timed(core, turns, runs))
        found["product"].append(await _timed(product, turns, runs))
        for number in range(runs):
            name = os.path.join(folder, f"precreated-{index}-{number}.jsonl")
            PRECREATED.append(_open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND))
        PRECREATE[0] = True
        try:
            found["precreated"].append(await _timed(product, turns, runs))
        finally:
            PRECREATE[0] = False
            while PRECREATED:
                os.close(PRECREATED.pop())
    return {key: statistics.median(values) for key, values in found.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--samples", type=int, default=3)
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also time the core loop and the full product with its session file's creation "
        "replaced by a descriptor opened beforehand, interleaved, and print the ratios",
    )
    options = parser.parse_args(argv)
    got = asyncio.run(measure(options.turns, options.runs, options.samples))
    calls = options.turns + 1
    print(
        f"N = {options.turns}: a run {got['run']:.0f} µs ({got['run'] / calls:.1f} a model call);"
        f" in it, session files: open {got['open']:.1f} µs, writes {got['write']:.1f} µs,"
        f" close {got['close']:.1f} µs (together {sum(got[k] for k in SPENT) / calls:.1f} µs"
        " a model call)"
    )
    if options.compare:
        times = asyncio.run(compare(options.turns, options.runs, max(options.samples, 5)))
        print(
            f"N = {options.turns}, µs a model call: core loop {times['core'] / calls:.1f}, full"
            f" product {times['product'] / calls:.1f} (x{times['product'] / times['core']:.2f}),"
            f" without creating its file {times['precreated'] / calls:.1f}"
            f" (x{times['precreated'] / times['core']:.2f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
