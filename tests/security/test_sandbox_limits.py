"""Resource limits, attacked in a real agent run: a fork bomb, a 2 GiB allocation, a 1 GiB
file in the workspace and in ``/tmp``, a CPU spin. Each ends as a failed ``shell`` result
that names the limit and its settings key, the run goes on to its next scripted turn, and
nothing of the call is left running."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentfsm import Agent, ToolCall, ToolMessage
from agentfsm.adapters.tools import ToolBox, workspace_tools
from agentfsm.sandbox import BubblewrapSandbox, ResourceLimits, Unsandboxed, run_command
from agentfsm.sandbox import _bubblewrap as bubblewrap_module
from agentfsm.sandbox import _limits as limits_module
from agentfsm.sandbox._limits import Cgroups, command_cgroups, explain_limit
from agentfsm.testing import ScriptedChat, tool_reply

from .sandboxing import alive, kill_all, run_python
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
        (2, "/bin/sh: 1: Cannot fork\n"): "processes",  # dash
        (1, "bwrap: Creating new namespace failed: Resource temporarily unavailable"): "processes",
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


@pytest.mark.parametrize("cgroups", ["as found", "launcher", "none"])
async def test_the_limits_are_set_however_the_command_starts(
    tmp_path: Path, cgroups: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started from the thread in the cgroups (cgroup v1), through the launcher ``sh`` that
    joins them (cgroup v2's way), and with no cgroups (the process count by the shell's
    ``ulimit``), by ``run_command`` and by ``command()``: the limits inside are those asked
    for."""
    if cgroups == "none":
        monkeypatch.setattr(bubblewrap_module, "command_cgroups", lambda limits: None)
    if cgroups == "launcher":
        monkeypatch.setattr(Cgroups, "by_thread", property(lambda self: False))
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
    done = run_python(_FORKS_THEN_RUNS, str(tmp_path), timeout=120)
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
        done = run_python(_RUNS_FROM_THREADS, str(tmp_path), timeout=120)
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


READ_LIMITS = "grep -E 'Max (data|file size|cpu time|processes)' /proc/self/limits"
LEADS = [
    # What a command may start with, to make sh read the limits' line another way or run
    # something first; each is followed by READ_LIMITS (the kernel's own reading).
    *(f"{lead}{READ_LIMITS}" for lead in (";", "&", "|", ")", "fi;", "done;", "};", "esac;")),
    *(f"{lead}{READ_LIMITS}" for lead in (";;", "&&", "||", "\\\n", "\r\n", "\n", "! ", "then ")),
    f"# {READ_LIMITS}\n{READ_LIMITS}",
    f"cat <<EOF; {READ_LIMITS}\nbody\nEOF",
    f"cat <<'EOF'\n$x\nEOF\n{READ_LIMITS}",
    f"alias ulimit=true\nulimit -d unlimited; {READ_LIMITS}",
    f"ulimit() {{ :; }}; {READ_LIMITS}",
    f"exec {READ_LIMITS}",
    f"ulimit -d unlimited; ulimit -H -f unlimited; ulimit -t unlimited; {READ_LIMITS}",
    f"bash --norc --noprofile -c 'ulimit -u unlimited; ulimit -d unlimited; {READ_LIMITS}'",
    f"python3 -c 'import resource as r; r.setrlimit(r.RLIMIT_DATA, (-1, -1))'; {READ_LIMITS}",
    f"echo {'x' * 100_000} >/dev/null; {READ_LIMITS}",
]
SAME_AS_SH = [
    # Read as plain sh -c reads them: exit codes, $0, $?, traps, set -e, syntax errors and
    # their line numbers, exec, here-documents, output.
    "",
    "echo $0 $? $#",
    "exit 7",
    "false; exit",
    "set -e; false; echo not here",
    "trap 'echo bye $?' EXIT; exit 3",
    "exec echo replaced",
    "if",
    "echo a\necho b\nfi",
    ")",
    "'",
    "cat <<EOF\nx\nEOF",
    "echo a\u2028b; printf '\\377\\r\\n'",
    "set -- a b; echo $#; shift; echo $1",
    "x() { return 4; }; x; echo $?",
    "ulimit -S -d 1000; echo lowered $?",
]


async def test_no_command_text_runs_before_the_limits_or_without_them(
    tmp_path: Path, attacks: AttackTally
) -> None:
    """The command's ``sh`` sets the limits on the command's own first line: whatever the
    command starts with, what it runs has them (the kernel's ``/proc/self/limits``), and it
    cannot raise them; otherwise it is read as plain ``sh -c`` reads it."""
    limits = ResourceLimits(processes=77, memory_mb=300, file_size_mb=20, cpu_seconds=30)
    sandbox = BubblewrapSandbox(tmp_path, limits=limits)
    expected = {
        "Max data size": (str(300 << 20),) * 2,
        "Max file size": (str(20 << 20),) * 2,
        "Max cpu time": ("30", "35"),
    }
    if sandbox.cgroups is None or "pids" not in sandbox.cgroups.controllers:
        expected["Max processes"] = ("77", "77")
    for command in LEADS:
        _, output = await run_command(
            command, tmp_path, timeout=30, max_output=10_000, sandbox=sandbox
        )
        rows = {line[:26].strip(): tuple(line[26:].split()[:2]) for line in output.splitlines()}
        read = {name: rows[name] for name in expected if name in rows}
        # Got through: something ran without the limits, or with one raised.
        escaped = bool(read) and read != expected
        attacks.record("sandbox limits: command start", escaped, f"{command[:60]!r}: {read}")
    for command in SAME_AS_SH:
        got = await run_command(command, tmp_path, timeout=30, max_output=10_000, sandbox=sandbox)
        plain = await run_command(
            command, tmp_path, timeout=30, max_output=10_000, sandbox=Unsandboxed()
        )
        attacks.record("sandbox limits: read as sh reads it", got != plain, f"{got} != {plain}")


async def test_every_process_of_a_command_has_the_limits_seen_from_outside(
    tmp_path: Path, attacks: AttackTally
) -> None:
    """Read from the host while the command runs: every process under bwrap (daemons that
    left the group, threads) has the limits, and, where there are cgroups, is in them while
    the agent's own main thread is not."""
    limits = ResourceLimits(processes=78, memory_mb=301, file_size_mb=21, cpu_seconds=31)
    sandbox = BubblewrapSandbox(tmp_path, limits=limits)
    command = (
        f"(setsid sh -c 'sleep 30 # {MARK}' &); (sh -c 'sleep 30 & sleep 31' &); "
        f"nohup sleep 32 >/dev/null 2>&1 & "
        "python3 -c 'import threading,time; threading.Thread(target=time.sleep,args=(30,)).start()' "
        f"& sleep 33 # {MARK}"
    )
    task = asyncio.ensure_future(
        run_command(command, tmp_path, timeout=60, max_output=1000, sandbox=sandbox)
    )
    try:
        processes: list[int] = []
        for _ in range(100):  # until bwrap and the eight processes of the command have started
            await asyncio.sleep(0.1)
            processes = [p for p in descendants(os.getpid()) if this_call(p, command)]
            if len(processes) >= 9:
                break
        cgroups = sandbox.cgroups
        folders = [f"/{file.parent.name}" for file in cgroups.files] if cgroups else []
        for pid in processes:
            try:
                status = Path(f"/proc/{pid}/limits").read_text()
                where = Path(f"/proc/{pid}/cgroup").read_text()
                name = Path(f"/proc/{pid}/comm").read_text().strip()
                running = Path(f"/proc/{pid}/cmdline").read_bytes() != b""
            except OSError:
                continue
            if not running:  # exiting: the kernel has moved it to the root cgroups already
                continue
            if name == "bwrap":  # the monitor outside the namespace: no limit needed
                limited = True
            else:
                limited = f"Max data size             {301 << 20}" in status
            inside = all(f":{folder}\n" in where for folder in folders)
            attacks.record(
                "sandbox limits: processes seen from outside",
                not (limited and inside),
                f"{name} {pid}: {where}",
            )
        attacks.record(
            "sandbox limits: processes seen from outside",
            len(processes) < 9,
            f"only {len(processes)} processes were seen",
        )
        main = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/cgroup").read_text()
        agent_inside = any(f":{folder}\n" in main for folder in folders)
        attacks.record("sandbox limits: processes seen from outside", agent_inside, main)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert alive(MARK) == []


def this_call(pid: int, command: str) -> bool:
    """Whether ``pid`` is the bwrap of the call running ``command`` or runs inside its
    sandbox (another PID namespace), not a process another test left to this one."""
    try:
        if command in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
            return True
        return os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")
    except OSError:
        return False


def descendants(pid: int) -> list[int]:
    """Every process under ``pid``, from the host's ``/proc``."""
    found: list[int] = []
    parents = [pid]
    while parents:
        for task in Path(f"/proc/{parents.pop()}/task").glob("*"):
            with contextlib.suppress(OSError, ValueError):
                children = [int(c) for c in task.joinpath("children").read_text().split()]
                found += children
                parents += children
    return found


async def test_a_cgroup_that_cannot_be_joined_runs_nothing(
    tmp_path: Path, attacks: AttackTally
) -> None:
    """Where the commands' cgroups cannot be joined (gone here), the call fails with one
    line naming the cgroup, and the command never runs outside them."""
    sandbox = BubblewrapSandbox(tmp_path, limits=ResourceLimits(processes=96, memory_mb=336))
    cgroups = sandbox.cgroups
    if cgroups is None or not cgroups.by_thread:
        pytest.skip("no cgroup v1 hierarchy can be made here (not root, or cgroup v2)")
    for file in cgroups.files:
        file.parent.rmdir()
    box = workspace_tools(tmp_path, sandbox=sandbox)
    for _ in range(2):
        result = await box.run(ToolCall("c", "shell", {"command": "touch ran; echo ran"}))
        ran = (tmp_path / "ran").exists() or result.ok
        attacks.record("sandbox limits: cgroup not joined", ran, f"{result}")
        error = result.error or ""
        assert "the command did not run: cannot join the cgroup /sys/fs/cgroup/" in error
        assert "\n" not in error


LIST_DESCRIPTORS = """
import os
held = set()
for pid in filter(str.isdigit, os.listdir("/proc")):
    if int(pid) != os.getpid():  # every process of the call but this one (its own listing)
        held.update(os.listdir(f"/proc/{pid}/fd"))
print(*sorted(held, key=int))
"""


async def test_no_descriptor_of_the_agent_reaches_a_command(
    tmp_path: Path, attacks: AttackTally
) -> None:
    """While other commands run (their pipes and pidfds open in the agent), a command's
    processes hold only stdin, stdout and stderr: no pidfd, no other call's pipe, no setuid
    filter, whether bwrap was started by the cgroups' thread or not."""
    for limits in (ResourceLimits(), ResourceLimits(processes=97)):
        sandbox = BubblewrapSandbox(tmp_path, limits=limits)
        others = [
            asyncio.ensure_future(
                run_command(f"sleep 3 # {MARK}", tmp_path, timeout=30, max_output=100, sandbox=s)
            )
            for s in (sandbox, Unsandboxed())
        ]
        try:
            await asyncio.sleep(0.5)
            _, output = await run_command(
                f"python3 -c {shlex.quote(LIST_DESCRIPTORS)}",
                tmp_path,
                timeout=30,
                max_output=1000,
                sandbox=sandbox,
            )
            held = output.split()
            attacks.record("sandbox descriptors", held == [] or held != ["0", "1", "2"], output)
        finally:
            for other in others:
                other.cancel()
            await asyncio.gather(*others, return_exceptions=True)
    machine_is_fine()


_BIG_AGENT = """
import asyncio, sys
from agentfsm.sandbox import BubblewrapSandbox, ResourceLimits, run_command
held = bytearray(400 << 20)  # the agent's own memory, far above the commands' limit
for i in range(0, len(held), 4096):
    held[i] = 1
sandbox = BubblewrapSandbox(sys.argv[1], limits=ResourceLimits(memory_mb=128))
print("memory" in (sandbox.cgroups.controllers if sandbox.cgroups else ()), flush=True)

async def main():
    return await asyncio.gather(*(
        run_command(command, sys.argv[1], timeout=60, max_output=1000, sandbox=sandbox)
        for command in sys.argv[2:]
    ))

for code, _ in asyncio.run(main()):
    print(code, flush=True)
print("agent alive", flush=True)
"""
FILL_TOGETHER = [
    "head -c 300M /dev/zero > /dev/shm/f",
    "python3 -c 'import mmap\nm = mmap.mmap(-1, 300 << 20)\nfor i in range(0, 300 << 20, 4096): m[i] = 1'",
    "for i in 1 2 3 4; do python3 -c 'b = bytes([1]) * (100 << 20); import time; time.sleep(2)' & "
    'all="$all $!"; done; s=0; for p in $all; do wait $p || s=1; done; exit $s',
]


def test_the_memory_cgroup_kills_a_command_never_the_agent(
    tmp_path: Path, attacks: AttackTally
) -> None:
    """An agent holding 400 MiB runs, at once, commands that fill ``/dev/shm``, touch shared
    memory and start many processes under ``memory_mb=128``: the kernel kills processes of
    the commands, never the agent (the thread of the agent that starts the commands is in
    their cgroups, the agent's memory is not)."""
    done = run_python(_BIG_AGENT, str(tmp_path), *FILL_TOGETHER, timeout=300)
    lines = done.stdout.splitlines()
    if lines[:1] != ["True"]:
        pytest.skip("no memory cgroup can be made here (not root, or no memory hierarchy)")
    attacks.record(
        "sandbox limits: the agent killed instead",
        done.returncode != 0 or lines[-1:] != ["agent alive"],
        f"{done.returncode}: {done.stdout} {done.stderr[-500:]}",
    )
    assert "0" not in lines[1:4]  # none of them fitted


_BOMB_AS_A_USER = """
import asyncio, sys
from agentfsm.sandbox import BubblewrapSandbox, ResourceLimits, run_command
sandbox = BubblewrapSandbox(sys.argv[1], limits=ResourceLimits(processes=64))
print(sandbox.describe()["limits"]["processes_bound"], flush=True)
# Counted with the shell's own glob and echo: no process needed once the bomb fills the limit.
bomb = "(sleep 0.3; bash -c ':(){ :|:& };:') >/dev/null 2>&1 & sleep 3; set -- /proc/[0-9]*; echo $#"
print(asyncio.run(run_command(bomb, sys.argv[1], timeout=20, max_output=1000, sandbox=sandbox)))
"""


def _as_nobody(
    script: str, *args: str, python: str, env: dict[str, str] | None = None, **options: Any
) -> subprocess.CompletedProcess[str]:
    return run_python(
        script,
        *args,
        python=python,
        env={"HOME": "/nonexistent", **(env or {})},
        user=65534,
        group=65534,
        extra_groups=[],
        **options,
    )


def _python_for_nobody() -> str:
    """This Python, or the system's of the same version, whichever ``nobody`` can run with
    agentfsm importable (a pyenv or a venv under ``/root`` is root's alone)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for python in dict.fromkeys(
        (sys.executable, f"/usr/bin/{version}", f"/usr/local/bin/{version}")
    ):
        try:
            done = _as_nobody("import agentfsm.sandbox", python=python, timeout=60, cwd="/")
        except OSError:
            continue
        if done.returncode == 0:
            return python
    pytest.skip(
        f"no Python {sys.version_info.major}.{sys.version_info.minor} that nobody may run "
        f"imports agentfsm here ({sys.executable} lies in a folder only root may enter)"
    )


def test_a_fork_bomb_of_a_user_that_is_not_root_stops_at_the_process_limit(
    tmp_path: Path, attacks: AttackTally
) -> None:
    """The path of a user that is not root (no cgroup: the command's ``sh`` sets
    ``RLIMIT_NPROC`` with its ``ulimit``), taken from root by running the agent as
    ``nobody``: a fork bomb under ``processes=64`` never has more than 64 processes."""
    if os.geteuid() != 0:
        pytest.skip(
            "runs the agent as nobody, which only root can do (as another user, the "
            "other tests take this path)"
        )
    python = _python_for_nobody()
    with tempfile.TemporaryDirectory(prefix="agentfsm-nobody-") as folder:
        Path(folder).chmod(0o777)  # pytest's own folders are root's alone
        done = _as_nobody(_BOMB_AS_A_USER, folder, python=python, cwd=folder)
    assert done.returncode == 0, done.stderr
    bound, result = done.stdout.splitlines()
    assert bound == "at most 64 (RLIMIT_NPROC)"
    counted = [int(w) for w in result.replace("'", " ").replace("\\n", " ").split() if w.isdigit()]
    attacks.record("sandbox limits: fork bomb of a user", counted[-1:] > [64], result)
    assert counted[-1] > 32, result  # the bomb did run
    machine_is_fine()


_SANDBOX_AS_A_USER = """
import asyncio, sys
from agentfsm.sandbox import BubblewrapSandbox, run_command
sandbox = BubblewrapSandbox(sys.argv[1])
print(asyncio.run(run_command("echo ran", sys.argv[1], timeout=20, max_output=100, sandbox=sandbox)))
print(sandbox.describe()["toolchains"])
"""


def test_a_path_folder_the_user_may_not_enter_is_not_shown_and_breaks_nothing(
    tmp_path: Path,
) -> None:
    """A ``PATH`` entry beneath a folder this user may not enter (root's ``~/.cargo/bin``
    kept by ``sudo -E``): the sandbox shows nothing of it and its commands run; it used to
    fail every command with a ``PermissionError`` while working out the toolchains."""
    if os.geteuid() != 0:
        pytest.skip("makes a folder nobody may enter and runs the agent as nobody: root only")
    python = _python_for_nobody()
    closed = tmp_path / "closed"
    (closed / "bin").mkdir(parents=True)
    closed.chmod(0o700)
    with tempfile.TemporaryDirectory(prefix="agentfsm-nobody-") as folder:
        Path(folder).chmod(0o777)
        path = f"{closed / 'bin'}:/usr/bin:/bin"
        done = _as_nobody(_SANDBOX_AS_A_USER, folder, python=python, cwd=folder, env={"PATH": path})
    assert done.returncode == 0, done.stderr
    ran, shown = done.stdout.splitlines()
    assert ran == "(0, 'ran\\n')"
    assert str(closed) not in shown
