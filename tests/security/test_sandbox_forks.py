"""An agent that forks (``os.fork``, ``multiprocessing`` with the fork start method) while
its other threads run commands: the child runs its own commands, never waits forever on
a lock a thread of the parent held at the fork, and leaves no cgroup behind once it is
gone. Each scenario runs in a fresh interpreter, so that its forks and threads stay out of
the test runner."""

from __future__ import annotations

from pathlib import Path

import pytest

from .sandboxing import run_python

pytestmark = pytest.mark.usefixtures("bubblewrap")


# A thread of the parent is inside each of the sandbox's locked sections (working out the
# mounts, starting the thread that joins the cgroups, probing bwrap) when the parent
# forks; the child, given 20 s, runs a command through the same sandbox.
_FORKS_WHILE_A_THREAD_HOLDS = """
import asyncio, os, signal, sys, threading
from agentfsm.sandbox import BubblewrapSandbox, ResourceLimits, detect_sandbox, run_command
from agentfsm.sandbox import _bubblewrap, _limits

root, held = sys.argv[1], sys.argv[2]
sandbox = BubblewrapSandbox(root, limits=ResourceLimits(processes=89, memory_mb=331))
parent = os.getpid()
inside, release = threading.Event(), threading.Event()
work_out = sandbox._work_out

def slow_work_out(key):
    if os.getpid() == parent:
        inside.set()
        release.wait(60)
    return work_out(key)

def holds(lock):
    with lock:
        inside.set()
        release.wait(60)

if held == "plan":
    sandbox._work_out = slow_work_out
    target = lambda: asyncio.run(run_command("true", root, timeout=60, max_output=100, sandbox=sandbox))
else:
    lock = {"starters": _limits._STARTERS_LOCK, "probe": _bubblewrap._PROBE_LOCK}[held]
    target = lambda: holds(lock)
thread = threading.Thread(target=target)
thread.start()
inside.wait(60)
child = os.fork()
if child == 0:
    signal.alarm(20)  # a child waiting on a lock no thread of its own holds: killed
    if held == "probe":
        _bubblewrap._PROBES.clear()
        ran = detect_sandbox(root, limits=sandbox.limits)
    else:
        ran = sandbox
    code, output = asyncio.run(run_command("echo child", root, timeout=20, max_output=100, sandbox=ran))
    os._exit(0 if (code, output) == (0, "child\\n") else 3)
_, status = os.waitpid(child, 0)
release.set()
thread.join()
print(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize("held", ["plan", "starters", "probe"])
def test_a_child_forked_while_a_thread_holds_a_sandbox_lock_runs_its_commands(
    tmp_path: Path, held: str
) -> None:
    # Before: the child waited forever on the lock (killed by its alarm: -14).
    done = run_python(_FORKS_WHILE_A_THREAD_HOLDS, str(tmp_path), held, timeout=180)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0", done.stdout + done.stderr


# Forked children (multiprocessing, then a bare os.fork) each run a command and end with
# os._exit, as multiprocessing's children do: no atexit handler of theirs runs.
_CHILDREN_RUN_COMMANDS = """
import asyncio, glob, multiprocessing, os, sys
from agentfsm.sandbox import BubblewrapSandbox, ResourceLimits, run_command

root = sys.argv[1]
sandbox = BubblewrapSandbox(root, limits=ResourceLimits(processes=88, memory_mb=332))

def child():
    code, output = asyncio.run(run_command("echo child", root, timeout=60, max_output=100, sandbox=sandbox))
    assert (code, output) == (0, "child\\n"), (code, output)

pids = []
for _ in range(3):
    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join(60)
    assert process.exitcode == 0, process.exitcode
    pids.append(process.pid)
pid = os.fork()
if pid == 0:
    child()
    os._exit(0)
assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
pids.append(pid)
code, output = asyncio.run(run_command("echo parent", root, timeout=60, max_output=100, sandbox=sandbox))
assert (code, output) == (0, "parent\\n"), (code, output)
print(bool(sandbox.cgroups))
print(*(folder for pid in pids for folder in glob.glob(f"/sys/fs/cgroup/*/agentfsm-{pid}-*")))
"""


def test_the_cgroups_of_forked_children_that_ended_are_removed(tmp_path: Path) -> None:
    """A child that ended without its atexit handlers (``os._exit``, a kill) cannot remove
    its cgroups: the next process that makes its own (the next child, the next agent)
    removes those of processes that are gone."""
    done = run_python(_CHILDREN_RUN_COMMANDS, str(tmp_path), timeout=180)
    assert done.returncode == 0, done.stderr
    made, left = [*done.stdout.splitlines(), ""][:2]
    if made != "True":
        pytest.skip("no cgroup can be made here (not root, or no pids/memory hierarchy)")
    # Before: every child's pids and memory cgroups were left under /sys/fs/cgroup.
    again = run_python(_CHILDREN_RUN_COMMANDS, str(tmp_path), timeout=180)
    assert again.returncode == 0, again.stderr
    still = [f for f in left.split() if Path(f).exists()]
    assert still == []
