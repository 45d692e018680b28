"""What the OS sandbox costs per shell call (``make bench``).

Times ``run_command("true")`` (the shell tool's and the verify gate's way to run a command)
through three contenders, interleaved so drift hits all alike, after a few warm-up calls:

- ``bubblewrap``: :class:`BubblewrapSandbox` as ``detect_sandbox`` makes it (its mounts,
  toolchains, hidden files, seccomp filter, limits and cgroups);
- ``bare_bwrap``: ``bwrap`` itself with the same namespaces and no mount beyond the system
  folders, ``/proc``, ``/dev`` and the workspace it runs in (no filter, no limits): what
  bubblewrap costs;
- ``none``: :class:`Unsandboxed` (``/bin/sh -c``).

Reports the medians in ms, the sandbox's ratio to bare ``bwrap`` (the goal: at most 1.5)
with how far it moves with which calls happened to be slow (:func:`ratio_interval`), a
verdict that says the goal was held or missed only where that whole interval agrees, the
ratio to the unsandboxed call, the load average, whether this process is root (then the
sandbox also hides the root-only entries of ``/etc`` and joins cgroups) and how many mount
operations each ``bwrap`` makes (bwrap's work grows with them), under the ``sandbox`` key
of ``benchmarks/results.json`` (other keys are kept). ``--samples 5`` is a quick dry run.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentfsm.sandbox import (
    BubblewrapSandbox,
    CommandSandbox,
    SandboxUnavailable,
    Unsandboxed,
    detect_sandbox,
    run_command,
)
from benchmarks._results import merge_results

WARMUP = 5
GOAL = 1.5
"""The sandbox's median call at most this many times bare ``bwrap``'s."""
DRAWS = 2000
"""Resamples behind :func:`ratio_interval`."""
MIN_ROUNDS = 10
"""Fewer rounds than this give no verdict."""
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
MOUNT_OPERATIONS = {
    *("--bind", "--bind-try", "--ro-bind", "--ro-bind-try", "--dev-bind", "--tmpfs"),
    *("--remount-ro", "--proc", "--dev", "--symlink", "--dir"),
}


def mount_operations(argv: list[str]) -> int:
    return sum(1 for word in argv[: argv.index("--")] if word in MOUNT_OPERATIONS)


class BareBwrap:
    """``bwrap`` with the sandbox's namespaces, the system folders and the workspace only."""

    name = "bare-bwrap"

    def __init__(self, bwrap: str) -> None:
        self.bwrap = bwrap

    def command(self, command: str, cwd: Path) -> tuple[list[str], Mapping[str, str]]:
        mounts: list[str] = []
        for folder in SYSTEM:
            if os.path.islink(folder):
                mounts += ["--symlink", os.readlink(folder), folder]
            elif os.path.isdir(folder):
                mounts += ["--ro-bind", folder, folder]
        flags = ["--unshare-all", "--unshare-user", "--disable-userns", "--as-pid-1"]
        flags += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        argv = [self.bwrap, *flags, *mounts, "--proc", "/proc", "--dev", "/dev"]
        argv += ["--bind", str(cwd), str(cwd), "--chdir", str(cwd), "--"]
        return [*argv, "/bin/sh", "-c", command], {"PATH": "/usr/bin:/bin"}

    def describe(self) -> dict[str, Any]:
        return {"mechanism": self.name}


def ratio_interval(sandboxed: list[float], bare: list[float]) -> tuple[float, float]:
    """The 5th and 95th percentiles of the ratio of the medians over the rounds drawn again
    with replacement (a bootstrap: each round keeps its two interleaved calls together), so
    that one run's verdict says how much of it is noise; rounded outward to three decimals,
    as reported. Seeded: the same samples give the same interval (another seed moves its
    last digit or two)."""
    draw = random.Random(0).choices
    rounds = list(zip(sandboxed, bare, strict=True))
    ratios = sorted(
        statistics.median(s for s, _ in drawn) / statistics.median(b for _, b in drawn)
        for drawn in (draw(rounds, k=len(rounds)) for _ in range(DRAWS))
    )
    low, high = ratios[DRAWS // 20], ratios[DRAWS - DRAWS // 20 - 1]
    # round(.., 6) first: a ratio of exactly 1.5 computed as 1.5000000000000002 stays 1.5
    return math.floor(round(low * 1000, 6)) / 1000, math.ceil(round(high * 1000, 6)) / 1000


def verdict(interval: tuple[float, float], rounds: int) -> bool | None:
    """Whether the goal was held: ``True`` where the whole interval is within it, ``False``
    where it is all beyond, ``None`` where the run cannot tell (the interval spans the goal,
    or fewer than :data:`MIN_ROUNDS` rounds, whose interval says little)."""
    low, high = interval
    if rounds < MIN_ROUNDS:
        return None
    return True if high <= GOAL else False if low > GOAL else None


async def call_ms(sandbox: CommandSandbox, root: Path) -> float:
    start = time.perf_counter_ns()
    code, output = await run_command("true", root, timeout=30, max_output=1000, sandbox=sandbox)
    elapsed = (time.perf_counter_ns() - start) / 1e6
    assert code == 0, output
    return elapsed


async def measure(samples: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agentfsm-bench-") as folder:
        root = Path(folder)
        try:
            sandboxed = detect_sandbox(root)
        except SandboxUnavailable as error:
            return {"available": False, "error": str(error)}
        assert isinstance(sandboxed, BubblewrapSandbox)
        bwrap = shutil.which("bwrap") or "bwrap"
        variants: dict[str, CommandSandbox] = {
            "bubblewrap": sandboxed,
            "bare_bwrap": BareBwrap(bwrap),
            "none": Unsandboxed(),
        }
        times: dict[str, list[float]] = {name: [] for name in variants}
        load_before = os.getloadavg()
        for _ in range(WARMUP):
            for sandbox in variants.values():
                await call_ms(sandbox, root)
        for _ in range(samples):
            for name, sandbox in variants.items():  # interleaved
                times[name].append(await call_ms(sandbox, root))
        medians = {name: statistics.median(xs) for name, xs in times.items()}
        operations = {
            "bubblewrap": mount_operations(sandboxed.argv("true", root)),
            "bare_bwrap": mount_operations(variants["bare_bwrap"].command("true", root)[0]),
        }
        ratio = medians["bubblewrap"] / medians["bare_bwrap"]
        interval = ratio_interval(times["bubblewrap"], times["bare_bwrap"])
        return {
            "available": True,
            "benchmark": "one shell call of `true` through run_command, ms",
            "sandbox": sandboxed.describe(),
            "as_root": os.geteuid() == 0,
            "mount_operations": operations,
            "samples": samples,
            "load_average": [round(x, 2) for x in (*load_before, *os.getloadavg())],
            "median_ms": {name: round(ms, 2) for name, ms in medians.items()},
            "ratio_to_bare_bwrap": round(ratio, 2),
            "ratio_to_bare_bwrap_90_percent": list(interval),  # rounded outward
            "goal_ratio_to_bare_bwrap": GOAL,
            "goal_held": verdict(interval, samples),
            "sandbox_costs_ms": round(medians["bubblewrap"] - medians["none"], 2),
            "ratio": round(medians["bubblewrap"] / medians["none"], 2),
            "samples_ms": {name: [round(ms, 2) for ms in xs] for name, xs in times.items()},
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results.json"))
    parser.add_argument("--samples", type=int, default=40)
    args = parser.parse_args(argv)

    result = asyncio.run(measure(args.samples))
    merge_results(args.out, "sandbox", result)
    if not result["available"]:
        print("sandbox: not measured:", result["error"], file=sys.stderr)
        return 0
    ms = result["median_ms"]
    low, high = result["ratio_to_bare_bwrap_90_percent"]
    why = (
        f"fewer than {MIN_ROUNDS} rounds" if args.samples < MIN_ROUNDS else "the interval spans it"
    )
    held = {True: "held", False: "NOT held", None: f"cannot tell: {why}"}
    print(
        f"shell call of `true`, median of {args.samples} (load {result['load_average'][0]}): "
        f"bubblewrap {ms['bubblewrap']} ms, bare bwrap {ms['bare_bwrap']} ms, "
        f"unsandboxed {ms['none']} ms; x{result['ratio_to_bare_bwrap']} bare bwrap "
        f"(90 % x{low}-x{high}; goal x{GOAL}: {held[result['goal_held']]}), "
        f"x{result['ratio']} unsandboxed; {'as root, ' if result['as_root'] else ''}"
        f"{result['mount_operations']['bubblewrap']} mount operations against "
        f"{result['mount_operations']['bare_bwrap']} -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
