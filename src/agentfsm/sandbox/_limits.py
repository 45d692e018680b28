"""Resource limits of one sandboxed command, and how a failure shows that one was hit.

Each limit bounds one command (processes: each call, see below): ``prlimit`` sets them as
hard and soft limits inside the sandbox, where the command cannot raise them (it has no
capabilities). The private ``/tmp`` is a tmpfs of ``tmp_mb``.

``RLIMIT_NPROC`` counts the processes of the command's user in its user namespace, but the
kernel never applies it to root: when the agent runs as root, the processes are bounded by
a ``pids`` cgroup of the agent process instead (one per limit value, shared by the calls of
that process), when the machine lets root create one; else they are not bounded and
:func:`pids_cgroup` returns ``None`` (the sandbox says so in its description).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
from pathlib import Path

from attrs import field, frozen

__all__ = ["CPU_GRACE_SECONDS", "ResourceLimits", "explain_limit", "pids_cgroup"]

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
    """Processes and threads at once (``RLIMIT_NPROC``; a ``pids`` cgroup under root)."""
    memory_mb: int = field(default=2048, validator=_positive)
    """Data (heap) of each process, in MiB (``RLIMIT_DATA``: address space reserved but not
    used, as V8 and the JVM do, is not counted)."""
    file_size_mb: int = field(default=512, validator=_positive)
    """Largest file a process may write, in MiB (``RLIMIT_FSIZE``)."""
    tmp_mb: int = field(default=512, validator=_positive)
    """Size of the private ``/tmp`` (which holds ``HOME``), in MiB."""
    cpu_seconds: int = field(default=600, validator=_positive)
    """CPU time of each process, in seconds (``RLIMIT_CPU``)."""

    def prlimit_args(self) -> list[str]:
        """The ``prlimit`` options that set these limits (hard and soft)."""
        mib = 1 << 20
        values = {
            "nproc": self.processes,
            "data": self.memory_mb * mib,
            "fsize": self.file_size_mb * mib,
        }
        # CPU: SIGXCPU at the limit (its exit status names it), SIGKILL a few seconds on.
        cpu = f"--cpu={self.cpu_seconds}:{self.cpu_seconds + CPU_GRACE_SECONDS}"
        return [*(f"--{name}={value}:{value}" for name, value in values.items()), cpu]

    def describe(self) -> dict[str, int]:
        """The limits as JSON."""
        return {
            "processes": self.processes,
            "memory_mb": self.memory_mb,
            "file_size_mb": self.file_size_mb,
            "tmp_mb": self.tmp_mb,
            "cpu_seconds": self.cpu_seconds,
        }


_SIGXCPU_EXIT = 128 + 24
_SIGXFSZ_EXIT = 128 + 25
_MEMORY = re.compile(r"MemoryError|Cannot allocate memory|std::bad_alloc|out of memory", re.I)
_FORK = re.compile(r"(fork|retry|clone|spawn)[^\n]*Resource temporarily unavailable", re.I)
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
        return said("/tmp size", "tmp_mb", f"{limits.tmp_mb} MiB") + (
            " (or the workspace's disk is full)"
        )
    return None


def _cgroup_mounts() -> list[Path]:
    """Mount points of a ``pids`` cgroup hierarchy (v1 with ``pids``, or v2 whose root
    cgroup hands ``pids`` to its children)."""
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
        if tail[0] == "cgroup" and "pids" in tail[2].split(","):
            found.append(point)
        elif tail[0] == "cgroup2":
            with contextlib.suppress(OSError):
                if "pids" in (point / "cgroup.subtree_control").read_text().split():
                    found.append(point)
    return found


_CGROUPS: dict[tuple[int, int], Path | None] = {}


def _remove(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()


def pids_cgroup(limit: int) -> Path | None:
    """The ``cgroup.procs`` file of a ``pids`` cgroup bounded to ``limit`` processes, made
    once per process and limit (removed at exit when empty); ``None`` where none can be
    made (no such hierarchy, or no right to write it)."""
    key = (os.getpid(), limit)
    if key not in _CGROUPS:
        _CGROUPS[key] = None
        for mount in _cgroup_mounts():
            folder = mount / f"agentfsm-{os.getpid()}-{limit}"
            try:
                folder.mkdir(exist_ok=True)
                (folder / "pids.max").write_text(str(limit))
            except OSError:
                _remove(folder)
                continue
            atexit.register(_remove, folder)
            _CGROUPS[key] = folder / "cgroup.procs"
            break
    return _CGROUPS[key]
