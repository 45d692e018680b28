"""Resource limits of one sandboxed command, and how a failure shows that one was hit.

Each limit bounds one command, as hard and soft limits the command cannot raise (it has no
capabilities): ``RLIMIT_NPROC``, ``RLIMIT_DATA``, ``RLIMIT_FSIZE`` and ``RLIMIT_CPU`` for each
process, and the sizes of its two writable tmpfs (``/tmp`` and ``/dev/shm``, ``tmp_mb``
each; ``/dev`` itself is read-only).

Where the machine lets this process make cgroups (root, usually), :func:`command_cgroups`
makes them once per process and pair of values and the commands run in them: a ``pids``
cgroup bounds the processes (``RLIMIT_NPROC`` never applies to root) and a ``memory``
cgroup everything the command's processes use together, which ``RLIMIT_DATA`` does not
see (``MAP_SHARED`` mappings, System V shared memory, tmpfs files, page cache, socket
buffers); past it the kernel kills a process of the command. Where none can be made,
processes are bounded by ``RLIMIT_NPROC`` (not under root: the sandbox's description then
says NOT BOUNDED), and memory shared between processes and socket buffers are not bounded
beyond the two tmpfs sizes (the sandbox's description says so).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import os
import queue
import re
import resource
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from attrs import field, frozen

__all__ = [
    "CPU_GRACE_SECONDS",
    "Cgroups",
    "ResourceLimits",
    "command_cgroups",
    "explain_limit",
    "processes_option",
]

_T = TypeVar("_T")

CPU_GRACE_SECONDS = 5
"""A process that ignores ``SIGXCPU`` at its CPU limit is killed this much CPU time later."""
_SETTINGS_HINT = 'raise it in .agentfsm/settings.json: {{"sandbox": {{"limits": {{"{key}": …}}}}}}'


def _positive(instance: object, attribute: object, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        name = getattr(attribute, "name", "limit")
        raise ValueError(f"{name} must be a whole number of at least 1, not {value!r}")


@frozen
class ResourceLimits:
    """What one sandboxed command may use; every value is a whole number of at least 1."""

    processes: int = field(default=512, validator=_positive)
    """Processes and threads at once (``RLIMIT_NPROC``, or a ``pids`` cgroup where one can
    be made)."""
    memory_mb: int = field(default=2048, validator=_positive)
    """Memory, in MiB: the data (heap) of each process (``RLIMIT_DATA``: address space
    reserved but not used, as V8 and the JVM do, is not counted) and, where a memory cgroup
    can be made, everything the command's processes use together (shared memory, files in
    ``/tmp`` and ``/dev/shm``, page cache)."""
    file_size_mb: int = field(default=512, validator=_positive)
    """Largest file a process may write, in MiB (``RLIMIT_FSIZE``)."""
    tmp_mb: int = field(default=512, validator=_positive)
    """Size of the private ``/tmp`` (which holds ``HOME``) and of ``/dev/shm``, each, in
    MiB."""
    cpu_seconds: int = field(default=600, validator=_positive)
    """CPU time of each process, in seconds (``RLIMIT_CPU``)."""

    def prlimit_processes(self) -> str:
        """The ``prlimit`` option setting ``RLIMIT_NPROC`` as :meth:`ulimit_script` does, for
        a shell whose ``ulimit`` has no option for it."""
        value = _capped(resource.RLIMIT_NPROC, self.processes)
        return f"--nproc={value}:{value}"

    def ulimit_script(self, processes_option: str | None = None) -> str:
        """``sh`` setting the limits with its ``ulimit``, hard and soft (the CPU's soft
        limit :data:`CPU_GRACE_SECONDS` below the hard one: ``SIGXCPU``, then ``SIGKILL``),
        each no higher than the limit this process already has (which no unprivileged
        process can raise): ``-d`` counts KiB, ``-f`` blocks of 512 bytes; ``RLIMIT_NPROC``
        too when ``processes_option`` names the shell's option for it
        (:func:`processes_option`)."""
        data = _capped(resource.RLIMIT_DATA, self.memory_mb << 20) >> 10
        size = _capped(resource.RLIMIT_FSIZE, self.file_size_mb << 20) >> 9
        hard = _capped(resource.RLIMIT_CPU, self.cpu_seconds + CPU_GRACE_SECONDS)
        nproc = _capped(resource.RLIMIT_NPROC, self.processes)
        processes = f"ulimit {processes_option} {nproc} && " if processes_option else ""
        return (
            f"{processes}ulimit -d {data} && ulimit -f {size} && "
            f"ulimit -t {hard} && ulimit -S -t {min(self.cpu_seconds, hard)}"
        )

    def describe(self) -> dict[str, int]:
        """The limits as JSON."""
        return {
            "processes": self.processes,
            "memory_mb": self.memory_mb,
            "file_size_mb": self.file_size_mb,
            "tmp_mb": self.tmp_mb,
            "cpu_seconds": self.cpu_seconds,
        }


def _capped(kind: int, value: int) -> int:
    """``value``, or the hard limit of ``kind`` this process has when that is lower (a user's
    own ``ulimit -H``): the sandbox narrows what the user allowed, never asks for more."""
    try:
        hard = resource.getrlimit(kind)[1]
    except (OSError, ValueError):
        return value
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


_MAX_PROCESSES = re.compile(r"^Max processes\s+(\d+)\s+(\d+)", re.MULTILINE)


@functools.cache
def processes_option(shell: str = "/bin/sh") -> str | None:
    """The option of ``shell``'s ``ulimit`` that sets ``RLIMIT_NPROC`` (``-u`` in bash and
    zsh, ``-p`` in dash, BusyBox and mksh), found by asking the kernel what each one set
    (``/proc/self/limits`` of a process it starts); ``None`` when neither does."""
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    value = 4093 if hard == resource.RLIM_INFINITY or hard > 4094 else max(hard - 1, 1)
    for option in ("-u", "-p"):
        try:
            done = subprocess.run(
                [shell, "-c", f"ulimit {option} {value} && exec cat /proc/self/limits"],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
            )
        except (OSError, subprocess.SubprocessError):
            return None
        found = _MAX_PROCESSES.search(done.stdout) if done.returncode == 0 else None
        if found is not None and found.groups() == (str(value), str(value)):
            return option
    return None


_SIGXCPU_EXIT = 128 + 24
_SIGXFSZ_EXIT = 128 + 25
_SIGKILL_EXIT = 128 + 9
_MEMORY = re.compile(r"MemoryError|Cannot allocate memory|std::bad_alloc|out of memory", re.I)
_FORK = re.compile(
    # bash, Python, a full pids cgroup at the start; bwrap making the command's process; dash
    r"(fork|retry|clone|spawn|new namespace)[^\n]*Resource temporarily unavailable|Cannot fork",
    re.I,
)
_NO_SPACE = re.compile(r"No space left on device")
_TOO_LARGE = re.compile(r"File too large")


def explain_limit(code: int | None, output: str, limits: ResourceLimits) -> str | None:
    """Which of ``limits`` a failed command (exit ``code``, ``None`` if killed after its
    timeout; its ``output``) ran into, with the value and the settings key that raises it;
    ``None`` when nothing shows a limit."""

    def said(what: str, key: str, value: str) -> str:
        return f"it hit the sandbox's {what} limit ({value}); {_SETTINGS_HINT.format(key=key)}"

    if code == _SIGXFSZ_EXIT or _TOO_LARGE.search(output):
        return said("file size", "file_size_mb", f"{limits.file_size_mb} MiB per file")
    if code == _SIGXCPU_EXIT:
        return said("CPU time", "cpu_seconds", f"{limits.cpu_seconds} s per process")
    if _FORK.search(output):
        return said("process", "processes", f"{limits.processes} at once")
    if _MEMORY.search(output):
        return said("memory", "memory_mb", f"{limits.memory_mb} MiB per process")
    if _NO_SPACE.search(output):
        return said("/tmp size", "tmp_mb", f"{limits.tmp_mb} MiB for /tmp, and for /dev/shm") + (
            " (or the workspace's disk is full)"
        )
    if code in (_SIGKILL_EXIT, -9):  # the kernel kills a process past the memory cgroup
        together = f"{limits.memory_mb} MiB for its processes together"
        return "it was killed (SIGKILL): probably " + said("memory", "memory_mb", together)
    return None


def _cgroup_mounts() -> list[tuple[Path, frozenset[str]]]:
    """Cgroup hierarchies that can bound processes or memory, as (mount point, the
    controllers a child cgroup gets there): v1 ones with ``pids`` or ``memory``, and v2 whose
    root cgroup hands those to its children."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        point = Path(fields[4].replace("\\040", " "))
        controllers = set()
        if tail[0] == "cgroup":
            controllers = set(tail[2].split(","))
        elif tail[0] == "cgroup2":
            with contextlib.suppress(OSError):
                controllers = set((point / "cgroup.subtree_control").read_text().split())
        if wanted := controllers & {"pids", "memory"}:
            found.append((point, frozenset(wanted)))
    return found


@frozen
class Cgroups:
    """The cgroups the commands of a sandbox run in, made by :func:`command_cgroups`."""

    files: tuple[Path, ...]
    """The files written ``0`` to, to join them (one per hierarchy): ``tasks`` in cgroup v1
    (moves the writing thread alone, without waiting for the other processes of the
    machine: :meth:`start_in`), else ``cgroup.procs`` (a launcher ``sh`` joins)."""
    controllers: frozenset[str]
    """What they bound: ``pids`` (processes at once), ``memory`` (all memory of the
    commands' processes together: heap, shared memory, tmpfs files, page cache)."""
    tcp: bool = False
    """Whether the memory cgroup bounds socket buffers (TCP, UDP) too: always in cgroup v2;
    in v1 only by a limit of their own (``memory.kmem.tcp.limit_in_bytes``, as large
    again, which counts UDP's too)."""
    processes: int = 0
    """The processes the commands may have at once (``pids.max``; 0: no ``pids`` cgroup).
    The thread of :meth:`start_in` raises it by one for itself once it has joined, so the
    commands keep all of them however they were started."""

    @property
    def by_thread(self) -> bool:
        """Whether a thread can join them alone: every one is a cgroup v1 hierarchy
        (``tasks``); cgroup v2 moves whole processes."""
        return all(f.name == "tasks" for f in self.files)

    def start_in(self, start: Callable[[], _T]) -> _T:
        """``start()`` called on a thread of this process that joined the cgroups (needs
        :attr:`by_thread`): a process is born in the cgroups of the thread that starts it,
        so none has to join them. Writing ``0`` moves that thread alone, without the
        kernel's lock on every process's cgroups; the agent stays where it was (its heap
        is charged to its own cgroup, and the kernel picks whom to kill past the memory
        limit among the cgroup's processes, not its threads). Blocks until ``start``
        returns.

        Raises:
            OSError: a cgroup cannot be joined, or the thread cannot be started (``start``
                is not called).
        """
        with _STARTERS_LOCK:
            jobs, thread = _STARTERS.get(self, (queue.SimpleQueue(), None))
            if thread is None or not thread.is_alive():  # first start, or one after exit
                thread = threading.Thread(
                    target=_starter, args=(self, jobs), name="agentfsm-cgroups", daemon=True
                )
                try:
                    thread.start()
                except RuntimeError as error:  # no thread to be had (a limit, no memory)
                    raise OSError(
                        errno.EAGAIN, f"the command did not run: cannot start a thread: {error}"
                    ) from None
                _STARTERS[self] = jobs, thread
                # Runs before the cgroups are removed at exit (made before, so removed after).
                atexit.register(_stop, jobs, thread, os.getpid())
        started: Future[_T] = Future()
        jobs.put((start, started))
        return started.result()


_Jobs = queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None]
_STARTERS: dict[Cgroups, tuple[_Jobs, threading.Thread]] = {}
_STARTERS_LOCK = threading.Lock()


def _fresh_lock() -> None:
    """In a forked child: a lock of its own (one another thread of the parent held at the
    fork stays held in the child forever); the child starts its own thread in its own
    cgroups."""
    global _STARTERS_LOCK
    _STARTERS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock)


def _starter(cgroups: Cgroups, jobs: _Jobs) -> None:
    """The thread of :meth:`Cgroups.start_in`: it joins the cgroups at its first start and
    stays in them until this process exits (:func:`_stop`). A daemon thread, not an
    executor's: the processes it started die with it (bwrap's ``--die-with-parent``), so it
    must not end with the main thread while other threads still run commands."""
    joined = False
    while (job := jobs.get()) is not None:
        start, started = job
        try:
            if not joined:
                for file in cgroups.files:
                    try:
                        file.write_text("0")
                    except OSError as error:
                        why = error.strerror or error
                        raise OSError(
                            f"the command did not run: cannot join the cgroup {file}: {why}"
                        ) from None
                joined = True
                _make_room(cgroups)
            try:
                process = start()
            except BlockingIOError:
                raise BlockingIOError(
                    errno.EAGAIN,
                    "the command did not run (fork: Resource temporarily unavailable): the "
                    "commands running at once hold every process their pids cgroup allows",
                ) from None
            started.set_result(process)
        except BaseException as error:  # handed to the caller
            started.set_exception(error)


def _make_room(cgroups: Cgroups) -> None:
    """Raise ``pids.max`` by one for the thread of :meth:`Cgroups.start_in` that joined, in
    the process that made the cgroups only: a forked child's thread in its parent's takes
    one of their places while it lives, instead of leaving them one more for good."""
    for file in cgroups.files:
        owner = _OWNER.match(file.parent.name)
        made_here = owner is not None and int(owner.group(1)) == os.getpid()
        if cgroups.processes and made_here and (file.parent / "pids.max").exists():
            with contextlib.suppress(OSError):  # else one fewer, never more
                (file.parent / "pids.max").write_text(str(cgroups.processes + 1))


def _stop(jobs: _Jobs, thread: threading.Thread, owner: int) -> None:
    """At exit, end the thread of :meth:`Cgroups.start_in` (in the process that started it),
    so that its cgroups are empty when they are removed."""
    if owner == os.getpid():
        jobs.put(None)
        thread.join(1)


_TCP_V1 = "memory.kmem.tcp.limit_in_bytes"
_MEMORY_FILES = {
    # (v1, v2): the limit, then swap (memory and swap together in v1, swap alone in v2)
    "memory.limit_in_bytes": "{bytes}",
    "memory.memsw.limit_in_bytes": "{bytes}",
    "memory.max": "{bytes}",
    "memory.swap.max": "0",
    # v1 counts socket buffers (TCP, UDP, loopback ones too) only under a limit of their own
    _TCP_V1: "{bytes}",
}
_CGROUPS: dict[tuple[int, int, int], Cgroups | None] = {}


def _remove(folder: Path, owner: int | None = None) -> None:
    """Remove ``folder`` (a cgroup), only in the process ``owner`` that made it (a forked
    child that ends leaves its parent's alone), waiting up to a second for its last thread
    to leave: the thread that started the commands is still ending when Python has joined
    it."""
    if owner is not None and owner != os.getpid():
        return
    for _ in range(100):
        try:
            folder.rmdir()
        except OSError as error:
            if error.errno == errno.EBUSY:
                time.sleep(0.01)
                continue
        return


def _took(folder: Path, name: str, value: int) -> bool:
    with contextlib.suppress(OSError):
        return (folder / name).read_text().strip() == str(value)
    return False


def _make(
    folder: Path, controllers: frozenset[str], limits: ResourceLimits
) -> tuple[Path, bool] | None:
    """Make ``folder`` (a cgroup) and set its limits; the file to join it by and whether
    socket buffers are bounded, ``None`` when this is not allowed."""
    tcp = False
    try:
        folder.mkdir(exist_ok=True)
        by_thread = (folder / "tasks").exists()
        if "pids" in controllers:
            (folder / "pids.max").write_text(str(limits.processes))
        if "memory" in controllers:
            for name, value in _MEMORY_FILES.items():
                if (folder / name).exists():
                    with contextlib.suppress(OSError):  # swap not accounted here: no file
                        (folder / name).write_text(value.format(bytes=limits.memory_mb << 20))
            size = limits.memory_mb << 20
            if not any(_took(folder, n, size) for n in ("memory.limit_in_bytes", "memory.max")):
                raise OSError("the memory limit did not take")
            tcp = any(_took(folder, n, size) for n in ("memory.max", _TCP_V1))
    except OSError:
        _remove(folder)
        return None
    atexit.register(_remove, folder, os.getpid())
    join = folder / "tasks" if by_thread else folder / "cgroup.procs"
    return join, tcp


_OWNER = re.compile(r"agentfsm-(\d+)-")


def _remove_orphans(mount: Path) -> None:
    """Remove the empty cgroups of processes that are gone: one that ended without its
    atexit handlers (``os._exit``, as ``multiprocessing``'s forked children end; a kill)
    could not remove its own. A cgroup still holding a process is not removed (the kernel
    refuses), nor is one whose maker is alive."""
    with contextlib.suppress(OSError):
        for folder in mount.glob("agentfsm-*-*"):
            owner = _OWNER.match(folder.name)
            if owner is not None and not Path(f"/proc/{owner.group(1)}").exists():
                with contextlib.suppress(OSError):
                    folder.rmdir()


def command_cgroups(limits: ResourceLimits) -> Cgroups | None:
    """The cgroups bounding the processes (``pids.max``) and the memory (``memory.max``,
    swap included where the kernel accounts it) of commands under ``limits``: made once per
    process and pair of values, shared by its commands (removed at exit when empty, or by
    the next process making its own when this one ended without its exit handlers);
    ``None`` where none can be made (no such hierarchy, or no right to write it: a user
    that is not root, usually)."""
    key = (os.getpid(), limits.processes, limits.memory_mb)
    if key not in _CGROUPS:
        files: list[Path] = []
        bound: set[str] = set()
        tcp = False
        for mount, controllers in _cgroup_mounts():
            if controllers <= bound:
                continue
            _remove_orphans(mount)
            made = _make(mount / f"agentfsm-{key[0]}-{key[1]}-{key[2]}", controllers, limits)
            if made is not None:
                files.append(made[0])
                bound |= controllers
                tcp = tcp or made[1]
        processes = limits.processes if "pids" in bound else 0
        _CGROUPS[key] = Cgroups(tuple(files), frozenset(bound), tcp, processes) if files else None
    return _CGROUPS[key]
