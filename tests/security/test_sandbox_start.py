"""How a sandboxed command starts: bwrap alone, the limits set by the command's own ``sh``,
the cgroups joined by the thread that starts it. Each property is read back from the
kernel (``/proc/<pid>/limits``, ``/proc/<pid>/cgroup``, the cgroups' ``tasks``), never from
the command line the sandbox built."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agentfsm import ToolCall
from agentfsm.adapters.tools import workspace_tools
from agentfsm.sandbox import BubblewrapSandbox, ResourceLimits, Unsandboxed, run_command
from agentfsm.sandbox import _bubblewrap as bubblewrap_module
from agentfsm.sandbox import _limits as limits_module
from agentfsm.sandbox._limits import Cgroups, processes_option

from .sandboxing import run_python
from .tally import AttackTally

pytestmark = pytest.mark.usefixtures("bubblewrap")

LIMITS = ResourceLimits(processes=99, memory_mb=700, file_size_mb=30, cpu_seconds=40)
WANTED = {
    "Max cpu time": ("40", "45"),
    "Max file size": (str(30 << 20),) * 2,
    "Max data size": (str(700 << 20),) * 2,
}


def limits_of(text: str) -> dict[str, tuple[str, ...]]:
    """The rows of a ``/proc/<pid>/limits`` text, by name: (soft, hard)."""
    return {line[:26].strip(): tuple(line[26:].split()[:2]) for line in text.splitlines()[1:]}


async def run(sandbox: object, command: str, cwd: Path) -> tuple[int | None, str]:
    return await run_command(command, cwd, timeout=30, max_output=20_000, sandbox=sandbox)  # type: ignore[arg-type]


# What a command's text could do to get ahead of the limits set on its first line: a
# leading list operator, a closing word, a continuation, a comment, a carriage return,
# another here-document, a brace group.
AHEAD = [
    "; cat /proc/self/limits",
    "& cat /proc/self/limits",
    "&& cat /proc/self/limits",
    "|| cat /proc/self/limits",
    "| cat /proc/self/limits",
    ") ; cat /proc/self/limits",
    "} ; cat /proc/self/limits",
    "fi; cat /proc/self/limits",
    "done; cat /proc/self/limits",
    "esac; cat /proc/self/limits",
    "then cat /proc/self/limits",
    "\\\ncat /proc/self/limits",
    "#\ncat /proc/self/limits",
    "\rcat /proc/self/limits",
    "\ncat /proc/self/limits",
    "cat <<EOF\n$(cat /proc/self/limits)\nEOF",
    "{ cat /proc/self/limits; }",
    "exec cat /proc/self/limits",
    "ulimit -d unlimited; cat /proc/self/limits",
    "ulimit -H -f unlimited; cat /proc/self/limits",
    "ulimit -S -t 45; cat /proc/self/limits",
    "exec 3>&2; cat /proc/self/limits",
    "bash --norc --noprofile -c 'cat /proc/self/limits'",
    "(cat /proc/self/limits) & wait",
    "nohup cat /proc/self/limits",
]


async def test_no_command_text_runs_before_or_above_the_limits(
    tmp_path: Path, attacks: AttackTally
) -> None:
    """Whatever a command's text starts with, what it runs has the hard limits asked for (or
    it runs nothing: a syntax error ends the line before any of it runs)."""
    sandbox = BubblewrapSandbox(tmp_path, limits=LIMITS)
    for text in AHEAD:
        code, output = await run(sandbox, text, tmp_path)
        rows = limits_of(output) if "Max data size" in output else {}
        # A soft limit may move up to its hard one (CPU: SIGXCPU at 40 s, SIGKILL at 45 s).
        ran_unlimited = bool(rows) and any(rows[k][1] != v[1] for k, v in WANTED.items())
        attacks.record("sandbox start: ahead of the limits", ran_unlimited, f"{text!r}: {output}")
        if not rows:
            assert code not in (0, None), (text, output)  # nothing ran, and it says so


SAME = [
    "echo $0 $LINENO",
    "echo one\necho $LINENO\nexit 3",
    "false; echo $?",
    'echo $#; echo "$@"',
    "trap 'echo bye' EXIT; echo hi",
    "set -e; false; echo not here",
    "echo ok\nif then\necho after",
    "nosuchcommand-agentfsm",
    "exec echo replaced",
    "",
    "# only a comment",
]


async def test_a_command_behaves_as_under_plain_sh(tmp_path: Path) -> None:
    """Exit codes, ``$0``, line numbers (of syntax errors too), ``$?``, traps and ``exec``:
    the same as the same text run by ``sh -c`` without the sandbox."""
    sandbox = BubblewrapSandbox(tmp_path, limits=LIMITS)
    for text in SAME:
        assert await run(sandbox, text, tmp_path) == await run(Unsandboxed(), text, tmp_path)


def test_the_shells_option_for_the_process_count_is_the_kernels() -> None:
    """bash sets ``RLIMIT_NPROC`` with ``-u``, dash with ``-p`` (bash's ``-p`` is the pipe
    size); a program whose ``ulimit`` sets neither has none."""
    shells = {"/bin/bash": "-u", "/bin/dash": "-p"}
    for shell, option in shells.items():
        if os.path.exists(shell):
            assert processes_option(shell) == option
    assert processes_option("/bin/false") is None


def _cgroups(sandbox: BubblewrapSandbox) -> Cgroups:
    cgroups = sandbox.cgroups
    if cgroups is None or not cgroups.by_thread:
        if os.environ.get("CI") and os.geteuid() == 0 and Path("/sys/fs/cgroup/pids").is_dir():
            pytest.fail("no cgroup v1 could be made as root")
        pytest.skip("needs cgroup v1 hierarchies this process may write (root, cgroup v1)")
    return cgroups


async def test_every_process_of_a_command_is_born_in_the_cgroups_and_the_agent_is_not(
    tmp_path: Path,
) -> None:
    sandbox = BubblewrapSandbox(tmp_path, limits=LIMITS)
    cgroups = _cgroups(sandbox)
    own = Path("/proc/self/cgroup").read_text()
    marker = f"agentfsm-born-{time.monotonic_ns()}"
    command = f"setsid sh -c 'sleep 3; : {marker}' & (sleep 3; : {marker}) & sleep 1"
    task = asyncio.create_task(run(sandbox, command, tmp_path))
    await asyncio.sleep(0.6)
    members = [
        {int(t) for t in file.read_text().split()} for file in cgroups.files
    ]  # threads, in cgroup v1's tasks
    await task
    threads = {int(t.name) for t in Path("/proc/self/task").iterdir()}
    names = {t.native_id: t.name for t in threading.enumerate()}
    for tasks in members:
        # This process has one thread in them: the one that starts the commands.
        (starter,) = tasks & threads
        assert names[starter].startswith("agentfsm-cgroups")
        # bwrap, its init, the shell, both sleeps and their shells: all of the command.
        assert len(tasks - threads) >= 5
    assert Path("/proc/self/cgroup").read_text() == own  # the agent itself did not move


_AGENT_WITH_A_LARGE_HEAP = """
import asyncio, sys
from pathlib import Path
from agentfsm.sandbox import BubblewrapSandbox, ResourceLimits, run_command
heap = bytearray(400 << 20)  # resident: 400 MiB, more than the command may use
for i in range(0, len(heap), 4096):
    heap[i] = 1
root = Path(sys.argv[1])
sandbox = BubblewrapSandbox(root, limits=ResourceLimits(memory_mb=128, tmp_mb=1024))
code, output = asyncio.run(run_command(
    "head -c 600M /dev/zero > /dev/shm/fill; echo filled", root, timeout=120,
    max_output=2000, sandbox=sandbox,
))
print("agent alive", code, "filled" in output, sandbox.cgroups is not None)
"""


def test_the_memory_cgroup_kills_the_command_never_the_agent(tmp_path: Path) -> None:
    """The agent's thread that starts the commands is in their memory cgroup: the kernel,
    choosing whom to kill past the limit, must still pick the command (600 MiB of tmpfs
    written under 128 MiB) and never the agent, whose own 400 MiB are resident."""
    done = subprocess.run(
        [sys.executable, "-c", _AGENT_WITH_A_LARGE_HEAP, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    words = done.stdout.split()
    assert words[:2] == ["agent", "alive"], done.stdout
    if words[4] == "False":
        pytest.skip("no memory cgroup here: the command is bounded by tmp_mb alone")
    assert words[2] != "0", done.stdout  # the command was killed…
    assert words[3] == "False", done.stdout  # …before it wrote all of it


async def test_a_cgroup_that_cannot_be_joined_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = BubblewrapSandbox(tmp_path, limits=LIMITS)
    cgroups = _cgroups(sandbox)
    gone = Cgroups((tmp_path / "no-such-cgroup" / "tasks",), cgroups.controllers, cgroups.tcp)
    monkeypatch.setattr(bubblewrap_module, "command_cgroups", lambda limits: gone)
    with pytest.raises(OSError, match=r"cannot join the cgroup .*no-such-cgroup"):
        await run(sandbox, "touch ran", tmp_path)
    assert not (tmp_path / "ran").exists()


async def test_a_command_gets_all_its_processes_beside_the_thread_that_starts_it(
    tmp_path: Path,
) -> None:
    """``processes=10``: the command's bwrap, its ``sh`` and eight background processes run
    (ten), a ninth does not; the agent's thread in the ``pids`` cgroup takes none of them."""
    sandbox = BubblewrapSandbox(tmp_path, limits=ResourceLimits(processes=10))
    cgroups = _cgroups(sandbox)
    if "pids" not in cgroups.controllers:
        pytest.skip("no pids cgroup here")
    for count, runs in ((8, True), (9, False)):
        command = f"for i in $(seq {count}); do sleep 1 & done; wait; echo all ran"
        code, output = await run(sandbox, command, tmp_path)
        assert (code == 0 and output == "all ran\n") is runs, (count, code, output)


_COUNTS_THROUGH_THE_LAUNCHER = """
import subprocess, sys
from pathlib import Path
from agentfsm.sandbox import BubblewrapSandbox, ResourceLimits
sandbox = BubblewrapSandbox(Path(sys.argv[1]), limits=ResourceLimits(processes=10))
cgroups = sandbox.cgroups
if cgroups is None or not cgroups.by_thread or "pids" not in cgroups.controllers:
    print("no pids cgroup")
    sys.exit()
for count in (8, 9):  # nothing in this process started a command through run_command
    argv, env = sandbox.command(
        f"for i in $(seq {count}); do sleep 1 & done; wait; echo all ran", Path(sys.argv[1])
    )
    done = subprocess.run(argv, env=env, cwd=sys.argv[1], capture_output=True, text=True)
    print(count, done.returncode, done.stdout.strip() == "all ran")
"""


def test_a_command_a_launcher_starts_gets_as_many_processes_as_run_command_s(
    tmp_path: Path,
) -> None:
    """``command()`` (a launcher ``sh`` joins the cgroups, as MCP servers start) in a
    process that ran nothing through ``run_command``: ``processes=10`` still lets bwrap,
    ``sh`` and eight background processes run and not a ninth (before, the slot kept for
    the thread that starts commands was free, and a ninth ran)."""
    done = run_python(_COUNTS_THROUGH_THE_LAUNCHER, str(tmp_path), timeout=120)
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "no pids cgroup":
        _cgroups(BubblewrapSandbox(tmp_path))  # fails in CI as root with cgroup v1, else skips
        pytest.skip("no pids cgroup here")
    lines = done.stdout.splitlines()
    assert lines[0] == "8 0 True", done.stdout
    count, _, all_ran = lines[1].split()
    assert (count, all_ran) == ("9", "False"), done.stdout


_THREADS_AND_PLACES = """
import asyncio, sys, threading
from pathlib import Path
from agentfsm.sandbox import ResourceLimits, detect_sandbox, run_command
from agentfsm.sandbox._bubblewrap import BubblewrapSandbox
root = Path(sys.argv[1])
detect_sandbox(root)
print(sorted(t.name for t in threading.enumerate()))
sandbox = BubblewrapSandbox(root, limits=ResourceLimits(processes=12))
cgroups = sandbox.cgroups
if cgroups is None or not cgroups.by_thread or "pids" not in cgroups.controllers:
    print("no pids cgroup")
    sys.exit()
pids = next(f.parent / "pids.max" for f in cgroups.files if (f.parent / "pids.max").exists())
print(pids.read_text().strip())
sandbox.command("true", root)
print(pids.read_text().strip())
asyncio.run(run_command("true", root, timeout=30, max_output=100, sandbox=sandbox))
print(pids.read_text().strip(), sorted(t.name for t in threading.enumerate()))
"""


def test_the_thread_that_starts_commands_is_made_by_the_first_command_and_makes_room_for_itself(
    tmp_path: Path,
) -> None:
    """``detect_sandbox`` (its probe) leaves no thread behind; the cgroups' ``pids.max`` is
    ``processes`` until the thread that starts ``run_command``'s commands joins, then one
    more for it; ``command()`` (a launcher joins) starts no thread."""
    done = run_python(_THREADS_AND_PLACES, str(tmp_path), timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "['MainThread']", done.stdout
    if lines[1] == "no pids cgroup":
        _cgroups(BubblewrapSandbox(tmp_path))  # fails in CI as root with cgroup v1, else skips
        pytest.skip("no pids cgroup here")
    assert lines[1:] == ["12", "12", "13 ['MainThread', 'agentfsm-cgroups']"], done.stdout


_A_CHILD_S_THREAD_IN_ITS_PARENT_S_CGROUPS = """
import os, subprocess, sys
from pathlib import Path
from agentfsm.sandbox import BubblewrapSandbox, ResourceLimits
root = Path(sys.argv[1])
sandbox = BubblewrapSandbox(root, limits=ResourceLimits(processes=10))
cgroups = sandbox.cgroups  # the parent's, kept across the fork
if cgroups is None or not cgroups.by_thread or "pids" not in cgroups.controllers:
    print("no pids cgroup")
    sys.exit()
child = os.fork()
if child == 0:
    try:
        cgroups.start_in(lambda: None)  # its own thread joins the parent's cgroups
    finally:
        os._exit(0)
os.waitpid(child, 0)
for count in (8, 9):
    argv, env = sandbox.command(f"for i in $(seq {count}); do sleep 1 & done; wait; echo ran", root)
    done = subprocess.run(argv, env=env, cwd=root, capture_output=True, text=True)
    print(count, done.stdout.strip() == "ran")
"""


def test_a_forked_child_s_thread_leaves_its_parent_s_commands_no_more_processes(
    tmp_path: Path,
) -> None:
    """A child that starts commands through the ``Cgroups`` its parent made (kept across a
    fork) joins them with a thread of its own, which does not raise their ``pids.max``: once
    it has gone, the parent's commands still get exactly ``processes`` (one more before)."""
    done = run_python(_A_CHILD_S_THREAD_IN_ITS_PARENT_S_CGROUPS, str(tmp_path), timeout=120)
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "no pids cgroup":
        _cgroups(BubblewrapSandbox(tmp_path))  # fails in CI as root with cgroup v1, else skips
        pytest.skip("no pids cgroup here")
    assert done.stdout.splitlines() == ["8 True", "9 False"], done.stdout


def test_no_thread_to_be_had_fails_run_command_s_start_as_an_os_error_and_not_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where this process can start no thread (a limit on its threads, no memory), the
    start through the cgroups fails with the documented ``OSError`` saying the command did
    not run, and ``command()`` (whose launcher joins the cgroups itself) still works (it
    raised ``RuntimeError`` before)."""
    sandbox = BubblewrapSandbox(tmp_path, limits=ResourceLimits(processes=93, memory_mb=337))
    cgroups = _cgroups(sandbox)

    def no_thread(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    with pytest.raises(OSError, match=r"^\[Errno 11\] the command did not run: cannot start a"):
        cgroups.start_in(lambda: None)
    argv, env = sandbox.command("echo ran", tmp_path)
    monkeypatch.undo()
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "ran\n"), done.stderr


def test_the_place_kept_for_the_starting_thread_is_kept_only_where_a_thread_joins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``pids`` cgroup v1 beside a memory cgroup v2 (a hybrid machine) is joined by a
    launcher ``sh``, never by the thread: its ``pids.max`` is ``processes``, not one more
    (one process more ran there before)."""
    _cgroups(BubblewrapSandbox(tmp_path))  # cgroup v1 here, or skipped
    pids = next((m for m, c in limits_module._cgroup_mounts() if "pids" in c), None)
    if pids is None:
        pytest.skip("no pids hierarchy here")
    unified = tmp_path / "unified"  # stands for a cgroup v2 hierarchy: no tasks file
    child = unified / f"agentfsm-{os.getpid()}-11-339"  # the cgroup the kernel would make
    child.mkdir(parents=True)
    for name in ("memory.max", "memory.swap.max", "cgroup.procs"):
        (child / name).touch()
    mounts = [(pids, frozenset({"pids"})), (unified, frozenset({"memory"}))]
    monkeypatch.setattr(limits_module, "_cgroup_mounts", lambda: mounts)
    cgroups = limits_module.command_cgroups(ResourceLimits(processes=11, memory_mb=339))
    assert cgroups is not None
    assert not cgroups.by_thread
    folder = next(f.parent for f in cgroups.files if f.parent.parent == pids)
    assert (folder / "pids.max").read_text().strip() == "11"


async def test_a_command_that_finds_its_pids_cgroup_full_does_not_run_and_says_why(
    tmp_path: Path,
) -> None:
    sandbox = BubblewrapSandbox(tmp_path, limits=ResourceLimits(processes=5))
    cgroups = _cgroups(sandbox)
    if "pids" not in cgroups.controllers:
        pytest.skip("no pids cgroup here")
    filling = asyncio.create_task(
        run(sandbox, "for i in 1 2 3; do sleep 2 & done; wait; echo filled", tmp_path)
    )
    await asyncio.sleep(0.8)  # its bwrap, sh and three sleeps: the five allowed
    with pytest.raises(
        BlockingIOError,
        match=r"the command did not run \(fork: Resource temporarily unavailable\): the commands running",
    ):
        await run(sandbox, "touch ran", tmp_path)
    assert await filling == (0, "filled\n")
    assert not (tmp_path / "ran").exists()


async def test_the_shell_tool_says_a_full_pids_cgroup_stopped_its_line(tmp_path: Path) -> None:
    """Another command holds all the processes of ``processes=6`` but ``room``: with none
    left the line does not start, with one bwrap cannot make the command's process, with
    two ``sh`` cannot start bash. Each time the model is told, in one line, that the
    sandbox's process limit stopped it and which settings key raises it, and nothing ran."""
    sandbox = BubblewrapSandbox(tmp_path, limits=ResourceLimits(processes=6))
    cgroups = _cgroups(sandbox)
    if "pids" not in cgroups.controllers:
        pytest.skip("no pids cgroup here")
    pids_current = next(f.parent / "pids.current" for f in cgroups.files if "pids" in f.parts)
    tools = workspace_tools(tmp_path, sandbox=sandbox)
    for room in (0, 1, 2):
        filled = tmp_path / "filled"
        filled.unlink(missing_ok=True)
        # bwrap, sh and the sleeps; ": >" makes the file without a process of its own.
        line = f"for i in $(seq {4 - room}); do sleep 60 & done; : > filled; wait"
        filling = asyncio.create_task(run(sandbox, line, tmp_path))
        for _ in range(3000):  # bwrap, sh and the sleeps running, the agent's thread: 7 - room
            if filled.exists() and int(pids_current.read_text()) == 7 - room:
                break
            await asyncio.sleep(0.02)
        assert int(pids_current.read_text()) == 7 - room
        result = await tools.run(ToolCall("1", "shell", {"command": "touch ran"}))
        filling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await filling
        assert not result.ok, (room, result)
        assert result.error is not None
        assert "process limit (6 at once)" in result.error, (room, result)
        assert '"processes"' in result.error, (room, result)
        assert "\n" not in result.error, (room, result)
        assert not (tmp_path / "ran").exists()


_PROBES_WHILE_THE_COMMANDS_HOLD_EVERY_PROCESS = """
import sys
from pathlib import Path
from agentfsm.sandbox import ResourceLimits, SandboxUnavailable, detect_sandbox
from agentfsm.sandbox._limits import command_cgroups

cgroups = command_cgroups(ResourceLimits())  # the probe's limits: the defaults
pids = [f.parent / "pids.max" for f in (cgroups.files if cgroups else ()) if "pids" in f.parts]
if not pids:
    print("no pids cgroup")
    sys.exit()
pids[0].write_text("1")  # as if the commands running at once held every process
for attempt in ("full", "freed"):
    try:
        print(attempt, type(detect_sandbox(sys.argv[1])).__name__)
    except SandboxUnavailable as error:
        print(attempt, error)
    pids[0].write_text(str(ResourceLimits().processes + 1))
"""


def test_the_probe_of_bwrap_works_while_the_commands_hold_every_process(tmp_path: Path) -> None:
    """``detect_sandbox`` probes bwrap outside the commands' cgroups: a full ``pids`` cgroup
    does not make it say that bubblewrap does not work here (with the hint to enable user
    namespaces), a verdict that would stay for the rest of the process."""
    done = run_python(_PROBES_WHILE_THE_COMMANDS_HOLD_EVERY_PROCESS, str(tmp_path), timeout=120)
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "no pids cgroup":
        pytest.skip("no pids cgroup can be made here (not root, or no pids hierarchy)")
    # Before: "full No OS sandbox … Creating new namespace failed", then the same when freed.
    assert done.stdout.splitlines() == ["full BubblewrapSandbox", "freed BubblewrapSandbox"]
