"""Resource limits, attacked in a real agent run: a fork bomb, a 2 GiB allocation, a 1 GiB
file in the workspace and in ``/tmp``, a CPU spin. Each ends as a failed ``shell`` result
that names the limit and its settings key, the run goes on to its next scripted turn, and
nothing of the call is left running."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from agentfsm import Agent, ToolCall, ToolMessage
from agentfsm.adapters.tools import (
    BubblewrapSandbox,
    ResourceLimits,
    ToolBox,
    workspace_tools,
)
from agentfsm.sandbox._limits import explain_limit
from agentfsm.testing import ScriptedChat, tool_reply

from .sandboxing import alive, kill_all
from .tally import AttackTally

pytestmark = pytest.mark.usefixtures("bubblewrap")

MARK = f"agentfsm-limits-{time.monotonic_ns()}"

# A smaller process limit than the default keeps the fork bomb light on a shared machine;
# the other limits are the defaults (the allocation and the writes exceed them).
LIMITS = ResourceLimits(processes=128)

ATTACKS = [
    # (command, timeout, the settings key the failure must name)
    (f"bash -c ':(){{ :|:& }};:' {MARK}; sleep 30", 4, "processes"),
    ('python3 -c "bytearray(2<<30)"', 30, "memory_mb"),
    ('python3 -c "b = [bytearray(1<<20) for _ in range(4096)]"', 30, "memory_mb"),
    ("head -c 1G /dev/zero > big", 60, "file_size_mb"),
    ("head -c 1G /dev/zero > /tmp/big", 60, "tmp_mb|file_size_mb"),
]


def machine_is_fine() -> None:
    """Nothing of the calls is left running and this process can still fork."""
    left = alive(MARK)
    kill_all(MARK)
    assert left == []
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0


async def test_limits_end_as_failed_results_and_the_run_goes_on(
    tmp_path: Path, attacks: AttackTally
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    tools: ToolBox = workspace_tools(root, sandbox=BubblewrapSandbox(root, limits=LIMITS))
    turns = [
        tool_reply(ToolCall(f"a{i}", "shell", {"command": command, "timeout": timeout}))
        for i, (command, timeout, _) in enumerate(ATTACKS)
    ]
    after = tool_reply(ToolCall("after", "shell", {"command": "echo still here"}))
    chat = ScriptedChat([*turns, after, "done"])
    started = time.monotonic()
    outcome = await Agent(chat, tools).run("misbehave")
    assert outcome.stopped_reason == "final"
    assert outcome.final is not None
    assert outcome.final.content == "done"
    assert time.monotonic() - started < 150
    results = {m.tool_call_id: m.content for m in outcome.messages if isinstance(m, ToolMessage)}
    for i, (command, _, keys) in enumerate(ATTACKS):
        result = json.loads(results[f"a{i}"])  # a failed result is sent as JSON
        error = result["error"] or ""
        named = any(f'"{key}"' in error for key in keys.split("|"))
        attacks.record("sandbox limits", result["ok"] or not named, f"{command!r}: {error}")
        assert "hit the sandbox's" in error
    assert results["after"].strip() == "still here"
    big = root / "big"
    assert big.stat().st_size <= LIMITS.file_size_mb << 20
    big.unlink()
    machine_is_fine()


async def test_a_cpu_spin_ends_at_the_cpu_limit(tmp_path: Path, attacks: AttackTally) -> None:
    limits = ResourceLimits(cpu_seconds=1)
    box = workspace_tools(tmp_path, sandbox=BubblewrapSandbox(tmp_path, limits=limits))
    spins = [
        "python3 -c 'while True: pass'",
        # SIGXCPU ignored: killed a few CPU seconds later (CPU_GRACE_SECONDS)
        "python3 -c 'import signal; signal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile 1: pass'",
    ]
    for command in spins:
        result = await box.run(ToolCall("c", "shell", {"command": command, "timeout": 30}))
        error = result.error or ""
        # Got through: the spin ran until the call's own timeout (or succeeded).
        attacks.record("sandbox limits", result.ok or "timed out" in error, f"{command!r}: {error}")
    first = await box.run(ToolCall("c", "shell", {"command": spins[0], "timeout": 30}))
    assert '"cpu_seconds"' in (first.error or "")
    assert "1 s per process" in (first.error or "")
    machine_is_fine()


def test_the_limit_is_read_from_the_failure() -> None:
    limits = ResourceLimits()
    cases = {
        (153, ""): "file_size_mb",
        (152, ""): "cpu_seconds",
        (1, "Traceback…\nMemoryError\n"): "memory_mb",
        (134, "terminate called after throwing an instance of 'std::bad_alloc'"): "memory_mb",
        (None, "bash: fork: retry: Resource temporarily unavailable"): "processes",
        (1, "head: error writing 'standard output': No space left on device"): "tmp_mb",
    }
    for (code, output), key in cases.items():
        text = explain_limit(code, output, limits)
        assert text is not None, (code, output)
        assert f'"{key}"' in text, (code, output)
    assert explain_limit(1, "make: *** [all] Error 1", limits) is None
    assert explain_limit(None, "", limits) is None
    assert "512 MiB per file" in (explain_limit(153, "", limits) or "")
    with pytest.raises(ValueError, match="processes must be a whole number"):
        ResourceLimits(processes=0)
