"""Running a shell command through a sandbox, with a timeout and capped output.

Shared by the ``verify`` gate and the workspace ``shell`` tool. The command runs in its own
process group; when it exits, times out or its caller is cancelled, the group is killed, so
nothing of the call is left behind (a sandbox with a PID namespace also takes the processes
that left the group, such as ``setsid`` children).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import inspect
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from attrs import frozen

from ._errors import RunRefused

__all__ = [
    "CommandSandbox",
    "Launch",
    "SandboxUnavailable",
    "Unsandboxed",
    "check_sandbox",
    "env_names",
    "run_command",
    "sandbox_environ",
    "scrubbed_environ",
]

_SECRET_NAME = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|PRIVATE|^AWS_|^OPENAI_|^ANTHROPIC_",
    re.IGNORECASE,
)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""What a name in an environment allow-list must look like."""
ALLOWED_ENV = ("PATH", "LANG", "LANGUAGE", "TERM", "COLORTERM", "TZ")
"""The variables every sandboxed command gets (with ``LC_*``), when this process has them."""
DRAIN_SECONDS = 1.0
"""How long the output is still read after the command exited and its group was killed
(a process outside the group may hold the pipe open; then reading stops)."""


def scrubbed_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) without the variables that look like secrets.

    Dropped: names containing KEY, TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL, AUTH, COOKIE
    or PRIVATE (any case), and names starting with AWS_, OPENAI_ or ANTHROPIC_. PATH, LANG,
    LC_*, TERM, TZ and the like are kept. A deny-list misses secrets under other names
    (``LLM_CREDS``, ``OTEL_EXPORTER_OTLP_HEADERS``, a proxy URL with a password): commands
    get :func:`sandbox_environ`, an allow-list, instead.
    """
    source = os.environ if environ is None else environ
    return {name: value for name, value in source.items() if not _SECRET_NAME.search(name)}


def env_names(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` checked to be environment variable names, without duplicates.

    Raises:
        ValueError: a name is not ``[A-Za-z_][A-Za-z0-9_]*``.
    """
    names = tuple(dict.fromkeys(names))
    for name in names:
        if not isinstance(name, str) or ENV_NAME.fullmatch(name) is None:
            raise ValueError(f"{name!r} is not an environment variable name")
    return names


def sandbox_environ(
    names: Iterable[str] = (), environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a sandboxed command: an allow-list of ``environ`` (default: this
    process's).

    Kept: ``PATH``, ``LANG``, ``LANGUAGE``, ``LC_*``, ``TERM``, ``COLORTERM``, ``TZ`` and
    the ``names`` given (the user's ``"sandbox": {"env": [...]}``). Everything else, API
    keys, tokens, proxy URLs with passwords, ``OTEL_*`` headers, is left out whatever its
    name. The sandbox then sets its own ``HOME`` and ``TMPDIR``.
    """
    source = os.environ if environ is None else environ
    wanted = {*ALLOWED_ENV, *env_names(names)}
    return {name: source[name] for name in source if name in wanted or name.startswith("LC_")}


class SandboxUnavailable(RuntimeError, RunRefused):
    """No OS sandbox works on this machine, or commands cannot run in this process; the
    message says what to install, enable or change."""


_SIGCHLD_IGNORED = (
    "Commands cannot run: this process ignores SIGCHLD (the program that embeds agentfsm set "
    "it, or the one that started it did), so the kernel throws away every command's exit "
    "status and bubblewrap never sees its command end. To fix it: restore the default "
    "before running the agent, signal.signal(signal.SIGCHLD, signal.SIG_DFL), or start "
    "agentfsm from a shell that does not ignore SIGCHLD."
)


@runtime_checkable
class CommandSandbox(Protocol):
    """Runs a shell command line confined by an OS mechanism (or, explicitly, not at all)."""

    @property
    def name(self) -> str:
        """The mechanism: ``"bubblewrap"``, … or ``"none"`` for the explicit opt-out."""
        ...

    def command(self, command: str, cwd: Path) -> tuple[list[str], Mapping[str, str]]:
        """The argv and environment that run ``sh -c command`` in ``cwd`` inside the sandbox."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the sandbox allows, as JSON (recorded in the session)."""
        ...


class Unsandboxed:
    """The explicit opt-out: commands run as this process's user, with its full access.

    Only the environment is narrowed, to the allow-list of :func:`sandbox_environ` (plus
    ``env``) with this process's ``HOME`` and ``TMPDIR``. No resource limit and no setuid
    filter apply: a command can make a setuid file. When the command exits its process group
    is killed, but a process that left the group (``setsid``) survives the call; on a timeout
    or a cancel everything still under the command is killed too.
    """

    name = "none"
    env: tuple[str, ...] = ()
    """More variables the commands get (a subclass that skips ``__init__`` gets none)."""

    def __init__(self, *, env: Iterable[str] = ()) -> None:
        self.env = env_names(env)

    def command(self, command: str, cwd: Path) -> tuple[list[str], Mapping[str, str]]:
        environ = sandbox_environ(self.env)
        for name in ("HOME", "TMPDIR"):
            if name in os.environ:
                environ[name] = os.environ[name]
        return ["/bin/sh", "-c", command], environ

    def describe(self) -> dict[str, Any]:
        return {
            "mechanism": "none",
            "network": True,
            "write": "everything this user may write",
            "read": "everything this user may read",
            "environment": [*ALLOWED_ENV, "LC_*", "HOME", "TMPDIR", *self.env],
            "setuid": "allowed",
            "limits": None,
        }

    def __repr__(self) -> str:
        return "Unsandboxed()"


def check_sandbox(sandbox: object, owner: str) -> None:
    """A ``TypeError`` now, naming what was probably meant, for a ``sandbox=`` that is no
    :class:`CommandSandbox` (``None`` passes): otherwise the first command fails, after the
    model was called.

    Args:
        sandbox: What ``owner`` was given.
        owner: Who was given it, for the message (``Agent``, ``workspace_tools`` …).
    """
    if sandbox is None:
        return
    if isinstance(sandbox, type):  # a class has the protocol's attributes: look first
        name = sandbox.__name__
        try:
            inspect.signature(sandbox).bind()
            call = f"{name}()"
        except (TypeError, ValueError):
            call = f"{name}(...)"
        raise TypeError(f"{owner}: {name} is a class, not a sandbox: did you mean {call}?")
    if not isinstance(sandbox, CommandSandbox):
        raise TypeError(
            f"{owner}: sandbox must be a CommandSandbox (Unsandboxed(), "
            f"BubblewrapSandbox(root), detect_sandbox(root)) or None, not "
            f"{type(sandbox).__name__}"
        )


class _CappedText:
    """Decoded output; past ``limit`` characters only its head and tail are kept."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.half = max(limit // 2, 1)
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.kept = ""
        self.head: str | None = None
        self.tail = ""
        self.total = 0

    def feed(self, chunk: bytes, *, final: bool = False) -> None:
        text = self.decoder.decode(chunk, final=final)
        self.total += len(text)
        if self.head is None:
            self.kept += text
            if len(self.kept) > self.limit:
                kept, self.kept = self.kept, ""
                self.head, self.tail = kept[: self.half], kept[self.half :][-self.half :]
        else:
            self.tail = (self.tail + text)[-self.half :]

    def text(self) -> str:
        if self.head is None:
            return self.kept
        cut = self.total - len(self.head) - len(self.tail)
        return f"{self.head}\n… [{cut} characters cut] …\n{self.tail}"

    async def read(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self.feed(chunk)
        self.feed(b"", final=True)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started, from ``/proc`` (empty where the kernel does not say)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError, ValueError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    parents = [pid]
    while parents:
        children = _children(parents.pop())
        found += children
        parents += children
    return found


def _kill_tree(pid: int, grace: float = 0.2) -> None:
    """Kill ``pid``'s group and every process under ``pid`` (``setsid`` children included).

    A plain shell dies first, so it cannot run its next command. A sandbox's monitor (its
    child lives in another PID namespace) dies last: killing the namespace's init first lets
    the monitor reap it and exit by itself within ``grace`` seconds, leaving no orphan.
    """
    namespace = _pid_namespace(pid)
    monitor = any(_pid_namespace(c) not in (None, namespace) for c in _children(pid))
    descendants = _descendants(pid)
    if not monitor:
        _kill(pid)
    for process in descendants:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(process, signal.SIGKILL)
    deadline = time.monotonic() + grace
    while monitor and _running(pid) and time.monotonic() < deadline:
        time.sleep(0.002)
    _kill(pid)


@frozen
class Launch:
    """How :func:`run_command` starts a command: what a sandbox's ``launch`` gives."""

    argv: list[str]
    env: Mapping[str, str]
    fds: tuple[int, ...] = ()
    """Descriptors the process inherits (the sandbox closes them once it started)."""
    start_in: Callable[[Callable[[], subprocess.Popen[bytes]]], subprocess.Popen[bytes]] | None = (
        None
    )
    """Calls the start where it must happen (a thread in the commands' cgroups); ``None``:
    here."""


@contextlib.contextmanager
def _launch(sandbox: CommandSandbox, command: str, cwd: str | Path) -> Iterator[Launch]:
    argv, env = sandbox.command(command, Path(cwd))
    yield Launch(argv, env)


async def _exit_code(process: subprocess.Popen[bytes]) -> int:
    """``process``'s exit code once it exits, awaited on a pidfd where the kernel and the
    event loop have them (else waited for in a thread).

    Raises:
        ChildProcessError: something else in this process reaped it (a ``SIGCHLD`` handler
            that waits for any child): its exit status is unknown.
    """
    if process.returncode is not None:  # reaped: its pid may be another process's by now
        return process.returncode
    loop = asyncio.get_running_loop()
    exited: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not exited.done():
            exited.set_result(None)

    pidfd = None
    with contextlib.suppress(AttributeError, OSError):  # no pidfds in this kernel
        pidfd = os.pidfd_open(process.pid)
    if pidfd is not None:
        try:
            loop.add_reader(pidfd, readable)
        except NotImplementedError:  # an event loop that watches no descriptor
            os.close(pidfd)
            pidfd = None
    if pidfd is None:  # waited for in a thread that does not reap it: a cancelled wait
        # goes on in its thread, and must not take the status from the next one
        with contextlib.suppress(ChildProcessError):  # reaped elsewhere: _reap says so
            await asyncio.to_thread(os.waitid, os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
        return _reap(process)
    try:
        await exited
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    return _reap(process)


def _reap(process: subprocess.Popen[bytes]) -> int:
    """Wait for ``process`` and give its exit code as ``Popen`` does (``-N``: killed by
    signal ``N``), never ``0`` for a status lost to another wait (as ``Popen.wait`` does)."""
    try:
        _, status = os.waitpid(process.pid, 0)
    except ChildProcessError:
        raise ChildProcessError(
            f"the exit status of the command (pid {process.pid}) is unknown: something else "
            "in this process reaped it first (a SIGCHLD handler, or a wait for any child)"
        ) from None
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode


async def run_command(
    command: str,
    cwd: str | Path,
    *,
    timeout: float,  # noqa: ASYNC109 - the command's own bound, enforced with a kill
    max_output: int,
    sandbox: CommandSandbox,
) -> tuple[int | None, str]:
    """Run ``sh -c command`` in ``cwd`` through ``sandbox``, in its own process group.

    A sandbox with a ``launch(command, cwd)`` context manager (:class:`BubblewrapSandbox`)
    gives how to start the call (argv, environment, descriptors to pass, closed once the
    process started, and where to start it); else :meth:`CommandSandbox.command` gives the
    argv and environment.

    Returns the exit code (``None`` when it timed out and was killed) and the captured
    output (stdout and stderr together, head and tail kept past ``max_output`` characters).
    The group is killed when the command exits, times out or the caller is cancelled.

    Raises:
        SandboxUnavailable: this process ignores ``SIGCHLD``: no exit status would be true
            (the kernel discards them) and bubblewrap would wait for its command forever.
        ChildProcessError: something else in this process reaped the command first (a
            ``SIGCHLD`` handler that waits for any child): its exit status is unknown.
    """
    if signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:
        raise SandboxUnavailable(_SIGCHLD_IGNORED)
    launch = getattr(sandbox, "launch", None)
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    try:
        with launch(command, Path(cwd)) if launch else _launch(sandbox, command, cwd) as how:

            def start(how: Launch = how) -> subprocess.Popen[bytes]:
                return subprocess.Popen(
                    how.argv,
                    cwd=str(cwd),
                    env=dict(how.env),
                    stdin=subprocess.DEVNULL,
                    stdout=write_fd,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=how.fds,
                )

            process = start() if how.start_in is None else how.start_in(start)
    except BaseException:
        pipe.close()
        raise
    finally:
        os.close(write_fd)
    output = _CappedText(max_output)
    transport: asyncio.BaseTransport | None = None
    reader: asyncio.Future[None] | None = None
    try:
        stream = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream), pipe
        )
        reader = asyncio.ensure_future(output.read(stream))
        code: int | None
        try:
            code = await asyncio.wait_for(_exit_code(process), timeout)
        except TimeoutError:
            code = None
            _kill_tree(process.pid)
        _kill(process.pid)  # whatever the command left in its group dies with the call
        await _exit_code(process)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader), DRAIN_SECONDS)
    except BaseException:
        _kill_tree(process.pid)
        if process.returncode is None:  # reaped once dead, whatever this task does next
            threading.Thread(target=process.wait, daemon=True).start()
        raise
    finally:
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        if transport is not None:
            transport.close()
        else:
            pipe.close()
    return code, output.text()
