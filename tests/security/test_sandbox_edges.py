"""The sandbox's edges, attacked from inside the real bubblewrap sandbox: setuid artifacts that
would run later outside, the agent's own interpreter inside the workspace, secrets in the
environment, root-only files under ``/etc``, and settings that widen reads or writes over
what is hidden (mount order)."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentfsm import ToolCall, ToolResult
from agentfsm.adapters.tools import workspace_tools
from agentfsm.sandbox import (
    BubblewrapSandbox,
    CommandSandbox,
    SandboxUnavailable,
    Unsandboxed,
    detect_sandbox,
)
from agentfsm.sandbox import _bubblewrap as sandbox_module
from agentfsm.sandbox import _hidden as hidden_module
from agentfsm.sandbox._install_paths import agent_install_paths

from .tally import AttackTally

pytestmark = pytest.mark.usefixtures("bubblewrap")

CANARY = f"agentfsm-edge-{time.monotonic_ns()}"
CONTENT = f"secret-content-{time.monotonic_ns()}"
"""What the hidden files hold (not in their names, which error messages repeat)."""


async def shell(sandbox: CommandSandbox, root: Path, command: str) -> ToolResult:
    box = workspace_tools(root, sandbox=sandbox)
    return await box.run(ToolCall("c", "shell", {"command": command, "timeout": 30}))


def shown(result: ToolResult) -> str:
    return f"{result.output}\n{result.error or ''}"


def setid_files(root: Path) -> list[str]:
    """Files and folders under ``root`` with a setuid or setgid bit."""
    found = []
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            if path.lstat().st_mode & 0o6000:
                found.append(str(path.relative_to(root)))
    return found


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    with tarfile.open(folder / "setuid.tar", "w") as archive:
        info = tarfile.TarInfo("suid-true")
        data = Path("/bin/true").read_bytes()
        info.size, info.mode = len(data), 0o4755
        archive.addfile(info, io.BytesIO(data))
    return folder


SETUID_ATTEMPTS = [
    "cp /bin/bash ./b; chmod 4755 ./b",
    "cp /bin/bash ./b2; chmod u+s ./b2",
    "cp /bin/bash ./b3; chmod g+s ./b3",
    "install -m 4755 /bin/true ./t",
    "install -m 2755 /bin/true ./t2",
    "cp /bin/true ./p; python3 -c \"import os; os.chmod('p', 0o4755)\"",
    "python3 -c \"import os; os.close(os.open('o', os.O_CREAT | os.O_WRONLY, 0o4755))\"",
    "python3 -c \"import os; os.close(os.open('o2', os.O_CREAT | os.O_WRONLY, 0o6777))\"",
    "python3 -c \"import os; os.mknod('n', 0o104755)\"",
    "python3 -c \"import os; fd = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o4755); "
    "os.link(f'/proc/self/fd/{fd}', 'tmpfile')\"",
    "python3 -c \"import os; f = open('f', 'w'); os.fchmod(f.fileno(), 0o4755)\"",
    "mkdir x; tar -xpf setuid.tar -C x",
    "python3 -c \"import tarfile; tarfile.open('setuid.tar').extractall('y')\"",
    "mkdir d; chmod g+s d",
    "mkdir -m 2755 d2",
    "cp -p /usr/bin/passwd ./pw 2>&1; cp --preserve=mode /usr/bin/passwd ./pw2",
    "rsync -a /usr/bin/passwd ./pw3 2>&1 || true",
]


async def test_no_setuid_or_setgid_artifact(
    root: Path, bubblewrap: BubblewrapSandbox, attacks: AttackTally
) -> None:
    sandbox = BubblewrapSandbox(root)
    for command in SETUID_ATTEMPTS:
        result = await shell(sandbox, root, command)
        made = setid_files(root)
        attacks.record("sandbox setuid", bool(made), f"{command!r}: {made} {shown(result)[:200]}")
        for name in made:  # so that the next attempt is judged on its own
            (root / name).chmod(0o755)
    # The filter refuses the bit only: ordinary modes still work.
    result = await shell(sandbox, root, "cp /bin/true ok && chmod 755 ok && chmod +x ok && ./ok")
    assert result.ok, shown(result)
    assert stat.S_IMODE((root / "ok").stat().st_mode) == 0o755


async def test_unsandboxed_can_make_setuid_files(root: Path) -> None:
    """Control: the checks see a setuid file when nothing filters (the documented limit of
    ``--no-sandbox``)."""
    result = await shell(Unsandboxed(), root, "cp /bin/true ./t && chmod 4755 ./t")
    assert result.ok, shown(result)
    assert setid_files(root) == ["t"]


def make_venv(root: Path) -> Path:
    venv = root / ".venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    return venv


async def test_the_agents_own_interpreter_stays_read_only(
    tmp_path: Path, bubblewrap: BubblewrapSandbox, attacks: AttackTally
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    venv = make_venv(root)
    (site,) = venv.glob("lib/python3*/site-packages")
    package = root / "src" / "agentfsm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", "utf-8")
    sandbox = BubblewrapSandbox(root, install_paths=[venv, site, package])
    tries = [
        f"echo 'import os' > {site}/evil.pth",
        f"echo x > {site.relative_to(root)}/evil.pth",
        f"echo 'import os' >> {package}/__init__.py",
        f"rm -rf {venv}/bin; touch {venv}/bin/python",
        f"mv {venv} .old && mkdir -p {site} && echo x > {site}/evil.pth",
        f"ln -sf /tmp/x {venv}/bin/python",
        f"mount --bind /tmp {site}; echo x > {site}/evil.pth",
    ]
    python_before = (venv / "bin" / "python").readlink()
    for command in tries:
        result = await shell(sandbox, root, command)
        planted = (site / "evil.pth").exists() or not venv.is_dir()
        planted = planted or (package / "__init__.py").read_text("utf-8") != ""
        planted = planted or (venv / "bin" / "python").readlink() != python_before
        attacks.record("sandbox own interpreter", planted, f"{command!r}: {shown(result)[:200]}")
    result = await shell(sandbox, root, "echo fine > notes.txt && mkdir -p build && touch build/x")
    assert result.ok, shown(result)
    assert (root / "notes.txt").read_text("utf-8") == "fine\n"
    # Without being the agent's own, the same venv is the workspace's, writable.
    result = await shell(BubblewrapSandbox(root, install_paths=[]), root, f"touch {site}/ok.pth")
    assert result.ok, shown(result)


def test_the_default_install_paths_are_the_agents() -> None:
    assert BubblewrapSandbox("/tmp").install_paths == agent_install_paths()


SECRETS = {
    "LLM_CREDS": "llm",
    "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20otel",
    "GITHUB_TOKEN": "gh",
    "DATABASE_URL": "postgres://u:pw@db/app",
    "http_proxy": "http://user:pw@proxy:3128",
    "HTTPS_PROXY": "http://user:pw@proxy:3128",
    "FOO": "foo",
    "SSH_AUTH_SOCK": "/run/agent.sock",
}


@pytest.mark.parametrize("kind", ["bubblewrap", "none"])
async def test_the_environment_is_an_allow_list(
    tmp_path: Path, kind: str, attacks: AttackTally, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, f"{value}-{CANARY}")
    monkeypatch.setenv("MY_TOOL_HOME", f"wanted-{CANARY}")
    monkeypatch.setenv("LC_TIME", "C")
    env = ["MY_TOOL_HOME"]
    sandbox: CommandSandbox = (
        detect_sandbox(tmp_path, env=env) if kind == "bubblewrap" else Unsandboxed(env=env)
    )
    for command in (
        "env",
        "cat /proc/self/environ",
        "set",
        "python3 -c 'import os; print(dict(os.environ))'",
    ):
        text = shown(await shell(sandbox, tmp_path, command))
        leaked = [name for name, value in SECRETS.items() if f"{value}-{CANARY}" in text]
        attacks.record("sandbox environment", bool(leaked), f"{kind} {command!r}: {leaked}")
        assert f"wanted-{CANARY}" in text  # a sandbox.env name is passed
        assert "LC_TIME" in text
    text = shown(await shell(sandbox, tmp_path, "printenv PATH HOME"))
    assert os.environ["PATH"] in text
    if kind == "bubblewrap":
        assert "/tmp/home" in text


@pytest.fixture
def etc_secrets() -> Iterator[list[Path]]:
    """A root-only file and a root-only folder (with a file) under ``/etc``; the walk of
    ``/etc`` is cached per process, so the cache is cleared around the test."""
    if os.geteuid() != 0:
        pytest.skip("creating files under /etc needs root")
    made = [Path(f"/etc/{CANARY}-secret"), Path(f"/etc/{CANARY}-dir")]
    try:  # nothing is left under /etc, whatever fails
        made[0].write_text(f"keystore password {CONTENT}\n", "utf-8")
        made[0].chmod(0o600)
        made[1].mkdir(mode=0o700)
        (made[1] / "inner.conf").write_text(f"token {CONTENT}\n", "utf-8")
        (made[1] / "inner.conf").chmod(0o644)  # readable itself: the folder hides it
        hidden_module._etc_hidden.cache_clear()
        yield made
    finally:
        made[0].unlink(missing_ok=True)
        shutil.rmtree(made[1], ignore_errors=True)
        hidden_module._etc_hidden.cache_clear()


READ_ETC = [
    "cat /etc/{c}-secret /etc/{c}-dir/inner.conf",
    "ls -la /etc/{c}-dir; grep -r secret-content /etc 2>/dev/null | head",
    "cat /etc/shadow /etc/gshadow",
    "python3 -c \"print(open('/etc/{c}-secret').read())\"",
    "cd /etc && cat ./{c}-secret ../etc/{c}-dir/inner.conf",
]


def etc_leaked(text: str) -> bool:
    return CONTENT in text or any(line.startswith("root:") for line in text.splitlines())


async def test_root_only_etc_files_are_hidden(
    tmp_path: Path, etc_secrets: list[Path], attacks: AttackTally
) -> None:
    sandbox = BubblewrapSandbox(tmp_path)
    for template in READ_ETC:
        command = template.format(c=CANARY)
        text = shown(await shell(sandbox, tmp_path, command))
        attacks.record("sandbox /etc", etc_leaked(text), f"{command!r}: {text[:200]}")
    result = await shell(sandbox, tmp_path, "grep -c '^root:' /etc/passwd")
    assert result.ok, shown(result)
    assert result.output.strip() == "1"  # others may read /etc/passwd: still there
    assert str(etc_secrets[0]) in sandbox.describe()["hidden"]


async def test_widened_paths_do_not_uncover_what_is_hidden(
    tmp_path: Path, etc_secrets: list[Path], attacks: AttackTally
) -> None:
    root = tmp_path / "ws"
    (root / ".agentfsm").mkdir(parents=True)
    settings = json.dumps({"permissions": {"deny": [f"read_file({CONTENT})"]}})
    (root / ".agentfsm" / "settings.json").write_text(settings, "utf-8")
    widenings: list[dict[str, list[str | Path]]] = [
        {"read_paths": ["/etc"]},
        {"read_paths": ["/etc/ssl", f"/etc/{CANARY}-dir"]},
        {"read_paths": [f"/etc/{CANARY}-secret"]},
        {"write_paths": [tmp_path]},
        {"read_paths": [root / ".agentfsm"], "write_paths": [root / ".agentfsm"]},
    ]
    commands = [
        *(t.format(c=CANARY) for t in READ_ETC),
        "cat .agentfsm/settings.json",
        f"cat {root}/.agentfsm/settings.json ../ws/.agentfsm/settings.json",
        f"echo '{{}}' > {root}/.agentfsm/settings.json",
        f"echo pwned > /etc/{CANARY}-secret",
    ]
    for widening in widenings:
        sandbox = BubblewrapSandbox(root, **widening)  # type: ignore[arg-type]
        for command in commands:
            text = shown(await shell(sandbox, root, command))
            intact = (root / ".agentfsm" / "settings.json").read_text("utf-8") == settings
            secret = etc_secrets[0].read_text("utf-8").startswith("keystore")
            escaped = etc_leaked(text) or not intact or not secret
            attacks.record("sandbox mount order", escaped, f"{widening} {command!r}: {text[:150]}")
    for paths in ({"read_paths": ["/"]}, {"write_paths": ["//"]}, {"read_paths": ["/etc/.."]}):
        with pytest.raises(ValueError, match="cannot hold /"):
            BubblewrapSandbox(root, **paths)  # type: ignore[arg-type]
        attacks.record("sandbox mount order", False, f"{paths} refused")
    # A write path holding hidden entries: the model could rename the folders above them.
    for folder in ("/etc", f"/etc/{CANARY}-dir/.."):
        with pytest.raises(ValueError, match="cannot be /etc: it holds"):
            BubblewrapSandbox(root, write_paths=[folder])
        attacks.record("sandbox mount order", False, f"write path {folder} refused")


def fake_bwrap(tmp_path: Path, version: str) -> Path:
    fake = tmp_path / f"bwrap-{version}"  # the version is cached per path
    fake.write_text(f"#!/bin/sh\necho 'bubblewrap {version}'\n", "utf-8")
    fake.chmod(0o755)
    return fake


def test_bubblewrap_older_than_0_8_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox_module, "_PROBES", {})
    fake = fake_bwrap(tmp_path, "0.7.0")
    for build in (detect_sandbox, BubblewrapSandbox):
        with pytest.raises(SandboxUnavailable) as refused:
            build(tmp_path, bwrap=str(fake))
        message = str(refused.value)
        assert "bubblewrap 0.7.0" in message
        assert "--disable-userns" in message
        assert "upgrade bubblewrap (0.8 or newer)" in message
    newer = BubblewrapSandbox(tmp_path, bwrap=str(fake_bwrap(tmp_path, "0.11.0")))
    assert "--disable-userns" in newer.argv("true", tmp_path)
