"""Start-up: ``import agentfsm``, ``agentfsm --help`` and the peers' imports (``make bench``).

Each contender is a fresh Python process running one statement with ``python -c``; the
figure is the process's wall time from start to exit, in ms, and its CPU time (user +
system, from ``wait4``), which a busy shared machine disturbs less. Contenders:

- ``python -c pass`` in the project's environment: the floor, which the targets are
  relative to;
- ``import agentfsm``, ``from agentfsm import Agent`` (what a program building an agent
  pays), ``agentfsm --help`` and ``agentfsm run --help`` (the command's ``main``, as the
  console script calls it), from this checkout's ``src``;
- the peers, each in its virtualenv ``benchmarks/.peers/<name>`` (built by
  ``benchmarks/peers.py`` from its pinned requirements, here if missing): ``python -c pass``
  there, and the import a program building an agent makes (pydantic-ai ``Agent``, the OpenAI
  Agents SDK ``Agent, Runner``, LangGraph ``create_react_agent``).

Every contender runs once untimed (the files are then in the page cache, and this checkout's
bytecode cache is written, as on a user's machine after the first run), then once per
round for ``--rounds`` rounds (15 by default), in an order that rotates each round so the
machine's noise hits all alike; the figures are medians over the rounds. The targets:
``agentfsm --help`` and ``agentfsm run --help`` at most 3 times ``python -c pass``, and
``import agentfsm`` at most 150 ms. Results go under the ``startup`` key of
``benchmarks/results.json`` (other keys are kept) and a Markdown table is printed.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._results import merge_results

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "src"
ENVS = HERE / ".peers"


def _cli(*argv: str) -> str:
    """``agentfsm ARGV`` as the console script runs it."""
    argv_ = ["agentfsm", *argv]
    return f"import sys; sys.argv = {argv_!r}; from agentfsm.cli import main; sys.exit(main())"


@dataclass(frozen=True)
class Contender:
    key: str
    label: str
    code: str
    peer_env: str | None = None  # a virtualenv under benchmarks/.peers; None: the project's


BASELINE = "python"
CONTENDERS = (
    Contender(BASELINE, "python -c pass", "pass"),
    Contender("import_agentfsm", "import agentfsm", "import agentfsm"),
    Contender("agentfsm_agent", "from agentfsm import Agent", "from agentfsm import Agent"),
    Contender("agentfsm_help", "agentfsm --help", _cli("--help")),
    Contender("agentfsm_run_help", "agentfsm run --help", _cli("run", "--help")),
    Contender("pydantic_ai_python", "python -c pass (pydantic-ai's env)", "pass", "pydantic_ai"),
    Contender(
        "pydantic_ai",
        "from pydantic_ai import Agent",
        "from pydantic_ai import Agent",
        "pydantic_ai",
    ),
    Contender(
        "openai_agents_python", "python -c pass (OpenAI Agents' env)", "pass", "openai_agents"
    ),
    Contender(
        "openai_agents",
        "from agents import Agent, Runner",
        "from agents import Agent, Runner",
        "openai_agents",
    ),
    Contender("langgraph_python", "python -c pass (LangGraph's env)", "pass", "langgraph"),
    Contender(
        "langgraph",
        "from langgraph.prebuilt import create_react_agent",
        "from langgraph.prebuilt import create_react_agent",
        "langgraph",
    ),
)
TARGETS = (
    ("agentfsm_help", "ratio", 3.0),
    ("agentfsm_run_help", "ratio", 3.0),
    ("import_agentfsm", "ms", 150.0),
)
"""``(contender, what, at most)``: wall-time ratio to ``python -c pass``, or wall ms."""


def python_for(contender: Contender) -> Path:
    """The interpreter of the contender's environment (a peer's is built when missing)."""
    if contender.peer_env is None:
        return Path(sys.executable)
    from benchmarks.peers import ensure_env

    return ensure_env(contender.peer_env)


def child_env(contender: Contender) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    # An installed package runs from its bytecode cache (pip writes it for the peers); the
    # warm-up run writes this checkout's, as a user's first run does.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if contender.peer_env is None:
        env["PYTHONPATH"] = str(SOURCE)  # this checkout, whatever the venv has installed
    return env


def time_once(python: Path, contender: Contender) -> tuple[float, float]:
    """One fresh process: (wall ms, CPU ms of the process, user + system)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [str(python), "-c", contender.code],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=child_env(contender),
        cwd=HERE,  # no ./agentfsm package in the way
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = (time.perf_counter() - started) * 1000
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    if process.returncode != 0:
        raise RuntimeError(f"{contender.key} failed ({process.returncode}): {contender.code}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


def run_benchmark(contenders: list[Contender], rounds: int) -> dict[str, Any]:
    pythons = {c.key: python_for(c) for c in contenders}
    for c in contenders:  # warm-up: the files into the page cache, and a failure shown
        done = subprocess.run(
            [str(pythons[c.key]), "-c", c.code],
            capture_output=True,
            text=True,
            env=child_env(c),
            cwd=HERE,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{c.key} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    walls: dict[str, list[float]] = {c.key: [] for c in contenders}
    cpus: dict[str, list[float]] = {c.key: [] for c in contenders}
    for round_ in range(rounds):
        shift = round_ % len(contenders)
        for c in contenders[shift:] + contenders[:shift]:
            wall, cpu = time_once(pythons[c.key], c)
            walls[c.key].append(wall)
            cpus[c.key].append(cpu)
        print(f"round {round_ + 1}/{rounds} done", file=sys.stderr)
    base = statistics.median(walls[BASELINE]) if BASELINE in walls else None
    base_cpu = statistics.median(cpus[BASELINE]) if BASELINE in cpus else None
    found: dict[str, Any] = {}
    for c in contenders:
        wall, cpu = statistics.median(walls[c.key]), statistics.median(cpus[c.key])
        found[c.key] = {
            "label": c.label,
            "code": c.code,
            "environment": f"benchmarks/.peers/{c.peer_env}" if c.peer_env else "project",
            "median_wall_ms": round(wall, 1),
            "median_cpu_ms": round(cpu, 1),
            "over_python_wall": round(wall / base, 2) if base else None,
            "over_python_cpu": round(cpu / base_cpu, 2) if base_cpu else None,
            "samples_wall_ms": [round(x, 1) for x in walls[c.key]],
            "samples_cpu_ms": [round(x, 1) for x in cpus[c.key]],
        }
    return found


def targets(found: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target's figure and whether it holds."""
    checked = []
    for key, what, at_most in TARGETS:
        if key not in found or (what == "ratio" and BASELINE not in found):
            continue
        value = found[key]["over_python_wall" if what == "ratio" else "median_wall_ms"]
        checked.append(
            {
                "contender": key,
                "what": what,
                "at_most": at_most,
                "value": value,
                "met": value <= at_most,
            }
        )
    return checked


def table(found: dict[str, Any]) -> str:
    lines = [
        "| contender | environment | wall ms | CPU ms | wall / python -c pass |",
        "|---|---|---:|---:|---:|",
    ]
    for entry in found.values():
        lines.append(
            f"| {entry['label']} | {entry['environment']} | {entry['median_wall_ms']} | "
            f"{entry['median_cpu_ms']} | {entry['over_python_wall'] or ''} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results.json"))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--no-peers", action="store_true", help="agentfsm's contenders only")
    args = parser.parse_args(argv)
    if not 0 < args.rounds <= 200:
        parser.error("rounds must be 1-200")
    contenders = [c for c in CONTENDERS if not (args.no_peers and c.peer_env)]
    started = time.perf_counter()
    found = run_benchmark(contenders, args.rounds)
    result = {
        "benchmark": "fresh processes running one statement with python -c; wall and CPU "
        "(user + system) ms from start to exit; medians over rounds, contenders interleaved "
        "in a rotating order; ratios are to python -c pass in the project's environment",
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}",
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "rounds": args.rounds,
        "contenders": found,
        "targets": targets(found),
        "seconds": round(time.perf_counter() - started, 1),
    }
    merge_results(args.out, "startup", result)
    print(table(found))
    for target in result["targets"]:
        unit = "x python -c pass" if target["what"] == "ratio" else "ms"
        print(
            f"{target['contender']}: {target['value']} {unit} (at most {target['at_most']})"
            + (" ok" if target["met"] else " MISSED")
        )
    print(f"{result['seconds']} s -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
