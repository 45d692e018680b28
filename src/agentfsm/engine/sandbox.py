"""The OS sandbox for every process the agent starts: bubblewrap (Linux namespaces).

It lives beside :mod:`~agentfsm.engine.process` so that policies (the verify gate) can find
it as the tools do; users import it from :mod:`agentfsm.adapters.tools`.

Policy of :class:`BubblewrapSandbox`: a fresh mount namespace where the system (``/usr``,
``/etc``, ``/lib``…, the Python interpreter) is read-only, the workspace root is writable,
``/tmp`` is a private tmpfs (also holding ``HOME``), and nothing else of the machine exists
(no home folder, no other project, no ``/run``). The protected paths of the root
(``.agentfsm``…) are hidden behind empty read-only mounts, even when they do not exist yet.
No network namespace is shared unless ``allow_network``; capabilities are dropped and no
further user namespace may be created. The command runs in its own PID namespace: when it
exits or is killed, every process it started (``nohup``, ``setsid``, daemons) is killed
with it. :func:`detect_sandbox` probes once per process that bubblewrap works here.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .process import CommandSandbox, SandboxUnavailable, scrubbed_environ

__all__ = ["PROTECTED_DIR", "BubblewrapSandbox", "detect_sandbox"]

PROTECTED_DIR = ".agentfsm"
"""The agent's own folder in a workspace (settings): out of the model's reach."""

SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Read-only in the sandbox (mirrored as symlinks where they are symlinks, merged ``/usr``)."""
SYSTEM_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssh/ssh_host_*_key",
    "/etc/ssl/private",
)
"""Hidden inside ``/etc``: a sandbox started by root still owns root's files."""
SANDBOX_TMP = "/tmp"
SANDBOX_HOME = "/tmp/home"

INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)"
USERNS_HINT = (
    "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 / "
    "kernel.apparmor_restrict_unprivileged_userns=0)"
)
OPT_OUT_HINT = "or pass --no-sandbox to run without one (unsafe)"


def _unavailable(problem: str, *hints: str) -> SandboxUnavailable:
    return SandboxUnavailable(
        f"No OS sandbox for the agent's commands: {problem}. "
        f"To fix it: {'; '.join(hints)}; {OPT_OUT_HINT}."
    )


@functools.lru_cache(maxsize=8)
def _bwrap_version(bwrap: str) -> str | None:
    try:
        done = subprocess.run(
            [bwrap, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"\d+(?:\.\d+)+", done.stdout)
    return found.group(0) if found else None


def _inside(path: Path, folders: Iterable[str | Path]) -> bool:
    return any(path == Path(f) or path.is_relative_to(f) for f in folders)


def _absolute(paths: Iterable[str | Path], what: str) -> tuple[Path, ...]:
    resolved = []
    for path in paths:
        if not Path(path).is_absolute():
            raise ValueError(f"{what} must be absolute paths, not {str(path)!r}")
        resolved.append(Path(os.path.normpath(path)))
    return tuple(resolved)


class BubblewrapSandbox:
    """Runs commands under ``bwrap``: see the module's docstring for the policy.

    ``read_paths`` and ``write_paths`` (absolute) widen it; ``protected`` names paths
    relative to ``root`` that the command can neither read nor change.
    """

    name = "bubblewrap"

    def __init__(
        self,
        root: str | Path,
        *,
        allow_network: bool = False,
        read_paths: Sequence[str | Path] = (),
        write_paths: Sequence[str | Path] = (),
        protected: Sequence[str] = (PROTECTED_DIR,),
        bwrap: str = "bwrap",
    ) -> None:
        self.root = Path(root).resolve()
        if self.root == Path("/"):
            raise ValueError("the workspace root of a sandbox cannot be /")
        self.allow_network = allow_network
        self.read_paths = _absolute(read_paths, "read_paths")
        self.write_paths = _absolute(write_paths, "write_paths")
        self.protected = tuple(self._protected_path(p) for p in dict.fromkeys(protected))
        self.bwrap = shutil.which(bwrap) or bwrap
        self.version = _bwrap_version(self.bwrap)

    def _protected_path(self, relative: str) -> Path:
        path = Path(os.path.normpath(self.root / relative))
        if path == self.root or not path.is_relative_to(self.root):
            raise ValueError(f"protected path {relative!r} is not inside {self.root}")
        return path

    def _interpreter(self) -> list[Path]:
        """The running Python's prefixes, unless the system dirs or the root hold them."""
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
        found = []
        for prefix in sorted(prefixes):
            path = Path(prefix).resolve()
            if not _inside(path, (*SYSTEM_DIRS, self.root)) and path != Path("/"):
                found.append(path)
        return found

    def _system_secrets(self) -> list[str]:
        return sorted({p for pattern in SYSTEM_SECRETS for p in glob.glob(pattern)})

    def _flags(self) -> list[str]:
        flags = ["--unshare-all", "--unshare-user"]
        if self.version is not None and tuple(map(int, self.version.split(".")[:2])) >= (0, 8):
            flags.append("--disable-userns")
        if self.allow_network:
            flags.append("--share-net")
        # The command is the PID namespace's init: bwrap then returns only once the namespace
        # is gone (its own init would report the exit code first and be reaped by no one).
        return [*flags, "--as-pid-1", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]

    def _mounts(self) -> list[str]:
        args = ["--proc", "/proc", "--dev", "/dev", "--tmpfs", SANDBOX_TMP, "--dir", SANDBOX_HOME]
        for folder in SYSTEM_DIRS:
            if os.path.islink(folder):
                args += ["--symlink", os.readlink(folder), folder]
            elif os.path.isdir(folder):
                args += ["--ro-bind", folder, folder]
        for secret in self._system_secrets():
            if os.path.isdir(secret):
                args += ["--tmpfs", secret, "--remount-ro", secret]
            else:
                args += ["--ro-bind", "/dev/null", secret]
        for path in (*self._interpreter(), *self.read_paths):
            args += ["--ro-bind-try", str(path), str(path)]
        resolv = Path("/etc/resolv.conf")
        if self.allow_network and resolv.is_symlink():
            target = resolv.resolve()
            if not _inside(target, SYSTEM_DIRS):
                args += ["--ro-bind-try", str(target), str(target)]
        args += ["--bind", str(self.root), str(self.root)]
        for path in self.write_paths:
            args += ["--bind-try", str(path), str(path)]
        for path in self.protected:
            if not any(path.is_relative_to(other) for other in self.protected if other != path):
                args += self._protect(path)
        return [*args, "--remount-ro", "/"]

    def _protect(self, path: Path) -> list[str]:
        args = []
        # Folders between the root and a protected path become mount points: they cannot be
        # renamed away (and the protected path recreated in their place).
        for ancestor in reversed(path.relative_to(self.root).parents[:-1]):
            folder = self.root / ancestor
            if folder.is_dir() and not folder.is_symlink():
                args += ["--bind", str(folder), str(folder)]
        if path.exists() and not path.is_dir():
            return [*args, "--ro-bind", "/dev/null", str(path)]
        # A folder, or nothing yet: an empty read-only tmpfs (bubblewrap creates the folder).
        return [*args, "--tmpfs", str(path), "--remount-ro", str(path)]

    def argv(self, command: str, cwd: Path) -> list[str]:
        """The ``bwrap`` command line that runs ``sh -c command`` in ``cwd``."""
        return [
            self.bwrap,
            *self._flags(),
            *self._mounts(),
            "--chdir",
            str(cwd),
            "--",
            "/bin/sh",
            "-c",
            command,
        ]

    def environment(self) -> dict[str, str]:
        """This process's environment without secrets, with a private ``HOME`` and ``TMPDIR``."""
        return {**scrubbed_environ(), "HOME": SANDBOX_HOME, "TMPDIR": SANDBOX_TMP}

    def command(self, command: str, cwd: Path) -> tuple[list[str], Mapping[str, str]]:
        return self.argv(command, cwd), self.environment()

    def describe(self) -> dict[str, Any]:
        system = [f for f in SYSTEM_DIRS if os.path.lexists(f)]
        return {
            "mechanism": "bubblewrap",
            "version": self.version,
            "network": self.allow_network,
            "write": [str(self.root), *map(str, self.write_paths), f"private {SANDBOX_TMP}"],
            "read": [*system, *map(str, self._interpreter()), *map(str, self.read_paths)],
            "hidden": [*map(str, self.protected), *self._system_secrets()],
            "home": SANDBOX_HOME,
            "processes": "own PID namespace: every process dies with the call",
        }

    def __repr__(self) -> str:
        return f"BubblewrapSandbox({str(self.root)!r}, allow_network={self.allow_network})"


_PROBES: dict[tuple[str, bool], str | None] = {}
_PROBE_LOCK = threading.Lock()


def _probe(bwrap: str, allow_network: bool) -> str | None:
    """Why ``bwrap`` fails here with these namespaces (``None``: it works); run once."""
    key = (bwrap, allow_network)
    with _PROBE_LOCK:
        if key not in _PROBES:
            with tempfile.TemporaryDirectory(prefix="agentfsm-probe-") as folder:
                sandbox = BubblewrapSandbox(folder, allow_network=allow_network, bwrap=bwrap)
                argv, env = sandbox.command("true", sandbox.root)
                try:
                    done = subprocess.run(
                        argv,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        capture_output=True,
                        text=True,
                        timeout=30,
                        check=False,
                    )
                except (OSError, subprocess.SubprocessError) as error:
                    _PROBES[key] = str(error)
                else:
                    lines = done.stderr.strip().splitlines()
                    why = lines[0] if lines else f"exit code {done.returncode}"
                    _PROBES[key] = None if done.returncode == 0 else why
        return _PROBES[key]


def detect_sandbox(
    root: str | Path,
    *,
    allow_network: bool = False,
    read_paths: Sequence[str | Path] = (),
    write_paths: Sequence[str | Path] = (),
    protected: Sequence[str] = (PROTECTED_DIR,),
    bwrap: str = "bwrap",
) -> CommandSandbox:
    """The OS sandbox that works on this machine, for commands run in ``root``.

    Raises :class:`SandboxUnavailable` saying what to install or enable when none does.
    """
    if not sys.platform.startswith("linux"):
        raise _unavailable(f"no sandbox is implemented for {sys.platform} yet")
    found = shutil.which(bwrap)
    if found is None:
        raise _unavailable(f"{bwrap!r} (bubblewrap) was not found", INSTALL_HINT)
    failure = _probe(found, allow_network)
    if failure is not None:
        hints = [USERNS_HINT]
        if "unknown option" in failure.lower():
            hints.insert(0, "upgrade bubblewrap (0.8 or newer)")
        raise _unavailable(f"bubblewrap ({found}) does not work here: {failure}", *hints)
    return BubblewrapSandbox(
        root,
        allow_network=allow_network,
        read_paths=read_paths,
        write_paths=write_paths,
        protected=protected,
        bwrap=found,
    )
