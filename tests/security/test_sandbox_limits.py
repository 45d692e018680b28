"""Resource limits, attacked in a real agent run: a fork bomb, a 2 GiB allocation, a 1 GiB
file in the workspace and in ``/tmp``, a CPU spin. Each ends as a failed ``shell`` result
that names the limit and its settings key, the run goes on to its next scripted turn, and
nothing of the call is left running."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agentfsm import Agent, ToolCall, ToolMessage
from agentfsm.adapters.tools import ToolBox, workspace_tools
from agentfsm.sandbox import BubblewrapSandbox, ResourceLimits, run_command
from agentfsm.sandbox import _bubblewrap as bubblewrap_module
from agentfsm.sandbox import _limits as limits_module
from agentfsm.sandbox._limits import command_cgroups, explain_limit
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
        (137, "Killed\n"): "memory_mb",
        (-9, ""): "memory_mb",  # bwrap itself killed: the signal, not an exit code
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


SMALL = ResourceLimits(memory_mb=128, tmp_mb=32)
FILL = [
    # Each writes 80 MiB into a writable tmpfs of the sandbox and prints what it holds.
    "head -c 80M /dev/zero > /dev/shm/f; stat -c %s /dev/shm/f",
    "head -c 80M /dev/zero > /tmp/f; stat -c %s /tmp/f",
    "head -c 80M /dev/zero > /tmp/home/f; stat -c %s /tmp/home/f",
    "head -c 80M /dev/zero > /dev/f; stat -c %s /dev/f",
    "head -c 80M /dev/zero > /dev/mqueue/f; stat -c %s /dev/mqueue/f",
    "mkdir -p /dev/pts/x && head -c 80M /dev/zero > /dev/pts/x/f; stat -c %s /dev/pts/x/f",
]
SHARED = [
    # Each touches 300 MiB of memory that RLIMIT_DATA does not count, then prints "held".
    "import mmap\nm = mmap.mmap(-1, 300 << 20, flags=mmap.MAP_SHARED)\n"
    "for i in range(0, 300 << 20, 4096): m[i] = 1",
    "import os, mmap\nfd = os.memfd_create('x')\nos.ftruncate(fd, 300 << 20)\n"
    "m = mmap.mmap(fd, 300 << 20)\nfor i in range(0, 300 << 20, 4096): m[i] = 1",
    "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmat.restype = ctypes.c_void_p\n"
    "i = libc.shmget(0, 300 << 20, 0o1600)\np = libc.shmat(i, None, 0)\n"
    "assert p not in (None, 2**64 - 1)\nctypes.memset(p, 1, 300 << 20)",
    "from multiprocessing import shared_memory\n"
    "s = shared_memory.SharedMemory(create=True, size=300 << 20)\ns.buf[:] = bytes(300 << 20)",
    # A stack: private, but not data to the kernel (MAP_GROWSDOWN), whatever RLIMIT_STACK says.
    "import mmap\ngrowsdown = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x100\n"
    "m = mmap.mmap(-1, 300 << 20, flags=growsdown)\nfor i in range(0, 300 << 20, 4096): m[i] = 1",
]


async def test_every_writable_tmpfs_is_sized(tmp_path: Path, attacks: AttackTally) -> None:
    """``/dev/shm``, ``/tmp`` (and ``HOME`` in it) hold at most ``tmp_mb``; ``/dev`` and the
    other file systems of ``/dev`` take no file."""
    box = workspace_tools(tmp_path, sandbox=BubblewrapSandbox(tmp_path, limits=SMALL))
    for command in FILL:
        result = await box.run(ToolCall("c", "shell", {"command": command, "timeout": 60}))
        sizes = [int(w) for w in result.output.split() if w.isdigit()]
        held = max(sizes, default=0)
        attacks.record("sandbox limits: tmpfs", held > SMALL.tmp_mb << 20, f"{command}: {held}")
    machine_is_fine()


async def test_shared_memory_is_bounded_where_a_memory_cgroup_is(
    tmp_path: Path, attacks: AttackTally
) -> None:
    """300 MiB of ``MAP_SHARED``, ``memfd``, System V and POSIX shared memory and of stack under
    ``memory_mb=128``: killed where the sandbox has a memory cgroup; where it has none, its
    description says that this is not bounded (and makes no claim)."""
    sandbox = BubblewrapSandbox(tmp_path, limits=ResourceLimits(memory_mb=128))
    bound = sandbox.describe()["limits"]["memory_bound"]
    cgroups = sandbox.cgroups
    if cgroups is None or "memory" not in cgroups.controllers:
        assert "NOT BOUNDED" in bound
        assert "MAP_SHARED" in bound
        assert "stacks (MAP_GROWSDOWN" in bound
        return
    assert "memory cgroup" in bound
    box = workspace_tools(tmp_path, sandbox=sandbox)
    for code in SHARED:
        command = f"python3 -c {shlex.quote(code)} && echo held"
        result = await box.run(ToolCall("c", "shell", {"command": command, "timeout": 60}))
        held = result.ok or "held" in result.output
        attacks.record("sandbox limits: shared memory", held, f"{code!r}: {result.error}")
        assert '"memory_mb"' in (result.error or ""), result.error
    small = await box.run(ToolCall("c", "shell", {"command": "python3 -c 'bytearray(50 << 20)'"}))
    assert small.ok, small.error  # what fits still runs
    machine_is_fine()


@pytest.mark.parametrize("cgroups", ["as found", "none"])
async def test_the_limits_are_set_however_the_command_starts(
    tmp_path: Path, cgroups: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the launcher that joins the cgroups (where there are some) and through bwrap
    alone with ``prlimit`` (where there are none), by ``run_command`` and by ``command()``:
    the limits inside are those asked for."""
    if cgroups == "none":
        monkeypatch.setattr(bubblewrap_module, "command_cgroups", lambda limits: None)
    limits = ResourceLimits(processes=77, memory_mb=300, file_size_mb=20, cpu_seconds=30)
    sandbox = BubblewrapSandbox(tmp_path, limits=limits)
    expected = {
        "Max cpu time": ("30", "35"),
        "Max file size": (str(20 << 20),) * 2,
        "Max data size": (str(300 << 20),) * 2,
    }
    if sandbox.cgroups is None or "pids" not in sandbox.cgroups.controllers:
        expected["Max processes"] = ("77", "77")
    code, output = await run_command(
        "cat /proc/self/limits", tmp_path, timeout=30, max_output=10_000, sandbox=sandbox
    )
    assert code == 0, output
    argv, env = sandbox.command("cat /proc/self/limits", tmp_path)
    direct = await asyncio.to_thread(
        subprocess.run, argv, env=env, capture_output=True, text=True, timeout=30, check=False
    )
    for text in (output, direct.stdout):
        rows = {line[:26].strip(): line[26:].split()[:2] for line in text.splitlines()}
        for name, values in expected.items():
            assert tuple(rows[name]) == values, (name, text)


_UNDER_A_HARD_LIMIT = """
import asyncio, resource, sys
from pathlib import Path
from agentfsm.sandbox import BubblewrapSandbox, run_command
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))  # the user's own ulimit -H -f
root = Path(sys.argv[1])
code, output = asyncio.run(run_command(
    "head -c 3M /dev/zero > big", cwd=root, timeout=60, max_output=10_000,
    sandbox=BubblewrapSandbox(root),
))
print(code, (root / "big").stat().st_size)
"""


def test_a_users_lower_hard_limit_narrows_the_sandbox_instead_of_refusing_it(
    tmp_path: Path,
) -> None:
    # Before: prlimit could not raise the file size limit to 512 MiB above the user's hard
    # limit, and every command failed as if the sandbox could not start.
    done = subprocess.run(
        [sys.executable, "-c", _UNDER_A_HARD_LIMIT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    code, size = done.stdout.split()
    assert code != "0"  # the write past the user's 1 MiB stopped there
    assert int(size) <= 1 << 20


_FORKS_THEN_RUNS = """
import asyncio, os, sys
from pathlib import Path
from agentfsm.sandbox import BubblewrapSandbox, ResourceLimits, run_command
root = Path(sys.argv[1])
sandbox = BubblewrapSandbox(root, limits=ResourceLimits(processes=91, memory_mb=333))
print(bool(sandbox.cgroups))
child = os.fork()
if child == 0:
    sys.exit(0)  # a forked child that ends as a program does: its atexit handlers run
os.waitpid(child, 0)
print(asyncio.run(run_command("echo ran", root, timeout=60, max_output=1000, sandbox=sandbox)))
"""


def test_a_forked_child_that_ends_leaves_the_cgroups_of_its_parent(tmp_path: Path) -> None:
    # Before: the child's exit removed the parent's cgroups (empty until its first command),
    # and every command of the parent failed with "cannot join the cgroup".
    done = subprocess.run(
        [sys.executable, "-c", _FORKS_THEN_RUNS, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr
    made, result = done.stdout.splitlines()
    if made != "True":
        pytest.skip("no cgroup can be made here (not root, or no pids/memory hierarchy)")
    assert result == "(0, 'ran\\n')", done.stdout + done.stderr


_RUNS_FROM_THREADS = """
import asyncio, sys, threading
from agentfsm.sandbox import BubblewrapSandbox, ResourceLimits, run_command
cgroups = set()

def commands(processes):
    sandbox = BubblewrapSandbox(sys.argv[1], limits=ResourceLimits(processes=processes))
    asyncio.run(run_command("true", sys.argv[1], timeout=60, max_output=100, sandbox=sandbox))
    cgroups.update(str(f.parent) for f in (sandbox.cgroups.files if sandbox.cgroups else ()))

threads = [threading.Thread(target=commands, args=(94 + i % 2,)) for i in range(4)]
for thread in threads: thread.start()
for thread in threads: thread.join()
print(*sorted(cgroups))
"""


def test_the_cgroups_are_gone_once_the_agent_has_exited(tmp_path: Path) -> None:
    """The thread that started the commands in the cgroups ends at exit before they are
    removed: none is left under ``/sys/fs/cgroup`` (one agent in five left some)."""
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", _RUNS_FROM_THREADS, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert done.returncode == 0, done.stderr
        folders = [Path(f) for f in done.stdout.split()]
        if not folders:
            pytest.skip("no cgroup can be made here (not root, or no pids/memory hierarchy)")
        assert [f for f in folders if f.exists()] == []


def test_the_cgroups_are_removed_once_the_thread_that_started_commands_has_left() -> None:
    """At exit the thread that started the commands in the cgroups is still ending when
    Python has joined it: the removal waits for it instead of leaving the cgroup behind."""
    cgroups = command_cgroups(ResourceLimits(processes=92, memory_mb=334))  # this test's own
    if cgroups is None:
        pytest.skip("no cgroup can be made here (not root, or no pids/memory hierarchy)")
    joined, leave = threading.Event(), threading.Event()

    def member() -> None:
        for file in cgroups.files:
            file.write_text("0")
        joined.set()
        leave.wait(10)
        time.sleep(0.2)  # still in the cgroups for a while after it was told to go

    thread = threading.Thread(target=member)
    thread.start()
    joined.wait(10)
    leave.set()
    folders = [file.parent for file in cgroups.files]
    for folder in folders:
        limits_module._remove(folder)
    thread.join()
    assert [f for f in folders if f.exists()] == []
