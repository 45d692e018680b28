"""The command sandbox: bubblewrap's argv and description, detection, the environment,
``Unsandboxed``, and ``run_command`` (capped output, timeouts and cancels kill everything)."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from agentfsm import ToolCall
from agentfsm.adapters.tools import workspace_tools
from agentfsm.sandbox import (
    BubblewrapSandbox,
    CommandSandbox,
    ResourceLimits,
    SandboxUnavailable,
    Unsandboxed,
    detect_sandbox,
)
from agentfsm.sandbox import _bubblewrap as sandbox_module
from agentfsm.sandbox._limits import processes_option
from agentfsm.sandbox._process import run_command, sandbox_environ, scrubbed_environ
from agentfsm.sandbox._seccomp import setuid_filter

from ...security.sandboxing import alive, kill_all, require_bubblewrap, run_python


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    (folder / "conf").mkdir(parents=True)
    (folder / "conf" / "key.pem").write_text("k", "utf-8")
    return folder


def pairs(argv: list[str], option: str) -> list[tuple[str, ...]]:
    """The arguments of every ``option`` in a bwrap command line."""
    width = {"--chdir": 1, "--tmpfs": 1, "--remount-ro": 1, "--dir": 1, "--proc": 1}.get(option, 2)
    return [tuple(argv[i + 1 : i + 1 + width]) for i, a in enumerate(argv) if a == option]


def test_bubblewrap_argv(root: Path) -> None:
    box = BubblewrapSandbox(
        root,
        protected=(".agentfsm", "conf/key.pem"),
        read_paths=["/opt"],
        write_paths=["/srv/cache"],
        bwrap="/usr/bin/bwrap",
    )
    launch, env = box.command("make test", root)
    assert launch[:2] == ["/bin/sh", "-c"]  # joins the cgroups, opens the filter on fd 3
    assert Path(launch[3]).read_bytes() == setuid_filter()
    cgroups = box.cgroups
    assert launch[4 : launch.index("--")] == ([str(p) for p in cgroups.files] if cgroups else [])
    argv = launch[launch.index("--") + 1 :]
    assert argv == box.argv("make test", root)
    assert argv[0] == "/usr/bin/bwrap"
    # sh sets the limits with its own ulimit, on the command's first line, then runs it
    assert argv[-3:-1] == ["/bin/sh", "-c"]
    assert argv[-1].startswith("ulimit ")
    assert argv[-1].endswith("; exit 126; }; make test")
    tail = argv[argv.index("--") :]
    if (cgroups is None or "pids" not in cgroups.controllers) and processes_option() is None:
        assert tail[1:-3] == [box.prlimit, box.limits.prlimit_processes()]
    else:
        assert tail[1:-3] == []  # a pids cgroup or the shell's ulimit bounds the processes
    assert pairs(argv, "--chdir") == [(str(root),)]
    assert argv[argv.index("--seccomp") + 1] == "3"
    assert "--disable-userns" in argv
    flags = argv[: argv.index("--proc")]
    for flag in (
        "--unshare-all",
        "--unshare-user",
        "--as-pid-1",
        "--die-with-parent",
        "--new-session",
    ):
        assert flag in flags
    assert "--share-net" not in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    binds = pairs(argv, "--ro-bind")
    assert ("/usr", "/usr") in binds
    assert ("/etc", "/etc") in binds
    for folder in ("/bin", "/lib", "/lib64", "/sbin"):  # as symlinks on merged-/usr systems
        if os.path.islink(folder):
            assert (os.readlink(folder), folder) in pairs(argv, "--symlink")
        elif os.path.isdir(folder):
            assert (folder, folder) in binds
    assert ("/dev/null", str(root / "conf" / "key.pem")) in binds
    if os.access("/etc/shadow", os.R_OK):  # what the command could not read needs no mount
        assert ("/dev/null", "/etc/shadow") in binds
    assert ("/opt", "/opt") in pairs(argv, "--ro-bind-try")
    assert pairs(argv, "--bind") == [(str(root), str(root)), (str(root / "conf"),) * 2]
    assert ("/srv/cache", "/srv/cache") in pairs(argv, "--bind-try")
    assert pairs(argv, "--tmpfs")[:2] == [("/dev/shm",), ("/tmp",)]
    assert pairs(argv, "--remount-ro")[0] == ("/dev",)
    assert (str(root / ".agentfsm"),) in pairs(argv, "--tmpfs")
    assert (str(root / ".agentfsm"),) in pairs(argv, "--remount-ro")
    assert argv.index("--bind") < argv.index(str(root / ".agentfsm"))  # hidden after the root
    assert pairs(argv, "--remount-ro")[-1] == ("/",)
    assert env["HOME"] == "/tmp/home"
    assert env["TMPDIR"] == "/tmp"
    assert "--share-net" in BubblewrapSandbox(root, allow_network=True).command("x", root)[0]


def test_bubblewrap_binds_the_interpreter_unless_the_system_or_root_holds_it(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = root.parent / "python"
    python.mkdir()
    for name in ("base_prefix", "base_exec_prefix"):
        monkeypatch.setattr(sys, name, str(python))
    for name in ("prefix", "exec_prefix"):
        monkeypatch.setattr(sys, name, str(root / ".venv"))
    argv = BubblewrapSandbox(root).command("true", root)[0]
    tried = pairs(argv, "--ro-bind-try")
    assert (str(python), str(python)) in tried
    # The root's .venv is the agent's own: read-only, bound over the writable root after it.
    venv = str(root / ".venv")
    assert (venv, venv) in tried
    assert argv.index(venv) > argv.index(str(root))


def test_bubblewrap_describe(root: Path) -> None:
    described = BubblewrapSandbox(root, read_paths=["/opt"]).describe()
    assert described["mechanism"] == "bubblewrap"
    assert described["network"] is False
    assert described["write"] == [str(root), "private /tmp and /dev/shm"]
    assert "/usr" in described["read"]
    assert "/opt" in described["read"]
    assert str(root / ".agentfsm") in described["hidden"]
    assert "home" in described


def test_bubblewrap_describes_its_limits_and_environment(root: Path) -> None:
    limits = ResourceLimits(processes=64, tmp_mb=32)
    box = BubblewrapSandbox(root, env=["CARGO_HOME"], limits=limits)
    described = box.describe()
    assert described["limits"]["processes"] == 64
    assert "processes_bound" in described["limits"]
    assert "CARGO_HOME" in described["environment"]
    assert "/etc/shadow" in described["hidden"] or not os.path.exists("/etc/shadow")
    assert described["setuid"] == "refused (seccomp filter)"
    argv = box.argv("true", root)
    for place in ("/dev/shm", "/tmp"):
        at = argv.index(place)
        assert argv[at - 3 : at] == ["--size", str(32 << 20), "--tmpfs"]
    cgroups = box.cgroups
    if cgroups is None or "pids" not in cgroups.controllers:
        option = processes_option()
        assert "--nproc=64:64" in argv if option is None else f"ulimit {option} 64 " in argv[-1]
    with pytest.raises(ValueError, match="not an environment variable name"):
        BubblewrapSandbox(root, env=["A=B"])


def test_bubblewrap_refuses_bad_paths(root: Path) -> None:
    with pytest.raises(ValueError, match="absolute"):
        BubblewrapSandbox(root, read_paths=["relative"])
    with pytest.raises(ValueError, match="absolute"):
        BubblewrapSandbox(root, write_paths=["~/x"])
    with pytest.raises(ValueError, match="not inside"):
        BubblewrapSandbox(root, protected=("../elsewhere",))
    with pytest.raises(ValueError, match="cannot be /"):
        BubblewrapSandbox("/")


def test_detection_says_what_to_install(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SandboxUnavailable) as missing:
        detect_sandbox(root, bwrap="/nonexistent/bwrap")
    message = str(missing.value)
    assert "apt-get install bubblewrap" in message
    assert "--no-sandbox" in message
    monkeypatch.setattr(sandbox_module, "SYSTEM_PATH", str(root))  # where bwrap is looked for
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        detect_sandbox(root)


def test_detection_reports_why_bubblewrap_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox_module, "_PROBES", {})
    runs = tmp_path / "runs"
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then echo "bubblewrap 0.8.0"; exit 0; fi\n'
        f"echo run >> {runs}\n"
        "echo 'bwrap: setting up uid map: Permission denied' >&2\n"
        "echo 'second line' >&2\n"
        "exit 1\n",
        "utf-8",
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    for _ in range(2):
        with pytest.raises(SandboxUnavailable) as failed:
            detect_sandbox(tmp_path, bwrap=str(fake))
    message = str(failed.value)
    assert "setting up uid map: Permission denied" in message
    assert "second line" not in message
    assert "kernel.unprivileged_userns_clone=1" in message
    assert "kernel.apparmor_restrict_unprivileged_userns=0" in message
    assert "--no-sandbox" in message
    assert runs.read_text("utf-8").count("run") == 1  # probed once per process


async def test_the_shell_fails_without_a_sandbox(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox_module, "SYSTEM_PATH", str(root))  # no bwrap to be found
    box = workspace_tools(root)
    result = await box.run(ToolCall("c", "shell", {"command": "touch ran"}))
    assert not result.ok
    assert "apt-get install bubblewrap" in (result.error or "")
    assert not (root / "ran").exists()


def test_scrubbed_environ() -> None:
    environ = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "TERM": "xterm",
        "TZ": "UTC",
        "OPENAI_API_KEY": "x",
        "OPENAI_BASE_URL": "x",
        "ANTHROPIC_MODEL": "x",
        "AWS_REGION": "x",
        "GITHUB_TOKEN": "x",
        "db_password": "x",
        "MY_SECRET": "x",
        "SSH_AUTH_SOCK": "x",
        "SESSION_COOKIE": "x",
        "GOOGLE_APPLICATION_CREDENTIALS": "x",
        "PGPASSWD": "x",
    }
    assert scrubbed_environ(environ) == {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "TERM": "xterm",
        "TZ": "UTC",
    }


def test_sandbox_environ_is_an_allow_list() -> None:
    environ = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LANGUAGE": "en",
        "LC_ALL": "C",
        "TERM": "xterm",
        "COLORTERM": "truecolor",
        "TZ": "UTC",
        "HOME": "/home/me",
        "LLM_CREDS": "x",
        "OTEL_EXPORTER_OTLP_HEADERS": "x",
        "DATABASE_URL": "x",
        "http_proxy": "x",
        "FOO": "x",
        "CARGO_HOME": "/c",
    }
    kept = {"PATH", "LANG", "LANGUAGE", "LC_ALL", "TERM", "COLORTERM", "TZ"}
    assert set(sandbox_environ(environ=environ)) == kept
    assert set(sandbox_environ(["CARGO_HOME", "ABSENT"], environ)) == {*kept, "CARGO_HOME"}
    for bad in ("A=B", "1X", "", "LLM CREDS", "X\u2028"):
        with pytest.raises(ValueError, match="not an environment variable name"):
            sandbox_environ([bad], environ)


def test_unsandboxed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary")
    none = Unsandboxed()
    assert isinstance(none, CommandSandbox)
    assert none.name == "none"
    argv, env = none.command("echo hi", tmp_path)
    assert argv == ["/bin/sh", "-c", "echo hi"]
    assert "OPENAI_API_KEY" not in env
    assert env["PATH"] == os.environ["PATH"]
    assert none.describe()["mechanism"] == "none"
    monkeypatch.setenv("LLM_CREDS", "creds")
    monkeypatch.setenv("CARGO_HOME", "/c")
    monkeypatch.setenv("HOME", "/home/me")
    env = Unsandboxed(env=["CARGO_HOME"]).command("true", tmp_path)[1]
    assert "LLM_CREDS" not in env
    assert (env["CARGO_HOME"], env["HOME"]) == ("/c", "/home/me")


@pytest.fixture(params=["none", "bubblewrap"])
def sandbox(request: pytest.FixtureRequest, tmp_path: Path) -> CommandSandbox:
    if request.param == "none":
        return Unsandboxed()
    return require_bubblewrap(tmp_path)


async def test_output_is_capped_and_scrubbed(
    sandbox: CommandSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-env")
    command = "yes A | head -c 3000; yes B | head -c 3000; echo err >&2; printenv OPENAI_API_KEY"
    code, output = await run_command(
        command, tmp_path, timeout=30, max_output=1000, sandbox=sandbox
    )
    assert code == 1  # printenv found nothing
    assert output.startswith("A\nA\n")
    assert output.rstrip().endswith("B\nerr")
    assert "characters cut" in output
    assert "sk-canary" not in output
    assert len(output) < 1100
    code, output = await run_command(
        "printf 'é'; exit 4", tmp_path, timeout=30, max_output=9, sandbox=sandbox
    )
    assert (code, output) == (4, "é")


def _escapees(marker: str) -> str:
    """A command that starts processes marked ``marker`` and runs on."""
    return (
        f"setsid sh -c 'sleep 30; : {marker}' & sh -c 'sleep 30; : {marker}' & "
        f"nohup sh -c 'sleep 30; : {marker}' >/dev/null 2>&1 & sleep 30"
    )


async def test_a_timeout_kills_everything(sandbox: CommandSandbox, tmp_path: Path) -> None:
    marker = f"agentfsm-sandbox-timeout-{time.monotonic_ns()}"
    started = time.monotonic()
    try:
        code, _ = await run_command(
            _escapees(marker), tmp_path, timeout=1, max_output=100, sandbox=sandbox
        )
        assert code is None
        assert time.monotonic() - started < 4
        await asyncio.sleep(0.3)
        assert alive(marker) == []
    finally:
        kill_all(marker)


async def test_a_timeout_stops_the_shell_before_its_next_command(
    sandbox: CommandSandbox, tmp_path: Path
) -> None:
    code, _ = await run_command(
        "sleep 30; touch after", tmp_path, timeout=0.3, max_output=100, sandbox=sandbox
    )
    assert code is None
    await asyncio.sleep(0.3)
    assert not (tmp_path / "after").exists()


async def test_a_cancel_kills_everything(sandbox: CommandSandbox, tmp_path: Path) -> None:
    marker = f"agentfsm-sandbox-cancel-{time.monotonic_ns()}"
    task = asyncio.create_task(
        run_command(_escapees(marker), tmp_path, timeout=60, max_output=100, sandbox=sandbox)
    )
    try:
        for _ in range(100):
            if len(alive(marker)) >= 3:
                break
            await asyncio.sleep(0.05)
        assert alive(marker)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.3)
        assert alive(marker) == []
    finally:
        kill_all(marker)


async def test_a_background_process_holding_the_output_does_not_hang_the_call(
    sandbox: CommandSandbox, tmp_path: Path
) -> None:
    marker = f"agentfsm-sandbox-held-{time.monotonic_ns()}"
    command = f"echo before; setsid sh -c 'sleep 30; : {marker}' & sleep 0.3; echo after"
    started = time.monotonic()
    try:
        code, output = await run_command(
            command, tmp_path, timeout=30, max_output=100, sandbox=sandbox
        )
        assert time.monotonic() - started < 4
        assert (code, output) == (0, "before\nafter\n")
        await asyncio.sleep(0.3)
        # Outside a PID namespace a setsid process escapes its group: the documented limit.
        assert bool(alive(marker)) == (sandbox.name == "none")
    finally:
        kill_all(marker)


async def test_the_mounts_follow_path_settings_and_venvs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mounts are worked out once and kept while nothing they depend on changes; a new
    ``PATH``, a read path added to the sandbox's settings and a virtual environment made in
    the workspace between two calls are all seen at the next call."""
    root = tmp_path / "ws"
    root.mkdir()
    tool = tmp_path / "opt" / "tool" / "bin"
    tool.mkdir(parents=True)
    (tool / "mytool").write_text("#!/bin/sh\necho tool ran\n", "utf-8")
    (tool / "mytool").chmod(0o755)
    data = tmp_path / "data"
    data.mkdir()
    (data / "f.txt").write_text("data here\n", "utf-8")
    python = tmp_path / "python"
    (python / "lib" / "python3.11").mkdir(parents=True)
    (python / "lib" / "python3.11" / "os.py").write_text("# the standard library\n", "utf-8")
    (python / "bin").mkdir()
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    sandbox = require_bubblewrap(root)

    async def run(command: str) -> tuple[int | None, str]:
        return await run_command(command, root, timeout=30, max_output=10_000, sandbox=sandbox)

    assert (await run("true"))[0] == 0
    kept = sandbox.plan()
    assert (await run("true"))[0] == 0
    assert sandbox.plan() is kept  # nothing changed: worked out once
    assert (await run("mytool"))[0] == 127
    monkeypatch.setenv("PATH", f"{tool}:/usr/bin:/bin")
    assert await run("mytool") == (0, "tool ran\n")
    assert sandbox.plan() is not kept
    assert (await run(f"cat {data}/f.txt"))[0] != 0
    sandbox.read_paths = (data,)
    assert await run(f"cat {data}/f.txt") == (0, "data here\n")
    stdlib = f"cat {python}/lib/python3.11/os.py"
    assert (await run(stdlib))[0] != 0
    (root / ".venv").mkdir()
    (root / ".venv" / "pyvenv.cfg").write_text(f"home = {python}/bin\n", "utf-8")
    assert await run(stdlib) == (0, "# the standard library\n")
    assert python in sandbox.toolchains.read


_IGNORING_SIGCHLD = """
import asyncio, signal, sys
from agentfsm.sandbox import BubblewrapSandbox, SandboxUnavailable, Unsandboxed, run_command
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # as a host program or a parent may leave it
sandbox = Unsandboxed() if sys.argv[2] == "none" else BubblewrapSandbox(sys.argv[1])
try:
    print(asyncio.run(run_command("exit 3", sys.argv[1], timeout=10, max_output=100,
                                  sandbox=sandbox)))
except SandboxUnavailable as error:
    print(error)
"""


@pytest.mark.parametrize("sandbox", ["none", "bubblewrap"], indirect=True)
def test_a_process_that_ignores_sigchld_is_told_instead_of_given_a_false_exit_code(
    sandbox: CommandSandbox, tmp_path: Path
) -> None:
    # Before: the kernel reaped each command itself, so an unsandboxed "exit 3" came back as
    # exit code 0 (a failed check passed), and bwrap never saw its command end (timed out).
    done = run_python(_IGNORING_SIGCHLD, str(tmp_path), sandbox.name, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Commands cannot run: this process ignores SIGCHLD"), done.stdout
    assert "signal.SIG_DFL" in done.stdout


_MAIN_THREAD_ENDS = """
import asyncio, sys, threading, time
from agentfsm.sandbox import BubblewrapSandbox, Unsandboxed, run_command
sandbox = Unsandboxed() if sys.argv[2] == "none" else BubblewrapSandbox(sys.argv[1])

async def commands():
    for command in ("sleep 1; echo first", "echo second"):
        print(await run_command(command, sys.argv[1], timeout=30, max_output=100,
                                sandbox=sandbox), flush=True)

threading.Thread(target=asyncio.run, args=(commands(),)).start()
time.sleep(0.3)  # the main thread ends; the other one goes on running commands
"""


@pytest.mark.parametrize("sandbox", ["none", "bubblewrap"], indirect=True)
def test_commands_run_on_after_the_main_thread_ended(
    sandbox: CommandSandbox, tmp_path: Path
) -> None:
    # Before: the thread that starts the commands in the cgroups ended with the main thread,
    # killing the running command (bwrap dies with the thread that started it), and the wait
    # for it went through an executor that takes no work once the main thread has ended.
    done = run_python(_MAIN_THREAD_ENDS, str(tmp_path), sandbox.name, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "(0, 'first\\n')\n(0, 'second\\n')\n", done.stdout + done.stderr


_REAPS_ANY_CHILD = """
import asyncio, os, signal, sys
from agentfsm.sandbox import BubblewrapSandbox, Unsandboxed, run_command

def reap(*_):  # a host program's handler that waits for any child
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass

signal.signal(signal.SIGCHLD, reap)
sandbox = Unsandboxed() if sys.argv[2] == "none" else BubblewrapSandbox(sys.argv[1])
for _ in range(3):
    try:
        print(asyncio.run(run_command("sleep 0.2; exit 3", sys.argv[1], timeout=30,
                                      max_output=100, sandbox=sandbox))[0])
    except ChildProcessError as error:
        print(error)
"""


@pytest.mark.parametrize("sandbox", ["none", "bubblewrap"], indirect=True)
def test_an_exit_status_taken_by_a_sigchld_handler_is_never_a_success(
    sandbox: CommandSandbox, tmp_path: Path
) -> None:
    # Before: a host program's SIGCHLD handler that waits for any child took the status
    # first, and the failed command came back as exit code 0.
    done = run_python(_REAPS_ANY_CHILD, str(tmp_path), sandbox.name, timeout=120)
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        assert line == "3" or "is unknown: something else in this process reaped it" in line


def test_commands_at_once_from_several_threads_each_get_their_own_start(tmp_path: Path) -> None:
    """Event loops in four threads, each running four commands at once under its own
    limits (started by the cgroups' threads where there are some): every command's output
    and limits are its own."""
    require_bubblewrap(tmp_path)
    wrong: list[str] = []

    def thread(index: int) -> None:
        sandbox = BubblewrapSandbox(tmp_path, limits=ResourceLimits(memory_mb=300 + index % 2))

        async def one(number: int) -> None:
            code, output = await run_command(
                f"echo {index}-{number}; grep 'Max data' /proc/self/limits",
                tmp_path,
                timeout=60,
                max_output=1000,
                sandbox=sandbox,
            )
            first, data = output.splitlines()
            if (code, first, data.split()[3]) != (
                0,
                f"{index}-{number}",
                str(300 + index % 2 << 20),
            ):
                wrong.append(output)

        async def all_of_them() -> None:
            await asyncio.gather(*(one(number) for number in range(4)))

        asyncio.run(all_of_them())

    threads = [threading.Thread(target=thread, args=(index,)) for index in range(4)]
    for each in threads:
        each.start()
    for each in threads:
        each.join(120)
    assert wrong == []


@pytest.mark.parametrize("missing", ["pidfd", "reader"])
async def test_without_pidfds_commands_are_waited_for_in_threads(
    sandbox: CommandSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """Where ``pidfd_open`` fails (a kernel before 5.3, a container's seccomp profile), or
    the event loop watches no descriptor: exit codes, timeouts and cancels work as with
    them, and every command is reaped."""

    def refused(*args: object) -> int:
        if missing == "pidfd":
            raise OSError(errno.ENOSYS, "pidfd_open refused")
        raise NotImplementedError

    if missing == "pidfd":
        monkeypatch.setattr(os, "pidfd_open", refused)
    else:
        monkeypatch.setattr(asyncio.get_running_loop(), "add_reader", refused)
    before = _children_of_this_process()
    # Before: the wait cancelled by the timeout went on in its thread and reaped the command,
    # and the next wait failed with ChildProcessError.
    assert await run_command("exit 3", tmp_path, timeout=30, max_output=100, sandbox=sandbox) == (
        3,
        "",
    )
    timed_out = await run_command("sleep 30", tmp_path, timeout=1, max_output=100, sandbox=sandbox)
    assert timed_out == (None, "")
    task = asyncio.ensure_future(
        run_command("sleep 30", tmp_path, timeout=30, max_output=100, sandbox=sandbox)
    )
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(50):  # the cancelled call's process is reaped by a thread of its own
        left = _children_of_this_process() - before
        if not left:
            break
        await asyncio.sleep(0.1)
    assert left == set()


def _children_of_this_process() -> set[str]:
    found: set[str] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        with contextlib.suppress(OSError):
            found.update(task.joinpath("children").read_text().split())
    return found


_RUNS_AT_EXIT = """
import asyncio, atexit, sys
from agentfsm.sandbox import BubblewrapSandbox, Unsandboxed, run_command
sandbox = Unsandboxed() if sys.argv[2] == "none" else BubblewrapSandbox(sys.argv[1])

def run(command):
    try:
        return asyncio.run(run_command(command, sys.argv[1], timeout=30, max_output=100,
                                       sandbox=sandbox))
    except OSError as error:
        return str(error)

atexit.register(lambda: print(run("echo at exit"), flush=True))  # before the first command
print(run("echo first"), flush=True)
"""


@pytest.mark.parametrize("sandbox", ["none", "bubblewrap"], indirect=True)
def test_a_command_run_at_exit_runs_or_fails_but_never_hangs(
    sandbox: CommandSandbox, tmp_path: Path
) -> None:
    # Before: the thread that starts the commands in the cgroups had ended at exit, and an
    # atexit handler's command waited for it forever.
    done = run_python(_RUNS_AT_EXIT, str(tmp_path), sandbox.name, timeout=60)
    assert done.returncode == 0, done.stderr
    first, at_exit = done.stdout.splitlines()
    assert first == "(0, 'first\\n')"
    # Where the cgroups were removed already the command did not run, and says so.
    assert at_exit == "(0, 'at exit\\n')" or at_exit.startswith("the command did not run")
