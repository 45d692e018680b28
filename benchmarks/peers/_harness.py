"""The shared timing of every workload in ``benchmarks/peers`` (no agentfsm import here).

The workload: a zero-latency scripted model that asks for one ``echo`` tool call per turn
N times, then answers "done" (N + 1 model calls per run); the tool is ``async``. A workload
script gives :func:`main` a ``run_once(turns)`` coroutine function that makes one whole run
and returns how many model calls it made, which must be ``turns + 1``.

Each sample times ``repeat`` back-to-back runs in one event loop (after one untimed warm-up
run) and reports µs per model call. The script prints one JSON line: ``{"10": [µs, ...],
"200": [µs, ...], "versions": {...}}``; ``benchmarks/peers.py`` interleaves the scripts and
takes the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Awaitable, Callable
from importlib import metadata

RunOnce = Callable[[int], Awaitable[int]]

# turns -> runs per sample: about 200 model calls per sample either way.
PLANS = {10: 20, 200: 1}


BENCH_DIR = os.environ.get("AGENTFSM_BENCH_DIR") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".work"
)
"""Where the benchmarks' workspaces and session folders go: ``benchmarks/.work`` (a folder of
the checkout, as a user's project is), or ``$AGENTFSM_BENCH_DIR``; not the system's temporary
folder, which may be another file system than the one users keep their sessions on. Each run
of the full product creates its session file there: that one system call's cost belongs to
the file system (on the machine of docs/performance.md it ranged from about 10 to 500 µs, the
high end in the minutes after many files of the same folder tree were deleted)."""

KEEP = os.environ.get("AGENTFSM_BENCH_KEEP") == "1"
"""Set (``1``) by ``benchmarks/peers.py`` for the scripts it runs: their folders stay until it
removes its whole work folder after the last round, so no round's deletions slow the file
creation of the next ones."""


class WorkFolder:
    """A new empty folder under :data:`BENCH_DIR` (``name``), removed when closed or at exit
    unless :data:`KEEP`; a context manager giving its path."""

    def __init__(self, prefix: str) -> None:
        os.makedirs(BENCH_DIR, exist_ok=True)
        self.name = tempfile.mkdtemp(prefix=prefix, dir=BENCH_DIR)
        self._remove = (
            None if KEEP else weakref.finalize(self, shutil.rmtree, self.name, ignore_errors=True)
        )

    def cleanup(self) -> None:
        if self._remove is not None:
            self._remove()

    def __enter__(self) -> str:
        return self.name

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def work_folder(prefix: str) -> WorkFolder:
    """A new empty folder under :data:`BENCH_DIR` (see :class:`WorkFolder`)."""
    return WorkFolder(prefix)


class Counter:
    """The scripted model's only state: model calls so far in the current run."""

    calls = 0


def versions(*names: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


async def sample(run_once: RunOnce, turns: int, repeat: int) -> float:
    """µs a model call of ``repeat`` back-to-back runs, after one untimed warm-up run (each run
    checked for its ``turns + 1`` model calls)."""
    await _checked(run_once, turns)  # warm-up: imports, caches, first-call paths
    gc.collect()
    started = time.perf_counter_ns()
    for _ in range(repeat):
        await _checked(run_once, turns)
    elapsed = time.perf_counter_ns() - started
    return elapsed / 1000 / (repeat * (turns + 1))


async def _checked(run_once: RunOnce, turns: int) -> None:
    Counter.calls = 0
    calls = await run_once(turns)
    if calls != turns + 1:
        raise AssertionError(f"expected {turns + 1} model calls, the run made {calls}")


def main(run_once: RunOnce | dict[str, RunOnce], package_names: tuple[str, ...]) -> None:
    """Time ``run_once`` (or named variants, interleaved) and print one JSON line.

    With named variants (a dict), each sample of each variant is taken in turn in this process
    (a new variant first at each sample): the variants meet the same machine at nearly the
    same moments, so the ratio of two variants' samples of one round is a paired measurement.
    The line then holds ``{"variants": {name: {"10": [...], ...}}, "versions": {...}}``.
    """
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--turns", default=",".join(str(t) for t in PLANS))
    args = parser.parse_args()
    variants = run_once if isinstance(run_once, dict) else {"": run_once}
    names = list(variants)

    async def all_samples() -> dict[str, dict[str, list[float]]]:
        out: dict[str, dict[str, list[float]]] = {name: {} for name in names}
        for turns in (int(t) for t in args.turns.split(",")):
            repeat = PLANS.get(turns, 1)
            for name in names:
                out[name][str(turns)] = []
            for index in range(args.samples):
                shift = index % len(names)
                for name in names[shift:] + names[:shift]:
                    sample_us = await sample(variants[name], turns, repeat)
                    out[name][str(turns)].append(round(sample_us, 2))
        return out

    samples = asyncio.run(all_samples())
    result: dict[str, object] = dict(samples[""]) if "" in samples else {"variants": samples}
    result["versions"] = versions(*package_names)
    print(json.dumps(result))
