"""What a durable run costs per step: a scripted run of N tool turns, in memory vs as a
DBOS workflow on SQLite (launch, per-step overhead, replay of a recorded run).

Writes the ``durable`` key of ``benchmarks/results.json`` (other keys are kept).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentfsm import Agent, Message
from agentfsm.adapters.durable import (
    DurableRuntime,
    RunSpec,
    fork,
    register_agent_factory,
    result,
    submit,
)
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

TURNS = 20


def _agent(spec: RunSpec | None = None) -> Agent:
    def model(messages: Sequence[Message]) -> Any:
        done = sum(m.role == "assistant" for m in messages)
        return tool_reply(("t", {"i": done})) if done < TURNS else "done"

    return Agent(
        ScriptedChat(model), ScriptedTools({"t": lambda i: f"ok {i}"}), max_turns=TURNS + 1
    )


register_agent_factory("benchmarks.durable", _agent)
STEPS = 2 * TURNS + 1
"""Chat calls and tool calls of one run."""


async def _in_memory() -> float:
    started = time.perf_counter()
    await _agent().run("go")
    return time.perf_counter() - started


async def _durable(folder: Path, index: int) -> tuple[float, float]:
    spec = RunSpec(
        prompt="go", factory="benchmarks.durable", session_path=str(folder / f"{index}.jsonl")
    )
    # Until the run's last event: waiting for the result adds DBOS's polling interval.
    last = {"t": 0.0}

    def seen(event: object) -> None:
        last["t"] = time.perf_counter()

    started = time.perf_counter()
    run_id = await submit(spec, on_event=seen)
    await result(run_id)
    recorded = last["t"] - started
    started = time.perf_counter()
    await result(await fork(run_id))
    return recorded, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results.json"))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    memory = [asyncio.run(_in_memory()) for _ in range(args.rounds)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        runtime = DurableRuntime(f"sqlite:///{folder / 'durable.sqlite'}", polling_interval=0.05)
        runtime.launch()
        launch = time.perf_counter() - started
        try:
            runs = [asyncio.run(_durable(folder, i)) for i in range(args.rounds)]
        finally:
            started = time.perf_counter()
            runtime.destroy()
            destroy = time.perf_counter() - started
    recorded = statistics.median(r for r, _ in runs)
    replayed = statistics.median(r for _, r in runs)
    in_memory = statistics.median(memory)
    result_ = {
        "benchmark": f"a scripted run of {TURNS} tool turns ({STEPS} steps), in memory vs a "
        "durable run on DBOS + SQLite; medians",
        "python": platform.python_version(),
        "rounds": args.rounds,
        "steps_per_run": STEPS,
        "launch_s": round(launch, 3),
        "destroy_s": round(destroy, 3),
        "in_memory_run_ms": round(in_memory * 1000, 1),
        "durable_run_ms": round(recorded * 1000, 1),
        "overhead_per_step_ms": round((recorded - in_memory) * 1000 / STEPS, 2),
        "replay_run_ms_incl_queue_pickup": round(replayed * 1000, 1),
    }
    report: dict[str, Any] = {}
    if args.out.exists():
        report = json.loads(args.out.read_text("utf-8"))
    report["durable"] = result_
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", "utf-8")
    print(json.dumps(result_, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
