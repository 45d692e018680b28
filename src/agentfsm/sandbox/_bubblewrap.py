"""The OS sandbox for every process the agent starts: bubblewrap (Linux namespaces).

It lives in the leaf package :mod:`agentfsm.sandbox`, beside the process runner, so that
the engine, the policies (the verify gate) and the tools all find it in one place; users
import it from :mod:`agentfsm.sandbox` (or :mod:`agentfsm.adapters.tools`).

Policy of :class:`BubblewrapSandbox`: a fresh mount namespace where the system (``/usr``,
``/etc``, ``/lib``…, the Python interpreter) is read-only, the workspace root is writable,
``/tmp`` and ``/dev/shm`` are private tmpfs of ``tmp_mb`` (``/tmp`` also holds ``HOME``),
the rest of ``/dev`` is read-only, and nothing else of the machine exists (no home folder,
no other project, no ``/run``), except the user's toolchains, read-only: the folders
``PATH`` needs and the base interpreters of the workspace's virtual environments
(:mod:`~agentfsm.sandbox._toolchains`), never a home or a secret folder. What is hidden
(:mod:`~agentfsm.sandbox._hidden`: the home's secrets beneath anything shown, the root-only
entries of ``/etc``) and the protected paths of the root (``.agentfsm``…) lie behind empty
read-only mounts, even when a protected path does not exist yet; every hiding mount comes
after the paths the settings open, so widening reads or writes never uncovers it. What the
model can write (the root, the write paths) is never ``/``, a home or a folder holding one,
and never holds or lies in anything hidden (:func:`~agentfsm.sandbox._hidden.reach`), so it
can neither rename the folders above a hidden entry nor create one; the folders above the
agent's own code and the protected paths in it are mount points, which cannot be renamed.
No network namespace is shared unless ``allow_network`` (and then a Landlock scope keeps
the command from the host's abstract unix sockets, :mod:`~agentfsm.sandbox._landlock`,
where the kernel has it); capabilities are dropped and no
further user namespace may be created. The command runs in its own PID namespace: when it
exits or is killed, every process it started (``nohup``, ``setsid``, daemons) is killed
with it. :func:`detect_sandbox` probes once per process that bubblewrap works here.

Beyond that: the agent's own interpreter, site-packages and package stay read-only even
inside the workspace; a seccomp filter (:mod:`~agentfsm.sandbox._seccomp`) refuses setuid
and setgid bits; the environment is an allow-list
(:func:`~agentfsm.sandbox._process.sandbox_environ`); each command runs under
:class:`~agentfsm.sandbox._limits.ResourceLimits`, in cgroups where they can be made.

A call costs what bubblewrap costs: the mounts are worked out once (:meth:`plan`) and again
only when what they depend on changes, and a call starts bwrap and nothing else: bwrap reads
the filter from a descriptor of its own, the command's ``sh`` sets the limits with its own
``ulimit`` before the command's text, and the cgroups (cgroup v1) are joined by the thread
of this process that starts the commands, so each is born in them. Only where ``ulimit``
cannot bound the processes does ``prlimit`` run before ``sh``, and only to join cgroup v2
(which moves whole processes) does a launcher ``sh`` start bwrap.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import frozen

from ._hidden import (
    check_workspace,
    hidden_in,
    hidden_system,
    homes,
    reach,
    readable_without_capabilities,
)
from ._install_paths import agent_install_paths
from ._landlock import SCOPE_SCRIPT, scopes_abstract_sockets
from ._limits import Cgroups, ResourceLimits, command_cgroups, processes_option
from ._missing import not_found_note
from ._mounts import SANDBOX_HOME, SANDBOX_TMP, SYSTEM_DIRS, inside, mount_options
from ._places import Places
from ._process import (
    ALLOWED_ENV,
    CommandSandbox,
    Launch,
    SandboxUnavailable,
    env_names,
    sandbox_environ,
)
from ._seccomp import setuid_filter, setuid_filter_fd, setuid_filter_path
from ._toolchains import TOOLCHAIN_ENV, ToolchainView, toolchain_view, venv_signature

__all__ = ["PROTECTED_DIR", "BubblewrapSandbox", "ResourceLimits", "detect_sandbox"]

PROTECTED_DIR = ".agentfsm"
"""The agent's own folder in a workspace (settings): out of the model's reach."""

MIN_BWRAP = (0, 8)
"""The oldest bubblewrap accepted (``--disable-userns`` came in 0.8)."""
PLAN_ENV = (
    "PATH",
    "HOME",
    "HISTFILE",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    *TOOLCHAIN_ENV,
)
"""The variables of this process the mounts depend on: a change of one recomputes them."""

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
"""Where ``bwrap`` and ``prlimit`` named without a folder are looked for: never ``PATH``,
which may hold a folder the model writes (a project's activated ``.venv/bin``), where a
planted ``bwrap`` would run unsandboxed at the next start."""

INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap)"
USERNS_HINT = (
    "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 / "
    "kernel.apparmor_restrict_unprivileged_userns=0)"
)
OPT_OUT_HINT = "or pass --no-sandbox to run without one (unsafe)"
UPGRADE_HINT = "upgrade bubblewrap (0.8 or newer)"
PRLIMIT_HINT = "install prlimit (Debian/Ubuntu: apt-get install util-linux)"
# Joins the cgroups named before "--", then runs bwrap with the setuid filter (the file $0) on
# descriptor 3.
_LAUNCH = (
    'f=$0; while [ "$1" != -- ]; do if ! echo 0 > "$1"; then '
    'echo "agentfsm: cannot join the cgroup $1" >&2; exit 126; fi; shift; done; shift; '
    'exec "$@" 3<"$f"'
)


def _program(name: str) -> str | None:
    """``name`` as a path to run: as given when it names a folder, else found in
    :data:`SYSTEM_PATH`; ``None`` when it is not there."""
    return shutil.which(name, path=None if "/" in name else SYSTEM_PATH)


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


def _older(version: str | None) -> bool:
    return version is not None and tuple(map(int, version.split(".")[:2])) < MIN_BWRAP


def _absolute(paths: Iterable[str | Path], what: str, *, writable: bool) -> tuple[Path, ...]:
    """``paths`` normalized; refused: a relative path, ``/``, a folder holding a home (by
    any name) and, for a writable one, whatever may not be a workspace
    (:func:`~agentfsm.sandbox._hidden.reach`: the model could rename what it holds)."""
    resolved = []
    places = Places()
    for path in paths:
        if not Path(path).is_absolute():
            raise ValueError(f"{what} must be absolute paths, not {str(path)!r}")
        normal = Path(os.path.normpath(path))
        if normal.parent == normal:
            raise ValueError(f"{what} cannot hold / (it would open the whole machine)")
        why = reach(normal, os.environ) if writable else None
        if why is not None:
            raise ValueError(f"{what} cannot be {why}; name the folders you need")
        for home in homes(os.environ):
            if places.holds(normal, [places.place(home)]):
                raise ValueError(
                    f"{what} cannot hold the home folder {home} (it would show all of it: "
                    "keys, credentials, the agent's own settings); name the folders you need"
                )
        resolved.append(normal)
    return tuple(resolved)


def _present(paths: Iterable[Path]) -> tuple[bool, ...]:
    return tuple(os.path.exists(p) for p in paths)


@frozen
class _Plan:
    """What the sandbox mounts, worked out once and kept while what it depends on holds."""

    key: tuple[object, ...]
    """The settings, variables and workspace state it was worked out from."""
    toolchains: ToolchainView
    watched: tuple[Path, ...]
    """Where the home's secrets are or would be beneath something shown (not beneath
    another of them; :func:`~agentfsm.sandbox._hidden.hidden_in`)."""
    present: tuple[bool, ...]
    """Which of :attr:`watched` existed: one that appears (a secret the user's program
    writes into a folder shown) makes the plan worked out again."""
    home_secrets: tuple[tuple[Path, bool], ...]
    """The home's secrets that exist beneath something shown, as (path, is a folder)."""
    system: tuple[tuple[str, bool], ...]
    """The machine's hidden entries (:func:`~agentfsm.sandbox._hidden.hidden_system`)."""
    mounts: tuple[str, ...]
    """bubblewrap's options from the namespaces to the read-only ``/``."""


class BubblewrapSandbox:
    """Runs commands under ``bwrap`` (what it shows, hides and bounds: docs/security.md,
    "The OS sandbox").

    ``root`` must be a workspace (not ``/``, a home, a folder holding one, nor a folder
    holding or lying in a hidden entry: :func:`~agentfsm.sandbox.check_workspace`).
    ``read_paths`` and ``write_paths`` (absolute; not ``/``, a home or a folder holding one;
    a write path is checked as the root is) widen it;
    ``protected`` names paths relative to ``root`` that the command can neither read nor
    change; ``bwrap`` is a path, or a name looked for in the system folders
    (``/usr/local/bin``, ``/usr/bin``, ``/bin`` and their ``sbin``; never in ``PATH``,
    which may hold a folder the model writes); ``env`` names more variables the
    command gets (an allow-list); ``limits`` bounds each command; ``install_paths`` are
    the folders of the agent's own code (default: the interpreter's prefixes, the
    site-packages folders and agentfsm's own folder), read-only where they lie inside the
    root or a write path. ``toolchains``
    (default on) shows the user's toolchains read-only (read from this process's ``PATH``
    and environment; docs/security.md, "Your toolchains") and gives commands the variables
    that locate them (``CARGO_HOME``, ``RUSTUP_HOME``, ``PYENV_ROOT``…).

    The mounts are worked out at the first command and kept: they are worked out again
    when an attribute above, ``PATH``, ``HOME``, the ``XDG_*`` folders or a toolchain's
    variable, or the workspace's virtual environments change, or when a home secret
    appears or goes beneath something shown.

    Raises:
        ValueError: ``root``, a read or a write path is refused (the message says why).
        SandboxUnavailable: bubblewrap is older than 0.8, no setuid filter exists for this
            architecture, or ``prlimit`` is missing where the shell's ``ulimit`` cannot
            bound the processes.
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
        env: Sequence[str] = (),
        limits: ResourceLimits | None = None,
        install_paths: Sequence[str | Path] | None = None,
        toolchains: bool = True,
    ) -> None:
        self.root = check_workspace(Path(root).resolve())
        self.allow_network = allow_network
        self.read_paths = _absolute(read_paths, "read paths (sandbox.read)", writable=False)
        self.write_paths = _absolute(write_paths, "write paths (sandbox.write)", writable=True)
        self.protected = tuple(self._protected_path(p) for p in dict.fromkeys(protected))
        self.env = env_names(env)
        self.limits = ResourceLimits() if limits is None else limits
        installed = agent_install_paths() if install_paths is None else install_paths
        self.install_paths = tuple(Path(os.path.realpath(p)) for p in installed)
        self.show_toolchains = toolchains
        self.bwrap = _program(bwrap) or bwrap
        self.version = _bwrap_version(self.bwrap)
        if _older(self.version):
            raise _unavailable(
                f"bubblewrap {self.version} ({self.bwrap}) is older than 0.8: it cannot "
                "forbid new user namespaces inside the sandbox (--disable-userns)",
                UPGRADE_HINT,
            )
        try:
            setuid_filter()
        except ValueError as error:
            raise _unavailable(str(error)) from None
        self.prlimit = shutil.which("prlimit", path=SYSTEM_PATH)
        processes_option()  # asked once per process, here rather than at the first command
        if self.prlimit is None and self._processes_by_prlimit():
            raise _unavailable(
                "the shell's ulimit cannot bound the processes and prlimit (util-linux) was "
                "not found",
                PRLIMIT_HINT,
            )
        self._plan: _Plan | None = None

    def _protected_path(self, relative: str) -> Path:
        path = Path(os.path.normpath(self.root / relative))
        if path == self.root or not path.is_relative_to(self.root):
            raise ValueError(f"protected path {relative!r} is not inside {self.root}")
        return path

    @functools.cached_property
    def _interpreter(self) -> tuple[Path, ...]:
        """The running Python's prefixes, unless the system dirs or the root hold them."""
        prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
        found = []
        for prefix in sorted(prefixes):
            path = Path(prefix).resolve()
            if not inside(path, (*SYSTEM_DIRS, self.root)) and path != Path("/"):
                found.append(path)
        return tuple(found)

    @property
    def cgroups(self) -> Cgroups | None:
        """The cgroups the commands run in, bounding their processes and memory (one pair
        per process and limits); ``None`` where none can be made (not root, usually)."""
        return command_cgroups(self.limits)

    # -- the plan: what is mounted, worked out again only when what it depends on changes

    def _key(self) -> tuple[object, ...]:
        settings = (
            self.root,
            self.allow_network,
            self.read_paths,
            self.write_paths,
            self.protected,
            self.limits.tmp_mb,
            self.install_paths,
            self.show_toolchains,
        )
        environ = tuple(os.environ.get(name) for name in PLAN_ENV)
        venvs = venv_signature(self.root, os.environ) if self.show_toolchains else ()
        return (settings, environ, venvs)

    def plan(self) -> _Plan:
        """The mounts and what they show and hide, for the state of now."""
        key = self._key()
        plan = self._plan
        if plan is None or plan.key != key or plan.present != _present(plan.watched):
            with _PLAN_LOCK:
                plan = self._plan
                if plan is None or plan.key != key or plan.present != _present(plan.watched):
                    plan = self._plan = self._work_out(key)
        return plan

    def _work_out(self, key: tuple[object, ...]) -> _Plan:
        toolchains = ToolchainView((), ())
        if self.show_toolchains:
            shown: list[str | Path] = [*SYSTEM_DIRS, *self._interpreter]
            toolchains = toolchain_view(self.root, shown, writable=self.write_paths)
        watched = tuple(hidden_in(self._shown(toolchains), os.environ))
        present = _present(watched)
        secrets = tuple((p, p.is_dir()) for p, there in zip(watched, present, strict=True) if there)
        system = tuple(hidden_system())
        # What the command could not read anyway needs no mount (a mount costs each call).
        hidden = [e for e in system if readable_without_capabilities(e[0])]
        mounts = mount_options(
            root=self.root,
            tmp_mb=self.limits.tmp_mb,
            read=(*self._interpreter, *toolchains.read, *self.read_paths),
            write=self.write_paths,
            own_code=self._own_code(),
            hidden=[*hidden, *((str(p), f) for p, f in secrets)],
            protected=self.protected,
            network=self.allow_network,
        )
        return _Plan(key, toolchains, watched, present, secrets, system, tuple(mounts))

    @property
    def toolchains(self) -> ToolchainView:
        """What the sandbox shows of the user's toolchains now."""
        return self.plan().toolchains

    @property
    def home_secrets(self) -> tuple[tuple[Path, bool], ...]:
        """The home's secrets hidden beneath something shown, as (path, is a folder)."""
        return self.plan().home_secrets

    def _shown(self, toolchains: ToolchainView) -> list[Path]:
        """Everything mounted from the machine but the system folders."""
        return [
            self.root,
            *self.write_paths,
            *self.read_paths,
            *toolchains.read,
            *self._interpreter,
        ]

    def shows(self, path: str | Path) -> bool:
        """Whether a command in the sandbox sees ``path`` (resolved on this machine)."""
        plan = self.plan()
        real = Path(os.path.realpath(path))
        hidden = [p for p, _ in plan.home_secrets] + [Path(p) for p in self.protected]
        hidden += [Path(p) for p, _ in plan.system]
        if inside(real, hidden):
            return False
        system = [Path(os.path.realpath(f)) for f in SYSTEM_DIRS if os.path.lexists(f)]
        return inside(real, (*system, *self._shown(plan.toolchains)))

    def not_found_note(self, output: str) -> str | None:
        """For a command that exited 127: which command the sandbox did not find, what it
        sees of it and how to show a folder (``sandbox.read``); ``None`` when the output
        names no missing command."""
        return not_found_note(output, self.environment().get("PATH", ""), self.shows)

    def _own_code(self) -> list[Path]:
        """The agent's own code folders that the root or a write path would make writable."""
        writable = (self.root, *self.write_paths)
        return [p for p in self.install_paths if inside(p, writable)]

    def _flags(self) -> list[str]:
        flags = ["--unshare-all", "--unshare-user", "--disable-userns"]
        if self.allow_network:
            flags.append("--share-net")
        # The command is the PID namespace's init: bwrap then returns only once the namespace
        # is gone (its own init would report the exit code first and be reaped by no one).
        return [*flags, "--as-pid-1", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]

    # -- the command line

    def _pids_bound(self) -> bool:
        """Whether a ``pids`` cgroup bounds the commands' processes (then no
        ``RLIMIT_NPROC`` is set)."""
        cgroups = self.cgroups
        return cgroups is not None and "pids" in cgroups.controllers

    def _processes_by_prlimit(self) -> bool:
        """Whether ``prlimit`` sets ``RLIMIT_NPROC`` before ``sh``: where no ``pids`` cgroup
        bounds the processes and the shell's ``ulimit`` has no option for it."""
        return not self._pids_bound() and processes_option() is None

    def _shell(self, command: str) -> list[str]:
        """``sh -c command`` setting the limits first, with its own ``ulimit`` (the process
        count too, where no ``pids`` cgroup bounds it and the shell can), on the command's
        first line: the command's own line numbers stay."""
        limits = self.limits.ulimit_script(None if self._pids_bound() else processes_option())
        refuse = "{ echo 'agentfsm: cannot set the limits' >&2; exit 126; }"
        return ["/bin/sh", "-c", f"{limits} || {refuse}; {command}"]

    def argv(self, command: str, cwd: Path, *, seccomp_fd: int = 3) -> list[str]:
        """The ``bwrap`` command line that runs ``sh -c command`` in ``cwd`` under the
        limits, reading the setuid filter from descriptor ``seccomp_fd``."""
        return self._argv(self.plan(), command, cwd, seccomp_fd)

    def _argv(self, plan: _Plan, command: str, cwd: Path, seccomp_fd: int) -> list[str]:
        processes = (
            [self.prlimit or "prlimit", self.limits.prlimit_processes()]
            if self._processes_by_prlimit()
            else []
        )
        return [
            self.bwrap,
            *self._flags(),
            "--seccomp",
            str(seccomp_fd),
            *plan.mounts,
            "--chdir",
            str(cwd),
            "--",
            *processes,
            *self._scope(),
            *self._shell(command),
        ]

    def _scope(self) -> list[str]:
        """With the network shared, what runs before ``sh`` to keep the command from the
        host's abstract unix sockets (a Landlock scope), where the kernel can."""
        if not self.allow_network or not scopes_abstract_sockets():
            return []
        return [sys.executable, "-I", "-S", "-c", SCOPE_SCRIPT]

    def _unix_sockets(self) -> str:
        if not self.allow_network:
            return "the host's unreachable (own network namespace)"
        if scopes_abstract_sockets():
            return "the host's abstract sockets unreachable (Landlock scope)"
        return (
            "NOT SCOPED: the host's abstract unix sockets are reachable with the network "
            "(Landlock ABI 6, Linux 6.12, is missing)"
        )

    def _launcher(self, cgroups: Cgroups | None) -> list[str]:
        """The ``sh`` that starts bwrap for :meth:`command`: it joins ``cgroups`` (when
        there are some) and opens the setuid filter on descriptor 3."""
        files = [str(p) for p in cgroups.files] if cgroups is not None else []
        return ["/bin/sh", "-c", _LAUNCH, setuid_filter_path(), *files, "--"]

    def environment(self) -> dict[str, str]:
        """The allow-listed environment (:func:`sandbox_environ` with ``env``), with the
        variables that locate the toolchains shown, a private ``HOME`` and ``TMPDIR``."""
        return self._environment(self.plan())

    def _environment(self, plan: _Plan) -> dict[str, str]:
        return {
            **dict(plan.toolchains.env),
            **sandbox_environ(self.env),
            "HOME": SANDBOX_HOME,
            "TMPDIR": SANDBOX_TMP,
        }

    def command(self, command: str, cwd: Path) -> tuple[list[str], Mapping[str, str]]:
        """A command line that needs nothing else: a launcher ``sh`` starts bwrap (see
        :meth:`launch` for the one :func:`~agentfsm.sandbox.run_command` uses)."""
        return [*self._launcher(self.cgroups), *self.argv(command, cwd)], self.environment()

    @contextlib.contextmanager
    def launch(self, command: str, cwd: Path) -> Iterator[Launch]:
        """How :func:`~agentfsm.sandbox.run_command` starts ``sh -c command`` in ``cwd``
        with the fewest processes: bwrap itself, reading the setuid filter from a
        descriptor opened for this call (closed when the block ends), started on a thread
        that joined the cgroups where cgroup v1 lets a thread join alone; where a cgroup v2
        is to be joined, :meth:`command` (its launcher ``sh`` joins them)."""
        cgroups = self.cgroups
        if cgroups is not None and not cgroups.by_thread:
            argv, env = self.command(command, cwd)
            yield Launch(argv, env)
            return
        plan = self.plan()
        start = cgroups.start_in if cgroups is not None else None
        fd = setuid_filter_fd()
        try:
            argv = self._argv(plan, command, cwd, fd)
            yield Launch(argv, self._environment(plan), (fd,), start)
        finally:
            os.close(fd)

    def _process_bound(self) -> str:
        if self._pids_bound():
            return (
                f"at most {self.limits.processes} (a pids cgroup shared by this process's commands)"
            )
        if os.geteuid() != 0:
            return f"at most {self.limits.processes} (RLIMIT_NPROC)"
        return "NOT BOUNDED: running as root and no pids cgroup could be made"

    def _memory_bound(self) -> str:
        cgroups = self.cgroups
        each = f"{self.limits.memory_mb} MiB of data per process (RLIMIT_DATA)"
        if cgroups is not None and "memory" in cgroups.controllers:
            tcp = (
                f"socket buffers (TCP, UDP) at most {self.limits.memory_mb} MiB too"
                if cgroups.tcp
                else "NOT BOUNDED: socket buffers (this memory cgroup cannot count them)"
            )
            return (
                f"{self.limits.memory_mb} MiB for the processes of the commands running at "
                f"once together, shared memory, tmpfs files and page cache included (a memory "
                f"cgroup shared by this process's commands); {tcp}; {each}"
            )
        return (
            f"{each} only: NOT BOUNDED is memory shared between processes (MAP_SHARED "
            "mappings, System V shared memory), stacks (MAP_GROWSDOWN mappings too), socket "
            "buffers and the processes' total, as no "
            f"memory cgroup could be made; /tmp and /dev/shm hold at most {self.limits.tmp_mb} "
            "MiB each"
        )

    def describe(self) -> dict[str, Any]:
        plan = self.plan()
        system = [f for f in SYSTEM_DIRS if os.path.lexists(f)]
        return {
            "mechanism": "bubblewrap",
            "version": self.version,
            "network": self.allow_network,
            "write": [
                str(self.root),
                *map(str, self.write_paths),
                f"private {SANDBOX_TMP} and /dev/shm",
            ],
            "read": [
                *system,
                *map(str, self._interpreter),
                *map(str, plan.toolchains.read),
                *map(str, self.read_paths),
            ],
            "toolchains": [str(p) for p in plan.toolchains.read],
            "read_only": [str(p) for p in self._own_code()],
            "hidden": [
                *map(str, self.protected),
                *(path for path, _ in plan.system),
                *(str(p) for p, _ in plan.home_secrets),
            ],
            "home": SANDBOX_HOME,
            "environment": [*ALLOWED_ENV, "LC_*", *(n for n, _ in plan.toolchains.env), *self.env],
            "limits": {
                **self.limits.describe(),
                "processes_bound": self._process_bound(),
                "memory_bound": self._memory_bound(),
            },
            "unix_sockets": self._unix_sockets(),
            "setuid": "refused (seccomp filter)",
            "processes": "own PID namespace: every process dies with the call",
        }

    def __repr__(self) -> str:
        return f"BubblewrapSandbox({str(self.root)!r}, allow_network={self.allow_network})"


_PROBES: dict[tuple[str, bool], str | None] = {}
_PROBE_LOCK = threading.Lock()
_PLAN_LOCK = threading.Lock()
"""Held while a sandbox works out its mounts (:meth:`BubblewrapSandbox.plan`)."""


def _fresh_locks() -> None:
    """In a child this process forked: locks of its own, as a lock another thread held at
    the fork stays held in the child, where no thread will ever release it."""
    global _PROBE_LOCK, _PLAN_LOCK
    _PROBE_LOCK, _PLAN_LOCK = threading.Lock(), threading.Lock()


os.register_at_fork(after_in_child=_fresh_locks)


def _probe(bwrap: str, allow_network: bool) -> str | None:
    """Why ``bwrap`` fails here with these namespaces (``None``: it works); run once, outside
    the commands' cgroups (the commands running at once may hold all their processes)."""
    key = (bwrap, allow_network)
    with _PROBE_LOCK:
        if key not in _PROBES:
            with tempfile.TemporaryDirectory(prefix="agentfsm-probe-") as folder:
                sandbox = BubblewrapSandbox(
                    folder, allow_network=allow_network, bwrap=bwrap, toolchains=False
                )
                argv = [*sandbox._launcher(None), *sandbox.argv("true", sandbox.root)]
                env = sandbox.environment()
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
    env: Sequence[str] = (),
    limits: ResourceLimits | None = None,
    toolchains: bool = True,
) -> CommandSandbox:
    """The OS sandbox that works on this machine, for commands run in ``root``.

    ``env``, ``limits`` and ``toolchains`` are those of :class:`BubblewrapSandbox`. Raises
    :class:`SandboxUnavailable` saying what to install, upgrade or enable when none works
    (bubblewrap older than 0.8 is refused).
    """
    if not sys.platform.startswith("linux"):
        raise _unavailable(f"no sandbox is implemented for {sys.platform} yet")
    found = _program(bwrap)
    if found is None:
        raise _unavailable(f"{bwrap!r} (bubblewrap) was not found", INSTALL_HINT)
    failure = _probe(found, allow_network)
    if failure is not None:
        hints = [USERNS_HINT]
        if "unknown option" in failure.lower():
            hints.insert(0, UPGRADE_HINT)
        raise _unavailable(f"bubblewrap ({found}) does not work here: {failure}", *hints)
    return BubblewrapSandbox(
        root,
        allow_network=allow_network,
        read_paths=read_paths,
        write_paths=write_paths,
        protected=protected,
        bwrap=found,
        env=env,
        limits=limits,
        toolchains=toolchains,
    )
