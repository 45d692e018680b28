"""agentfsm against its peers and its limits, in one run (``make bench``).

The same workload for everyone: a zero-latency scripted model that asks for one async
``echo`` tool call per turn N times and then answers "done"; the figure is µs per model call
(N + 1 calls a run) for N = 10 and N = 200. Contenders:

- the peers, each in its own virtualenv ``benchmarks/.peers/<name>`` built here on first use
  from the pinned ``benchmarks/peers/requirements-<name>.txt`` (never in the project's
  environment): pydantic-ai (``Agent`` + ``FunctionModel``), the OpenAI Agents SDK
  (``Runner.run`` + a custom ``Model``), LangGraph (``create_react_agent`` + a scripted
  ``BaseChatModel``);
- agentfsm's variants in the project's environment (``benchmarks/peers/agentfsm_workload.py``):
  the core loop's default driver, its statechart driver, python-statemachine alone (four
  sends a turn), a plain asyncio loop over dicts (the limit) and ``Agent`` with the
  coding-agent preset and a session file.

Every contender runs as a fresh process once a round, the order rotating each round, so the
machine's noise hits them all alike; the figures are medians over the rounds (9 by default).
Results go under the ``peers`` key of ``benchmarks/results.json`` (other keys are kept) and a
Markdown table is printed. Building a peer's environment needs PyPI; nothing else is
contacted.
"""

from __future__ import annotations

import argparse
import json
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
WORKLOADS = HERE / "peers"
ENVS = HERE / ".peers"
TURNS = (10, 200)
RUN_TIMEOUT = 300.0
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
        "agentfsm_workload.py",
        ("statemachine_alone",),
    ),
    Contender(
        "statemachine_alone_5",
        "python-statemachine alone, AsyncEngine, agentfsm's 5 sends/turn",
        "agentfsm_workload.py",
        ("statemachine_alone_5",),
    ),
    Contender(
        "plain_loop",
        "plain asyncio loop over dicts (the limit)",
        "agentfsm_workload.py",
        ("plain_loop",),
    ),
    Contender(
        "core_default",
        "agentfsm run_conversation, default driver",
        "agentfsm_workload.py",
        ("core_default",),
    ),
    Contender(
        "core_statechart",
        "agentfsm run_conversation, statechart driver",
        "agentfsm_workload.py",
        ("core_statechart",),
    ),
    Contender(
        "agent_coding_session",
        "agentfsm Agent + coding_agent preset + session file",
        "agentfsm_workload.py",
        ("agent_coding_session",),
    ),
)
REFERENCE = "core_default"
TARGETS = (
    ("agent_coding_session", "core_default", 2.0),
    ("core_statechart", "statemachine_alone", 1.3),
    ("core_statechart", "statemachine_alone_5", 1.3),
)
"""``(contender, reference, at most)``: the ratios the project holds itself to."""


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
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False, cwd=WORKLOADS
    )
    if done.returncode != 0:
        raise RuntimeError(f"{contender.key} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run_benchmark(contenders: list[Contender], rounds: int) -> dict[str, Any]:
    pythons = {
        c.key: ensure_env(c.peer_env) if c.peer_env else Path(sys.executable) for c in contenders
    }
    samples: dict[str, dict[str, list[float]]] = {
        c.key: {str(n): [] for n in TURNS} for c in contenders
    }
    versions: dict[str, dict[str, str]] = {}
    for round_ in range(rounds):
        shift = round_ % len(contenders)
        order = contenders[shift:] + contenders[:shift]  # round-robin, a new first each round
        for contender in order:
            result = run_contender(contender, pythons[contender.key])
            versions[contender.key] = result["versions"]
            for n in TURNS:
                samples[contender.key][str(n)].extend(result[str(n)])
        print(f"round {round_ + 1}/{rounds} done", file=sys.stderr)
    by_contender: dict[str, Any] = {}
    for c in contenders:
        medians = {n: round(statistics.median(xs), 1) for n, xs in samples[c.key].items()}
        by_contender[c.key] = {
            "label": c.label,
            "median_us_per_model_call": medians,
            "samples_us_per_model_call": samples[c.key],
            "versions": versions[c.key],
        }
    if REFERENCE in by_contender:
        reference = by_contender[REFERENCE]["median_us_per_model_call"]
        for entry in by_contender.values():
            mine = entry["median_us_per_model_call"]
            entry["over_core_default"] = {n: round(mine[n] / reference[n], 2) for n in mine}
    return by_contender


def targets(by_contender: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target's ratios (medians of one run) and whether they hold at every N."""
    found = []
    for contender, reference, at_most in TARGETS:
        if contender not in by_contender or reference not in by_contender:
            continue
        mine = by_contender[contender]["median_us_per_model_call"]
        theirs = by_contender[reference]["median_us_per_model_call"]
        ratio = {n: round(mine[n] / theirs[n], 2) for n in mine}
        found.append(
            {
                "contender": contender,
                "reference": reference,
                "at_most": at_most,
                "ratio": ratio,
                "met": all(r <= at_most for r in ratio.values()),
            }
        )
    return found


def table(by_contender: dict[str, Any]) -> str:
    head = [f"µs/model call, N={n}" for n in TURNS] + [f"x default driver, N={n}" for n in TURNS]
    lines = ["| contender | versions | " + " | ".join(head) + " |", "|---|---|" + "---:|" * 4]
    for entry in by_contender.values():
        versions = ", ".join(f"{k} {v}" for k, v in entry["versions"].items())
        us = [f"{entry['median_us_per_model_call'][str(n)]:,}" for n in TURNS]
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
    if not contenders:
        parser.error(f"no contender among {[c.key for c in CONTENDERS]}")
    started = time.perf_counter()
    by_contender = run_benchmark(contenders, args.rounds)
    result = {
        "benchmark": "same workload for all: zero-latency scripted model, one async echo tool "
        "call per turn, N turns then 'done'; µs per model call; medians over rounds of fresh "
        "processes, contenders interleaved round-robin",
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}",
        "rounds": args.rounds,
        "contenders": by_contender,
        "seconds": round(time.perf_counter() - started, 1),
    }
    result["targets"] = targets(by_contender)
    merge_results(args.out, "peers", result)
    print(table(by_contender))
    for target in result["targets"]:
        print(
            f"{target['contender']} / {target['reference']} (at most {target['at_most']}): "
            + ", ".join(f"N={n}: {r}" for n, r in target["ratio"].items())
            + (" ok" if target["met"] else " MISSED")
        )
    print(f"{result['seconds']} s -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
