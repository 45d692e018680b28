"""The user's toolchains work read-only in the sandbox; the home's secrets stay hidden.

A fake home (``HOME`` and ``PATH`` of this process are set to it; the real home is not
touched) holds a real Python install, copied from the interpreter running the tests into
``~/.pyenv/versions/<version>/``, and the secrets a home holds. A workspace ``.venv`` built
from that interpreter runs ``python -m pytest`` in the real bubblewrap sandbox through the
real ``shell`` tool; every secret stays unreadable, whatever the ``PATH`` holds (``/``, the
home, a secret folder, symlinks and ``#!`` lines pointing into one) and whatever a
``pyvenv.cfg`` written into the workspace names.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentfsm import ToolCall, ToolMessage, ToolResult
from agentfsm.adapters.tools import ToolBox, workspace_tools
from agentfsm.cli import main
from agentfsm.sandbox import BubblewrapSandbox
from agentfsm.sandbox._hidden import HOME_SECRET_DIRS, HOME_SECRET_FILES
from agentfsm.sandbox._missing import not_found_note
from agentfsm.sandbox._toolchains import toolchain_view
from agentfsm.testing import ScriptedChat, tool_reply

from .tally import AttackTally

pytestmark = pytest.mark.usefixtures("bubblewrap")

CANARY = f"agentfsm-canary-{time.monotonic_ns()}"
VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
PYTEST_PARTS = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py")
"""What ``python -m pytest`` imports, copied from the tests' own environment."""
_SKIPPED = {"__pycache__", "test", "tests", "site-packages", "idlelib", "tkinter", "turtledemo"}


def _copy_python(prefix: Path) -> Path:
    """A real Python install at ``prefix``: the running interpreter's binary, its shared
    library and its standard library (without tests, caches and site-packages)."""
    base = Path(sys.base_prefix)
    binary = Path(os.path.realpath(getattr(sys, "_base_executable", sys.executable)))
    (prefix / "bin").mkdir(parents=True)
    target = prefix / "bin" / f"python{VERSION}"
    shutil.copy2(binary, target)
    (prefix / "bin" / "python3").symlink_to(target.name)
    (prefix / "bin" / "python").symlink_to(target.name)
    (prefix / "lib").mkdir()
    for library in base.glob(f"lib/libpython{VERSION}*.so*"):
        shutil.copy2(library, prefix / "lib" / library.name)
    stdlib = base / "lib" / f"python{VERSION}"
    shutil.copytree(
        stdlib,
        prefix / "lib" / f"python{VERSION}",
        ignore=lambda folder, names: [n for n in names if n in _SKIPPED],
        symlinks=True,
    )
    (prefix / "lib" / f"python{VERSION}" / "site-packages").mkdir()
    return target


def _copy_pytest(site_packages: Path) -> None:
    for name in PYTEST_PARTS:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        if spec.submodule_search_locations:
            shutil.copytree(origin.parent, site_packages / origin.parent.name)
        else:
            shutil.copy2(origin, site_packages / origin.name)


class Home:
    """A fake home with a Python under ``~/.pyenv``, secrets, and a workspace using it."""

    def __init__(self, base: Path) -> None:
        self.home = base / "home"
        self.prefix = self.home / ".pyenv" / "versions" / f"{VERSION}.0"
        self.python = _copy_python(self.prefix)
        (self.home / ".pyenv" / "version").write_text(f"{VERSION}.0\n", "utf-8")
        shims = self.home / ".pyenv" / "shims"
        shims.mkdir()
        shim = shims / "python3"
        # What a pyenv shim does: run the version named in $PYENV_ROOT/version.
        shim.write_text(
            "#!/bin/sh\n"
            f'export PYENV_ROOT="{self.home}/.pyenv"\n'
            'exec "$PYENV_ROOT/versions/$(cat "$PYENV_ROOT/version")/bin/python3" "$@"\n',
            "utf-8",
        )
        shim.chmod(0o755)
        self.root = base / "project"
        self.root.mkdir()
        subprocess.run(
            [str(self.python), "-m", "venv", "--without-pip", str(self.root / ".venv")],
            check=True,
            env={"PATH": "/usr/bin:/bin"},
        )
        _copy_pytest(self.root / ".venv" / "lib" / f"python{VERSION}" / "site-packages")
        (self.root / "test_tiny.py").write_text("def test_sum():\n    assert 1 + 1 == 2\n")
        self.other = base / "other-project"
        (self.other / "bin").mkdir(parents=True)
        (self.other / "secret.txt").write_text(f"{CANARY}-other\n", "utf-8")
        self.secrets = self._plant_secrets()

    def _plant_secrets(self) -> list[Path]:
        planted = []
        for name in HOME_SECRET_DIRS:
            folder = self.home / name
            folder.mkdir(parents=True)
            (folder / "key").write_text(f"{CANARY}-{name}\n", "utf-8")
            planted.append(folder / "key")
        for name in HOME_SECRET_FILES:
            path = self.home / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{CANARY}-{name}\n", "utf-8")
            planted.append(path)
        (self.home / ".ssh" / "id_rsa").write_text(f"PRIVATE KEY {CANARY}\n", "utf-8")
        (self.home / ".cargo" / "bin").mkdir(parents=True)
        # PATH folders whose commands point into the secrets.
        (self.home / "bin").mkdir()
        (self.home / "bin" / "keys").symlink_to(self.home / ".ssh" / "id_rsa")
        (self.home / "bin" / "aws").symlink_to(self.home / ".aws" / "key")
        script = self.home / "bin" / "gpg-run"
        script.write_text(f"#!{self.home}/.gnupg/key\n", "utf-8")
        script.chmod(0o755)
        (self.home / ".local" / "bin").mkdir(parents=True)
        (self.home / ".local" / "bin" / "ring").symlink_to(self.home / ".local/share/keyrings/key")
        return planted


@pytest.fixture(scope="module")
def fake_home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    return Home(tmp_path_factory.mktemp("toolchains"))


@pytest.fixture
def home(fake_home: Home, monkeypatch: pytest.MonkeyPatch) -> Home:
    monkeypatch.setenv("HOME", str(fake_home.home))
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "HISTFILE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("VIRTUAL_ENV", "PYENV_ROOT", "CARGO_HOME", "RUSTUP_HOME", "GOROOT"):
        monkeypatch.delenv(name, raising=False)
    return fake_home


def set_path(monkeypatch: pytest.MonkeyPatch, *folders: str | Path) -> None:
    monkeypatch.setenv("PATH", os.pathsep.join([*map(str, folders), "/usr/bin", "/bin"]))


async def shell(box: ToolBox, command: str) -> ToolResult:
    return await box.run(ToolCall("c", "shell", {"command": command, "timeout": 60}))


def shown(result: ToolResult) -> str:
    return f"{result.output}\n{result.error or ''}"


async def test_python_from_a_hidden_home_runs_pytest_in_the_sandbox(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_path(monkeypatch, home.root / ".venv" / "bin")
    result = await shell(workspace_tools(home.root), "python -m pytest -q -p no:cacheprovider")
    assert result.ok, shown(result)
    assert "1 passed" in result.output
    prefix = await shell(
        workspace_tools(home.root), "python -c 'import sys; print(sys.base_prefix)'"
    )
    assert prefix.output.strip() == str(home.prefix)
    # Without the toolchains the venv's interpreter is not there: what the issue reported.
    bare = BubblewrapSandbox(home.root, toolchains=False)
    before = await shell(workspace_tools(home.root, sandbox=bare), "python -m pytest -q")
    assert not before.ok
    assert "exit code 127" in (before.error or "")


async def test_a_pyenv_shim_on_path_runs_its_version(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_path(monkeypatch, home.home / ".pyenv" / "shims")
    result = await shell(
        workspace_tools(home.root), "python3 -c 'import sys, json, ssl; print(sys.prefix)'"
    )
    assert result.ok, shown(result)
    assert result.output.strip() == str(home.prefix)


async def test_home_secrets_stay_hidden_whatever_path_holds(
    home: Home, monkeypatch: pytest.MonkeyPatch, attacks: AttackTally
) -> None:
    """``PATH`` holds ``/``, the home, a secret folder, cargo's ``bin`` (so ``~/.cargo`` is
    shown, its credentials file must not be), folders with symlinks and a ``#!`` line into
    secrets; a ``pyvenv.cfg`` in the workspace names the home, a secret folder and another
    project."""
    h = home.home
    for name, target in (("a", h), ("b", h / ".ssh"), ("c", home.other / "bin")):
        (home.root / name).mkdir(exist_ok=True)
        (home.root / name / "pyvenv.cfg").write_text(f"home = {target}\n", "utf-8")
    set_path(
        monkeypatch,
        home.root / ".venv" / "bin",
        "/",
        h,
        h / ".ssh",
        h / ".config",
        h / "bin",
        h / ".local" / "bin",
        h / ".cargo" / "bin",
    )
    box = workspace_tools(home.root)
    described = (await shell(box, "true")).ok
    assert described
    tries = {
        "toolchains: read a home secret": [
            *(f"cat {path}" for path in home.secrets),
            f"cat {h}/.ssh/id_rsa",
            "cat ~/.ssh/id_rsa ~/.netrc ~/.bash_history",
            f"ls -laR {h}; cat {h}/.*/* {h}/.*",
            f"grep -rs {CANARY} {h} /tmp",
        ],
        "toolchains: through a PATH command": [
            "cat $(command -v keys) $(command -v aws) $(command -v ring)",
            f"cat {h}/bin/keys {h}/bin/aws {h}/.local/bin/ring",
            "head -c 300 $(command -v gpg-run); gpg-run",
        ],
        "toolchains: pyvenv.cfg names a folder": [
            f"cat {home.other}/secret.txt",
            f"grep -rs {CANARY} {home.other}",
        ],
    }
    for kind, commands in tries.items():
        for command in commands:
            text = shown(await shell(box, command))
            attacks.record(kind, CANARY in text, f"{command!r}: {text[:200]}")
    # What must still work: the venv's python, and a PATH folder of the home.
    ran = await shell(box, f"python -c 'print(1)' && ls {h}/bin && ls {h}/.cargo")
    assert ran.ok, shown(ran)


UNLISTED = f"agentfsm-unlisted-{time.monotonic_ns()}"
"""What a secret no list names holds (not :data:`CANARY`: a read path may show it)."""
SETTINGS_FOLDERS = (".config/git", ".m2", ".gem", ".config/pip", ".terraform.d", ".aws")
"""Folders of a home that hold settings and secrets, not toolchains."""


def _commands_into_settings_folders(h: Path) -> Path:
    """A ``PATH`` folder whose commands lead into :data:`SETTINGS_FOLDERS`: a symlink to a
    program there and a script whose ``#!`` interpreter lies there; beside each, a secret
    no list names."""
    links = h / "links-bin"
    if links.exists():
        return links
    links.mkdir()
    for index, name in enumerate(SETTINGS_FOLDERS):
        folder = h / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "unlisted-secret.txt").write_text(f"{UNLISTED}-{name}\n", "utf-8")
        helper = folder / "helper"
        helper.write_text(f"#!/bin/sh\necho helper {index} ran\n", "utf-8")
        helper.chmod(0o755)
        (links / f"helper-{index}").symlink_to(helper)
        shutil.copy2(os.path.realpath("/bin/sh"), folder / "interp")
        script = links / f"run-{index}"
        script.write_text(f"#!{folder}/interp\necho script {index} ran\n", "utf-8")
        script.chmod(0o755)
    return links


async def test_commands_leading_into_the_home_show_one_file_not_its_folder(
    home: Home, monkeypatch: pytest.MonkeyPatch, attacks: AttackTally
) -> None:
    """A symlink or a ``#!`` line in a ``PATH`` folder pointing into ``~/.config/git``,
    ``~/.m2``, ``~/.gem``, ``~/.config/pip`` shows that one file: the command runs, and
    neither a listed secret (git's credentials, Maven's settings, gem's credentials,
    ``pip.conf``) nor one no list names beside it can be read. Into a secret folder
    (``~/.terraform.d``, ``~/.aws``) nothing is shown."""
    h = home.home
    set_path(monkeypatch, _commands_into_settings_folders(h))
    box = workspace_tools(home.root)
    for index, name in enumerate(SETTINGS_FOLDERS):
        folder = h / name
        secret = name in HOME_SECRET_DIRS
        ran = await shell(box, f"helper-{index} && run-{index}")
        if secret:
            assert not ran.ok, shown(ran)
        else:
            assert ran.output.split("\n")[:2] == [f"helper {index} ran", f"script {index} ran"]
        for command in (
            f"cat {folder}/unlisted-secret.txt",
            f"ls -la {folder}; cat {folder}/*",
            f"grep -rs {UNLISTED} {h}",
        ):
            text = shown(await shell(box, command))
            leaked = CANARY in text or UNLISTED in text
            attacks.record("toolchains: a command leads into the home", leaked, text[:200])
    for path in home.secrets:
        text = shown(await shell(box, f"cat {path}"))
        attacks.record("toolchains: a command leads into the home", CANARY in text, str(path))
    read = BubblewrapSandbox(home.root).toolchains.read
    folders = [h / name for name in SETTINGS_FOLDERS]
    assert not any(p.is_dir() and p.is_relative_to(f) for p in read for f in folders), read


async def test_command_not_found_says_what_the_sandbox_sees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "opt" / "mytool"
    (tools / "bin").mkdir(parents=True)
    program = tools / "bin" / "mytool"
    program.write_text("#!/bin/sh\necho mytool ran\n", "utf-8")
    program.chmod(0o755)
    root = tmp_path / "ws"
    root.mkdir()
    set_path(monkeypatch, tools / "bin")
    bare = BubblewrapSandbox(root, toolchains=False)
    box = workspace_tools(root, sandbox=bare)
    result = await shell(box, "mytool")
    error = result.error or ""
    assert not result.ok
    assert error.startswith("exit code 127: `mytool` was not found inside the sandbox")
    assert f"its PATH is {tools / 'bin'}:/usr/bin:/bin" in error
    assert f"the sandbox does not show {tools / 'bin'}" in error
    assert f"outside the sandbox it is {program}, in a folder the sandbox does not show" in error
    snippet = f'{{"sandbox": {{"read": ["{tools}"]}}}}'
    assert snippet in error
    # The note's advice works: with that folder read-only, the command runs.
    widened = BubblewrapSandbox(root, toolchains=False, read_paths=[tools])
    ran = await shell(workspace_tools(root, sandbox=widened), "mytool")
    assert ran.ok, shown(ran)
    assert ran.output.strip() == "mytool ran"
    # And without settings the toolchain rule shows it already.
    shown_now = await shell(workspace_tools(root), "mytool")
    assert shown_now.ok, shown(shown_now)
    missing = await shell(box, "no-such-program-xyz --help")
    assert "`no-such-program-xyz` is not on the PATH outside the sandbox either" in (
        missing.error or ""
    )
    other = await shell(box, "exit 127")
    assert other.error == "exit code 127"


def test_what_the_sandbox_shows_of_the_home(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    h = home.home
    set_path(monkeypatch, "/", h, h / ".ssh", h / ".config", h / "bin", h / ".local" / "bin")
    monkeypatch.setenv("PATH", f"{os.environ['PATH']}:{h / '.cargo' / 'bin'}")
    described = BubblewrapSandbox(home.root).describe()
    toolchains = described["toolchains"]
    assert str(h / "bin") in toolchains
    assert str(h / ".local" / "bin") in toolchains  # not ~/.local: it holds keyrings, state
    assert str(h / ".cargo" / "bin") in toolchains  # not ~/.cargo: it holds credentials
    for refused in ("/", h, h / ".ssh", h / ".config", h / ".local", h / ".aws", h / ".cargo"):
        assert str(refused) not in toolchains
    assert not any(Path(p).is_relative_to(h / ".ssh") for p in toolchains)
    assert "CARGO_HOME" in described["environment"]


async def test_secrets_in_a_read_path_stay_hidden(
    home: Home, monkeypatch: pytest.MonkeyPatch, attacks: AttackTally
) -> None:
    """The hidden list as the second layer: read paths (``~/.local``, ``~/.config``) that
    hold secrets (keyrings, the agent's own state and settings, gh's token, git's
    credentials) show none of them; as a workspace, where the model could rename the
    folders above them, they are refused, as the home itself is."""
    set_path(monkeypatch)
    h = home.home
    for refused in (h, h.parent):
        with pytest.raises(ValueError, match="home folder"):
            BubblewrapSandbox(refused)
        with pytest.raises(ValueError, match="home folder"):
            BubblewrapSandbox(home.root, read_paths=[refused])
    for holder in (h / ".local", h / ".config"):
        with pytest.raises(ValueError, match="it holds"):
            BubblewrapSandbox(holder)
        attacks.record("toolchains: secret inside the workspace", False, f"{holder} refused")
    sandbox = BubblewrapSandbox(home.root, read_paths=[h / ".local", h / ".config"])
    box = workspace_tools(home.root, sandbox=sandbox)
    inside = [
        p for p in home.secrets if p.is_relative_to(h / ".local") or p.is_relative_to(h / ".config")
    ]
    assert len(inside) >= 8
    for path in inside:
        command = f"cat {path}; ls -a {path.parent}"
        text = shown(await shell(box, command))
        attacks.record("toolchains: secret inside the workspace", CANARY in text, text[:200])
    text = shown(await shell(box, f"grep -rs {CANARY} . {h}/.config {h}/.local /tmp"))
    attacks.record("toolchains: secret inside the workspace", CANARY in text, text[:200])
    listed = await shell(box, f"ls -a {h}/.local/share/keyrings")
    assert listed.output.split() == [".", ".."], shown(listed)
    planted = await shell(box, f"echo new > {h}/.local/state/agentfsm/planted")
    assert "Read-only file system" in planted.output
    assert not (h / ".local" / "state" / "agentfsm" / "planted").exists()


def test_the_view_of_rustup_asdf_uv_and_goroot(tmp_path: Path) -> None:
    h = tmp_path / "home"
    for folder in (".cargo/bin", ".rustup/toolchains", ".asdf/shims", "go/root/bin"):
        (h / folder).mkdir(parents=True)
    (h / ".local/share/uv/python/cpython-3.12/bin").mkdir(parents=True)
    (h / ".tool-versions").write_text("python 3.12.0\n", "utf-8")
    root = tmp_path / "ws"
    root.mkdir()
    environ = {
        "HOME": str(h),
        "PATH": f"{h}/.cargo/bin:{h}/.asdf/shims:/usr/bin",
        "GOROOT": f"{h}/go/root",
        "RUSTUP_TOOLCHAIN": "stable",
        "OPENAI_API_KEY": "sk-x",
    }
    view = toolchain_view(root, ["/usr"], environ)
    assert set(view.read) == {
        h / ".cargo/bin",
        h / ".rustup/toolchains",
        h / ".asdf",
        h / ".tool-versions",
        h / ".local/share/uv/python",
        h / "go/root",
    }
    assert dict(view.env) == {
        "CARGO_HOME": str(h / ".cargo"),
        "RUSTUP_HOME": str(h / ".rustup"),
        "ASDF_DATA_DIR": str(h / ".asdf"),
        "GOROOT": f"{h}/go/root",
        "RUSTUP_TOOLCHAIN": "stable",
    }


def test_the_127_note_reads_the_shells_messages_and_probes_no_host_path(
    home: Home, monkeypatch: pytest.MonkeyPatch, attacks: AttackTally
) -> None:
    set_path(monkeypatch, home.home / "bin")

    def hidden(path: str) -> bool:
        return False

    for output, name in (
        ("/bin/sh: 1: gradle: not found\n", "gradle"),
        ("bash: line 3: gradle: command not found\n", "gradle"),
        ("zsh:1: command not found: gradle\n", "gradle"),
        ("/usr/bin/env: \u2018gradle\u2019: No such file or directory\n", "gradle"),
        ("/usr/bin/env: 'gradle': No such file or directory\n", "gradle"),
        ("sh: 1: a: not found\nsh: 2: keys: not found\n", "keys"),
        ("/x/shims/node: line 3: /x/bin/asdf: No such file or directory\n", "/x/bin/asdf"),
    ):
        note = not_found_note(output, "/usr/bin", hidden) or ""
        assert note.startswith(f"`{name}` was not found inside the sandbox"), output
    note = not_found_note("sh: 1: gpg-run: not found", "/usr/bin", hidden) or ""
    where = f"{home.home}/bin/gpg-run, in a folder the sandbox does not show"
    assert f"outside the sandbox it is {where}" in note
    # The folder above a home's bin is the home: the note names the bin folder instead.
    assert f'{{"read": ["{home.home}/bin"]}}' in note
    assert not_found_note("done\n", "/usr/bin", hidden) is None
    weird = not_found_note("sh: 1: x\ud800\u2028y: not found\nsh: 1: \udcff: not found", "", hidden)
    assert weird is not None
    assert "its PATH is (empty)" in weird
    # The model controls the output: a path in it must not tell whether that file exists.
    for secret in home.secrets:
        fake = secret.with_name("absent-" + secret.name)
        real_note = not_found_note(f"sh: 1: {secret}: not found", "/usr/bin", hidden)
        fake_note = not_found_note(f"sh: 1: {fake}: not found", "/usr/bin", hidden)
        differs = (real_note or "").replace(str(secret), "X") != (fake_note or "").replace(
            str(fake), "X"
        )
        attacks.record("toolchains: 127 note probes the host", differs, str(secret))
    for probe in ("..", ".ssh", "id_rsa"):
        note = not_found_note(f"sh: 1: {probe}: not found", "/usr/bin", hidden) or ""
        leaked = "outside the sandbox it is" in note
        attacks.record("toolchains: 127 note probes the host", leaked, note[:200])


async def test_what_the_model_writes_does_not_choose_what_is_shown(
    home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attacks: AttackTally
) -> None:
    """Files the model wrote before the sandbox is made (a resumed run, a ``shell`` tool
    made on first use): symlinks and ``#!`` lines in a writable ``PATH`` folder, and a
    ``pyvenv.cfg`` reaching a folder that looks like a Python install through a symlink."""
    root = tmp_path / "ws"
    looks_like_python = tmp_path / "private"
    (looks_like_python / "lib" / f"python{VERSION}").mkdir(parents=True)
    (looks_like_python / "lib" / f"python{VERSION}" / "os.py").write_text("", "utf-8")
    (looks_like_python / "bin").mkdir()
    (looks_like_python / "secret.txt").write_text(f"{CANARY}-private\n", "utf-8")
    tools = root / "tools" / "bin"
    tools.mkdir(parents=True)
    (tools / "x").symlink_to(home.other / "secret.txt")
    (tools / "py").symlink_to(looks_like_python / "bin" / "python3")
    script = tools / "y"
    script.write_text(f"#!{home.other}/bin/interp\n", "utf-8")
    (root / "link").symlink_to(looks_like_python)
    (root / "env").mkdir()
    (root / "env" / "pyvenv.cfg").write_text(f"home = {root}/link/bin\n", "utf-8")
    set_path(monkeypatch, tools, root / "link" / "bin")
    box = workspace_tools(root)
    for command in (
        f"cat {home.other}/secret.txt {looks_like_python}/secret.txt",
        "cat tools/x link/secret.txt",
        f"ls -la {home.other} {looks_like_python}",
    ):
        text = shown(await shell(box, command))
        attacks.record("toolchains: model-written file widens the view", CANARY in text, text)
    sandbox = BubblewrapSandbox(root)
    assert sandbox.toolchains.read == ()


def test_a_bin_folder_brings_its_prefix_only_when_it_is_one(tmp_path: Path) -> None:
    h = tmp_path / "home"
    src = h / "src"
    for folder in ("bin", "ws", "other-project", "tools/bin", "tools/lib"):
        (src / folder).mkdir(parents=True)
    environ = {"HOME": str(h), "PATH": f"{src}/bin:{src}/tools/bin:/usr/bin"}
    view = toolchain_view(src / "ws", ["/usr"], environ)
    assert set(view.read) == {src / "bin", src / "tools"}
    # A toolchain folder above the workspace would show the projects beside it.
    (src / "lib").mkdir()
    view = toolchain_view(src / "ws", ["/usr"], environ)
    assert set(view.read) == {src / "bin", src / "tools"}


def test_agentfsm_run_runs_the_projects_pytest(
    home: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case end to end: ``agentfsm run`` in a project whose ``.venv`` was built
    on a Python under the (hidden) home; the model runs ``python -m pytest -q``."""
    set_path(monkeypatch, home.root / ".venv" / "bin")
    command = "python -m pytest -q -p no:cacheprovider test_tiny.py; cat ~/.ssh/id_rsa"
    chat = ScriptedChat([tool_reply(("shell", {"command": command})), "done"])
    sessions = ["--session-dir", str(tmp_path / "sessions")]
    assert main(["run", "run the tests", "--workspace", str(home.root), *sessions], chat=chat) == 0
    result = chat.requests[1].messages[-1]
    assert isinstance(result, ToolMessage)
    assert "1 passed" in result.content
    assert "id_rsa: No such file or directory" in result.content
    assert CANARY not in result.content
    capsys.readouterr()
