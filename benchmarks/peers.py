"""agentfsm against its peers and its limits, in one run (``make bench``).

The same workload for everyone: a zero-latency scripted model that asks for one async
``echo`` tool call per turn N times and then answers "done"; the figure is µs per turn (one
model call and its tool call; N + 1 turns a run) for N = 10 and N = 200. Contenders:

- the peers, each in its own virtualenv ``benchmarks/.peers/<name>`` built here on first use
  from the pinned ``benchmarks/peers/requirements-<name>.txt`` (never in the project's
  environment): pydantic-ai (``Agent`` + ``FunctionModel``), the OpenAI Agents SDK
  (``Runner.run`` + a custom ``Model``), LangGraph (``create_react_agent`` + a scripted
  ``BaseChatModel``);
- agentfsm's variants in the project's environment (``benchmarks/peers/agentfsm_workload.py``):
  the core loop, python-statemachine alone (four sends a turn, and the five of agentfsm's
  machine), a plain asyncio loop over dicts (the limit) and ``Agent`` with the
  coding-agent preset and a session file (and the same with its session files in memory,
  ``/dev/shm``, to show the file system's share).

Each peer runs as a fresh process once a round, and agentfsm's contenders together in one
fresh process a round, each timed three times there, sample by sample in turn; the order
rotates each round, so the machine's noise hits them all alike. The figures are medians over
the rounds (9 by default). A ratio between two of agentfsm's contenders is the
median of the ratios of their samples taken side by side in the same process: this shared
machine runs a whole process about 1.5 times slower at some moments than at others, which ratios
of separate processes' medians pick up and paired samples do not. A ratio to a peer is the
ratio of the medians. Every workload process keeps its workspaces and session files in one
folder that is removed only after the last round (see :func:`work_area`), and the cost of
creating a file there is measured before the first round and after the last.
Results go under the ``peers`` key of ``benchmarks/results.json`` (other keys are kept) and a
Markdown table is printed. Building a peer's environment needs PyPI; nothing else is
contacted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import merge_results

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE / "peers"
if TYPE_CHECKING:  # the type checker sees the folder as a package; this script is beside it
    from benchmarks.peers._harness import BENCH_DIR
else:
    sys.path.insert(0, str(WORKLOADS))
    from _harness import BENCH_DIR
ENVS = HERE / ".peers"
TURNS = (10, 200)
RUN_TIMEOUT = 300.0
GROUP_SCRIPT = "agentfsm_workload.py"
GROUP_SAMPLES = 3
"""Samples of each agentfsm contender per round, interleaved in one process."""
INSTALL_TIMEOUT = 900.0


@dataclass(frozen=True)
class Contender:
    key: str
    label: str
    script: str
    args: tuple[str, ...] = ()
    peer_env: str | None = None  # a virtualenv under benchmarks/.peers, None: the project's


CONTENDERS = (
    Contender(
        "pydantic_ai",
        "pydantic-ai: Agent + FunctionModel",
        "pydantic_ai_workload.py",
        peer_env="pydantic_ai",
    ),
    Contender(
        "openai_agents",
        "OpenAI Agents SDK: Runner + custom Model",
        "openai_agents_workload.py",
        peer_env="openai_agents",
    ),
    Contender(
        "langgraph", "LangGraph: create_react_agent", "langgraph_workload.py", peer_env="langgraph"
    ),
    Contender(
        "statemachine_alone",
        "python-statemachine alone, AsyncEngine, 4 sends/turn",
        GROUP_SCRIPT,
        ("statemachine_alone",),
    ),
    Contender(
        "statemachine_alone_5",
        "python-statemachine alone, AsyncEngine, agentfsm's 5 sends/turn",
        GROUP_SCRIPT,
        ("statemachine_alone_5",),
    ),
    Contender(
        "plain_loop",
        "plain asyncio loop over dicts (the limit)",
        GROUP_SCRIPT,
        ("plain_loop",),
    ),
    Contender(
        "core_default",
        "agentfsm run_conversation",
        GROUP_SCRIPT,
        ("core_default",),
    ),
    Contender(
        "agent_coding_session",
        "agentfsm Agent + coding_agent preset + session file",
        GROUP_SCRIPT,
        ("agent_coding_session",),
    ),
    Contender(
        "agent_coding_session_memory",
        "the same, its session files in memory (/dev/shm)",
        GROUP_SCRIPT,
        ("agent_coding_session_memory",),
    ),
)
IN_MEMORY = "agent_coding_session_memory"
"""Runs only where ``/dev/shm`` is a folder: it shows, by difference with
``agent_coding_session`` in the same run, the share of the file system (creating each run's
session file costs from about 10 µs to several hundred on a loaded virtual disk)."""
REFERENCE = "core_default"
"""Every contender's figure is also given as a ratio to the core loop's. The full product's
goal is in µs, not a ratio: see :data:`GOAL_US_PER_TURN`."""


def ensure_env(name: str) -> Path:
    """The peer's interpreter; its virtualenv is built (once) from the pinned requirements."""
    env = ENVS / name
    python = env / "bin" / "python"
    requirements = WORKLOADS / f"requirements-{name}.txt"
    stamp = env / ".installed"
    if stamp.exists() and stamp.read_text("utf-8") == requirements.read_text("utf-8"):
        return python
    print(f"building {env} from {requirements.name} (once)", file=sys.stderr)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(env)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "-r", str(requirements)],
        check=True,
        timeout=INSTALL_TIMEOUT,
    )
    stamp.write_text(requirements.read_text("utf-8"), "utf-8")
    return python


def run_contender(contender: Contender, python: Path) -> dict[str, Any]:
    command = [str(python), str(WORKLOADS / contender.script), *contender.args, "--samples", "1"]
    return _run(contender.key, command)


def run_group(group: list[Contender], shift: int) -> dict[str, Any]:
    """agentfsm's contenders in one process, interleaved sample by sample (``GROUP_SAMPLES``
    of each), a new one first each round: ``{key: {"10": [...], "200": [...]}}`` and the
    versions."""
    order = group[shift:] + group[:shift]
    variants = [name for c in order for name in c.args]
    command = [sys.executable, str(WORKLOADS / GROUP_SCRIPT), *variants]
    result = _run(GROUP_SCRIPT, [*command, "--samples", str(GROUP_SAMPLES)])
    by_name = result["variants"]
    return {
        "samples": {c.key: by_name[c.args[0]] for c in group},
        "versions": result["versions"],
    }


def _run(name: str, command: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
        cwd=WORKLOADS,
        env=CHILD_ENV,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


CHILD_ENV = dict(os.environ)
"""The workload processes' environment (:func:`work_area` points them at its folder)."""
PROBE_FILES = 200
SETTLED_US = 40.0
"""A file creation that takes at most this long (median) is not paying for recent deletions:
on the ext4 disk of docs/performance.md, 13-28 µs when nothing was deleted in the minutes
before, 50-500 µs after a test run or a benchmark removed thousands of files."""
SETTLE_LIMIT_S = 300
"""How long ``peers.py`` waits at most for file creation to settle before its first round
(the slowest recovery seen: ext4 without a journal keeps skipping an inode for 300 s)."""
SETTLE_STEP_S = 15


def creation_us(folder: Path) -> float:
    """The median µs to create (and write a line to) a new file in ``folder``: the system call
    each run of the full product makes for its session file; the files are left there."""
    probe = Path(tempfile.mkdtemp(prefix="probe-", dir=folder))
    times = []
    for index in range(PROBE_FILES):
        started = time.perf_counter_ns()
        fd = os.open(probe / f"{index:04d}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        times.append(time.perf_counter_ns() - started)
        os.write(fd, b"{}\n")
        os.close(fd)
    return round(statistics.median(times) / 1000, 1)


@contextlib.contextmanager
def work_area() -> Iterator[dict[str, float]]:
    """One folder for every workload process of the run (their workspaces and session files),
    removed only after the last round: deleting many files makes creating files in the same
    folder tree slower for minutes on some file systems (ext4 without a journal skips the
    inodes freed in the last 60 to 300 s), so a round's clean-up would tax the next rounds'
    session files. For the same reason, when creating a file there costs more than
    :data:`SETTLED_US` (files deleted on the same disk in the minutes before: a test run, an
    earlier benchmark), it waits for that to pass first, at most :data:`SETTLE_LIMIT_S`.
    Yields the file creation cost measured there before the first round and after the last,
    and the seconds waited (``{"first": µs, "before": µs, "waited_s": s, "after": µs}``, filled
    in as they are taken)."""
    os.makedirs(BENCH_DIR, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="peers-", dir=BENCH_DIR))
    CHILD_ENV.update(AGENTFSM_BENCH_DIR=str(folder), AGENTFSM_BENCH_KEEP="1")
    probe = {"first": creation_us(folder)}
    probe["before"], waited = probe["first"], 0
    while probe["before"] > SETTLED_US and waited < SETTLE_LIMIT_S:
        if not waited:
            print(
                f"creating a file in the session folder takes {probe['before']} µs (files "
                f"deleted on this disk recently); waiting up to {SETTLE_LIMIT_S} s for it to "
                "settle",
                flush=True,
            )
        time.sleep(SETTLE_STEP_S)
        waited += SETTLE_STEP_S
        probe["before"] = creation_us(folder)
    probe["waited_s"] = waited
    try:
        yield probe
        probe["after"] = creation_us(folder)
    finally:
        CHILD_ENV.pop("AGENTFSM_BENCH_DIR")
        CHILD_ENV.pop("AGENTFSM_BENCH_KEEP")
        shutil.rmtree(folder, ignore_errors=True)


def in_group(contender: Contender) -> bool:
    """Whether the contender runs in the project's environment from the agentfsm workload
    (then it is timed in the agentfsm process of each round, paired with the others)."""
    return contender.peer_env is None and contender.script == GROUP_SCRIPT


def run_benchmark(contenders: list[Contender], rounds: int) -> dict[str, Any]:
    pythons = {c.key: ensure_env(c.peer_env) for c in contenders if c.peer_env}
    group = [c for c in contenders if in_group(c)]
    units: list[Contender | None] = [c for c in contenders if not in_group(c)]
    if group:
        units.append(None)  # the agentfsm process
    samples: dict[str, dict[str, list[float]]] = {
        c.key: {str(n): [] for n in TURNS} for c in contenders
    }
    versions: dict[str, dict[str, str]] = {}
    for round_ in range(rounds):
        shift = round_ % len(units)
        for unit in units[shift:] + units[:shift]:  # round-robin, a new first each round
            if unit is None:
                found = run_group(group, round_ % len(group))
                for c in group:
                    versions[c.key] = found["versions"]
                    for n in TURNS:
                        samples[c.key][str(n)].extend(found["samples"][c.key][str(n)])
                continue
            python = pythons.get(unit.key, Path(sys.executable))
            result = run_contender(unit, python)
            versions[unit.key] = result["versions"]
            for n in TURNS:
                samples[unit.key][str(n)].extend(result[str(n)])
        print(f"round {round_ + 1}/{rounds} done", file=sys.stderr)
    by_contender: dict[str, Any] = {}
    for c in contenders:
        medians = {n: round(statistics.median(xs), 1) for n, xs in samples[c.key].items()}
        by_contender[c.key] = {
            "label": c.label,
            "median_us_per_turn": medians,
            "samples_us_per_turn": samples[c.key],
            "paired": in_group(c),
            "versions": versions[c.key],
        }
    if REFERENCE in by_contender:
        for entry in by_contender.values():
            entry["over_core_default"] = ratio(entry, by_contender[REFERENCE])[0]
    return by_contender


def ratio(mine: dict[str, Any], theirs: dict[str, Any]) -> tuple[dict[str, float], str]:
    """``mine`` over ``theirs`` at each N, and how: the median of the ratios of samples taken
    side by side in one process (``paired``) when both were, else the ratio of the medians
    of separate processes (``medians``)."""
    if mine["paired"] and theirs["paired"]:
        a, b = mine["samples_us_per_turn"], theirs["samples_us_per_turn"]
        return {
            n: round(statistics.median([x / y for x, y in zip(a[n], b[n], strict=True)]), 2)
            for n in a
        }, "paired"
    m, t = mine["median_us_per_turn"], theirs["median_us_per_turn"]
    return {n: round(m[n] / t[n], 2) for n in m}, "medians"


GOAL_US_PER_TURN = 500.0
"""The full product's goal: under 0.5 ms a turn (its own time; the model's is apart)."""
FULL_PRODUCT = "agent_coding_session"


def per_turn(by_contender: dict[str, Any]) -> dict[str, Any]:
    """The full product's µs per turn next to the core loop's, and whether the goal holds."""
    if FULL_PRODUCT not in by_contender or REFERENCE not in by_contender:
        return {}
    full = by_contender[FULL_PRODUCT]["median_us_per_turn"]
    return {
        "core_loop_us": by_contender[REFERENCE]["median_us_per_turn"],
        "full_product_us": full,
        "goal_us": GOAL_US_PER_TURN,
        "met": all(us < GOAL_US_PER_TURN for us in full.values()),
    }


def table(by_contender: dict[str, Any]) -> str:
    head = [f"µs/turn, N={n}" for n in TURNS] + [f"x core loop, N={n}" for n in TURNS]
    lines = ["| contender | versions | " + " | ".join(head) + " |", "|---|---|" + "---:|" * 4]
    for entry in by_contender.values():
        versions = ", ".join(f"{k} {v}" for k, v in entry["versions"].items())
        us = [f"{entry['median_us_per_turn'][str(n)]:,}" for n in TURNS]
        ratio = [f"{entry.get('over_core_default', {}).get(str(n), '')}" for n in TURNS]
        lines.append(f"| {entry['label']} | {versions} | " + " | ".join(us + ratio) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results.json"))
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--only", default="", help="comma-separated contender keys (default: all)")
    args = parser.parse_args(argv)
    if not 0 < args.rounds <= 50:
        parser.error("rounds must be 1-50")
    wanted = {key for key in args.only.split(",") if key}
    contenders = [c for c in CONTENDERS if not wanted or c.key in wanted]
    if not os.path.isdir("/dev/shm"):
        contenders = [c for c in contenders if c.key != IN_MEMORY]
        print(f"{IN_MEMORY} left out: no /dev/shm here", file=sys.stderr)
    if not contenders:
        parser.error(f"no contender among {[c.key for c in CONTENDERS]}")
    started = time.perf_counter()
    with work_area() as creation:
        by_contender = run_benchmark(contenders, args.rounds)
    result = {
        "benchmark": "same workload for all: zero-latency scripted model, one async echo tool "
        "call per turn, N turns then 'done'; µs per turn (one model call each); medians over "
        "rounds of fresh processes, contenders interleaved round-robin (agentfsm's together in "
        "one process a round, sample by sample; ratios between them are medians of paired "
        "samples)",
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}",
        "rounds": args.rounds,
        "file_creation_us": creation,
        "contenders": by_contender,
        "seconds": round(time.perf_counter() - started, 1),
    }
    result["per_turn"] = per_turn(by_contender)
    merge_results(args.out, "peers", result)
    print(table(by_contender))
    if result["per_turn"]:
        turn = result["per_turn"]
        print(
            "µs per turn: core loop "
            + ", ".join(f"N={n}: {us}" for n, us in turn["core_loop_us"].items())
            + "; full product "
            + ", ".join(f"N={n}: {us}" for n, us in turn["full_product_us"].items())
            + f" (goal: under {GOAL_US_PER_TURN:g} µs"
            + (", met)" if turn["met"] else ", MISSED)")
        )
    waited = f" (after waiting {creation['waited_s']:g} s)" if creation["waited_s"] else ""
    print(
        f"creating a file in the session folder: {creation['before']} µs before the first "
        f"round{waited}, {creation['after']} µs after the last (median of {PROBE_FILES})"
    )
    print(f"{result['seconds']} s -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
