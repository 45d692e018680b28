"""What a durable run costs per step: a scripted run of N tool turns, in memory vs as a
DBOS workflow on SQLite and on PostgreSQL (launch, per-step overhead, replay of a recorded
run); and the throughput of 200 short tasks on the task queue with 1 vs 2 worker processes
(PostgreSQL).

PostgreSQL is a throwaway cluster started with ``tests/pg_server.py`` (Debian's binaries);
without them the PostgreSQL figures are left out. Writes the ``durable`` key of
``benchmarks/results.json`` (other keys are kept).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentfsm import Agent, Message
from agentfsm.adapters.durable import (
    DurableRuntime,
    RunSpec,
    TaskWorker,
    enqueue,
    fork,
    open_client,
    register_agent_factory,
    result,
    submit,
)
from agentfsm.adapters.durable._queue import gather_results
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.pg_server import PostgresServer, postgres_bin  # noqa: E402

from benchmarks._results import merge_results  # noqa: E402

TURNS = 20


def _agent(spec: RunSpec | None = None) -> Agent:
    def model(messages: Sequence[Message]) -> Any:
        done = sum(m.role == "assistant" for m in messages)
        return tool_reply(("t", {"i": done})) if done < TURNS else "done"

    return Agent(
        ScriptedChat(model), ScriptedTools({"t": lambda i: f"ok {i}"}), max_turns=TURNS + 1
    )


def _short(spec: RunSpec) -> Agent:
    """A short task: one tool call, one answer (three steps)."""
    return Agent(
        ScriptedChat([tool_reply(("t", {"i": 0})), "done"]), ScriptedTools({"t": lambda i: "ok"})
    )


register_agent_factory("benchmarks.durable", _agent)
register_agent_factory("benchmarks.durable.short", _short)
STEPS = 2 * TURNS + 1
"""Chat calls and tool calls of one run."""
SHORT_TASKS = 200
WORKER_CONCURRENCY = 8


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


def _per_step(url: str, folder: Path, rounds: int, in_memory: float) -> dict[str, Any]:
    """Launch, a recorded run and its replay on the system database ``url``."""
    started = time.perf_counter()
    runtime = DurableRuntime(url, polling_interval=0.05)
    runtime.launch()
    launch = time.perf_counter() - started
    try:
        runs = [asyncio.run(_durable(folder, i)) for i in range(rounds)]
    finally:
        started = time.perf_counter()
        runtime.destroy()
        destroy = time.perf_counter() - started
    recorded = statistics.median(r for r, _ in runs)
    replayed = statistics.median(r for _, r in runs)
    return {
        "launch_s": round(launch, 3),
        "destroy_s": round(destroy, 3),
        "durable_run_ms": round(recorded * 1000, 1),
        "overhead_per_step_ms": round((recorded - in_memory) * 1000 / STEPS, 2),
        "replay_run_ms_incl_queue_pickup": round(replayed * 1000, 1),
    }


def _serve(url: str) -> int:
    """A worker process of the throughput figure: serves the queue until SIGTERM."""
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    with TaskWorker(url, concurrency=WORKER_CONCURRENCY, polling_interval=0.1) as worker:
        print(f"ready {worker.executor_id}", flush=True)
        while not stop["now"]:
            time.sleep(0.1)
    return 0


def _throughput(url: str, folder: Path, workers: int) -> float:
    """Seconds from enqueuing the short tasks to the last result, with ``workers`` worker
    processes already serving the queue."""
    env = {**os.environ, "XDG_STATE_HOME": str(folder / f"state-{workers}")}
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--serve", url], env=env, stdout=subprocess.PIPE
        )
        for _ in range(workers)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().startswith(b"ready")
        tasks = {
            f"short-{workers}-{i}": RunSpec(
                prompt="go",
                factory="benchmarks.durable.short",
                session_path=str(folder / f"short-{workers}-{i}.jsonl"),
            )
            for i in range(SHORT_TASKS)
        }
        client = open_client(url)
        try:
            started = time.perf_counter()
            enqueue(tasks, client=client)
            found = asyncio.run(gather_results(list(tasks), client=client, interval=0.05))
            elapsed = time.perf_counter() - started
        finally:
            client.destroy()
        assert all(r.status == "SUCCESS" for r in found)
        return elapsed
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=60)


def _postgres(rounds: int, in_memory: float) -> dict[str, Any] | None:
    if postgres_bin() is None:
        print("PostgreSQL is not installed: its figures are left out", file=sys.stderr)
        return None
    # The cluster's folder must be reachable by the postgres user when run as root.
    cluster = Path(tempfile.mkdtemp(prefix="agentfsm-bench-pg-"))
    server = PostgresServer(cluster).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            figures = _per_step(server.url, folder, rounds, in_memory)
            one = _throughput(server.url, folder, 1)
            two = _throughput(server.url, folder, 2)
    finally:
        server.stop()
        shutil.rmtree(cluster, ignore_errors=True)
    figures["throughput"] = {
        "tasks": SHORT_TASKS,
        "steps_per_task": 3,
        "worker_concurrency": WORKER_CONCURRENCY,
        "one_worker_s": round(one, 2),
        "two_workers_s": round(two, 2),
        "one_worker_tasks_per_s": round(SHORT_TASKS / one, 1),
        "two_workers_tasks_per_s": round(SHORT_TASKS / two, 1),
    }
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results.json"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--serve", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return _serve(args.serve)
    memory = [asyncio.run(_in_memory()) for _ in range(args.rounds)]
    in_memory = statistics.median(memory)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sqlite = _per_step(f"sqlite:///{folder / 'durable.sqlite'}", folder, args.rounds, in_memory)
    postgres = _postgres(args.rounds, in_memory)
    result_ = {
        "benchmark": f"a scripted run of {TURNS} tool turns ({STEPS} steps), in memory vs a "
        "durable run on DBOS + SQLite and + PostgreSQL (loopback, fsync off); medians. "
        f"throughput: {SHORT_TASKS} short tasks on the queue, 1 vs 2 worker processes",
        "python": platform.python_version(),
        "rounds": args.rounds,
        "steps_per_run": STEPS,
        "in_memory_run_ms": round(in_memory * 1000, 1),
        **sqlite,
        "postgres": postgres,
    }
    merge_results(args.out, "durable", result_)
    print(json.dumps(result_, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
