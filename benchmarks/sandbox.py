"""What the OS sandbox costs per shell call (``make bench``).

Times ``run_command("true")`` (the shell tool's and the verify gate's way to run a command)
through :class:`BubblewrapSandbox` and through :class:`Unsandboxed`, interleaved so drift
hits both alike, after a few warm-up calls. Reports the medians in ms, the difference and
the ratio, under the ``sandbox`` key of ``benchmarks/results.json`` (other keys are kept).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentfsm.adapters.tools import SandboxUnavailable, Unsandboxed, detect_sandbox
from agentfsm.sandbox._process import CommandSandbox, run_command
from benchmarks._results import merge_results

WARMUP = 5


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
        variants: dict[str, CommandSandbox] = {"bubblewrap": sandboxed, "none": Unsandboxed()}
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(WARMUP):
            for sandbox in variants.values():
                await call_ms(sandbox, root)
        for _ in range(samples):
            for name, sandbox in variants.items():  # interleaved
                times[name].append(await call_ms(sandbox, root))
        medians = {name: statistics.median(xs) for name, xs in times.items()}
        return {
            "available": True,
            "benchmark": "one shell call of `true` through run_command, ms",
            "sandbox": sandboxed.describe(),
            "samples": samples,
            "median_ms": {name: round(ms, 2) for name, ms in medians.items()},
            "sandbox_costs_ms": round(medians["bubblewrap"] - medians["none"], 2),
            "ratio": round(medians["bubblewrap"] / medians["none"], 2),
            "samples_ms": {name: [round(ms, 2) for ms in xs] for name, xs in times.items()},
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results.json"))
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args(argv)

    result = asyncio.run(measure(args.samples))
    merge_results(args.out, "sandbox", result)
    if not result["available"]:
        print("sandbox: not measured:", result["error"], file=sys.stderr)
        return 0
    print(
        f"shell call of `true`, median of {args.samples}: "
        f"bubblewrap {result['median_ms']['bubblewrap']} ms, "
        f"unsandboxed {result['median_ms']['none']} ms "
        f"(+{result['sandbox_costs_ms']} ms, x{result['ratio']}) -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
