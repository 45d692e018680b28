"""What ``write_file`` and ``edit_file`` may change: no setuid or setgid bit kept or gained,
the agent's own installation left alone, and no answer of ``edit_file`` (or ``write_file``)
that tells anything about a file the ``read_file`` rules deny.

An attack got through when a written file carries a set-ID bit, when a file of the
installation changed or appeared, or when two answers about a read-denied file differ
(the edit oracle: ``edit_file(path, old=guess, new=guess)`` answering "not found" for a
wrong guess and "edited" for a right one rebuilds the file character by character).
"""

from __future__ import annotations

import hashlib
import os
import site
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import agentfsm
from agentfsm import ToolResult
from agentfsm.adapters.tools import Permissions, WorkspaceTools

from .tally import AttackTally

SETID = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX


def _setid_bits(path: Path) -> int:
    return os.stat(path, follow_symlinks=False).st_mode & SETID


def test_write_and_edit_drop_setuid_and_setgid(tmp_path: Path, attacks: AttackTally) -> None:
    kind = "path tools setuid"
    tools = WorkspaceTools(tmp_path)
    for mode in (0o4755, 0o2755, 0o6755, 0o6777, 0o1755, 0o4700):
        for tool in ("write_file", "edit_file"):
            path = tmp_path / f"prog-{tool}-{mode:o}"
            path.write_text("#!/bin/sh\necho hi\n", "utf-8")
            os.chmod(path, mode)
            assert _setid_bits(path) == mode & SETID  # the trap is set
            if tool == "write_file":
                result = tools.write_file(path.name, "#!/bin/sh\nexec /bin/sh -p\n")
            else:
                result = tools.edit_file(path.name, "echo hi", "exec /bin/sh -p")
            assert result.ok, result.error
            assert path.read_text("utf-8").endswith("exec /bin/sh -p\n")
            got = os.stat(path).st_mode
            attacks.record(kind, bool(got & SETID), f"{tool} over {mode:o} left {got:o}")
            # The permission bits themselves are kept.
            assert stat.S_IMODE(got) == mode & 0o777
    # A file created by write_file, in a setgid folder too, has no set-ID bit either.
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o2777)
    for name in ("fresh.sh", "shared/fresh.sh", "shared/new/deeper.sh"):
        result = tools.write_file(name, "#!/bin/sh\n")
        assert result.ok, result.error
        got = os.stat(tmp_path / name).st_mode
        attacks.record(kind, bool(got & SETID), f"write_file created {name} as {got:o}")


SECRET = "tok-8f3Kq-zX1!"
ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-!_"


def _answer(result: ToolResult) -> tuple[bool, str, str | None, tuple[tuple[str, str], ...]]:
    return result.ok, result.output, result.error, tuple(sorted(result.metadata.items()))


@pytest.mark.parametrize(
    "permissions",
    [
        Permissions.of(deny=["read_file(secrets/**)"]),
        Permissions.of(allow=["read_file(src/**)"]),
    ],
    ids=["read deny rule", "read allow rule"],
)
def test_the_edit_file_oracle_learns_nothing(
    tmp_path: Path, attacks: AttackTally, permissions: Permissions
) -> None:
    kind = "edit_file oracle"
    (tmp_path / "secrets").mkdir()
    key = tmp_path / "secrets" / "key.txt"
    key.write_text(SECRET, "utf-8")
    (tmp_path / "alias").symlink_to("secrets/key.txt")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("x = 1\n", "utf-8")
    tools = WorkspaceTools(tmp_path, permissions)
    answers: set[tuple[bool, str, str | None, tuple[tuple[str, str], ...]]] = set()

    def probe(path: str, old: str, new: str) -> None:
        result = tools.edit_file(path, old, new)
        answer = _answer(result)
        answers.add(answer)
        leaked = result.ok or len(answers) > 1 or key.read_text("utf-8") != SECRET
        attacks.record(kind, leaked, f"edit_file({path!r}, {old!r}) -> {answer}")

    # The attack of the issue: extend a known prefix one character at a time, keeping the
    # character whose answer differs. Played here with the right prefix given for free, so
    # any difference between a right and a wrong guess shows.
    for path in ("secrets/key.txt", "alias", "./secrets//key.txt"):
        for i in range(len(SECRET)):
            prefix = SECRET[:i]
            for char in (SECRET[i], "#", *ALPHABET[:4]):
                probe(path, prefix + char, prefix + char)
        probe(path, SECRET, "changed")
        probe(path, "not in it", "changed")
    # A missing file, a missing folder and a folder answer the same as the present file.
    for path in ("secrets/missing.txt", "secrets/no/such/file", "secrets/no/"):
        probe(path, "tok", "tok")
    assert len(answers) == 1
    (ok, _, error, meta) = answers.pop()
    assert not ok
    assert not meta
    assert error is not None
    assert error.startswith("permission denied")
    # read_file gives the very same refusal, and an allowed edit still works.
    assert tools.read_file("secrets/key.txt").error == error
    assert tools.edit_file("src/app.py", "x = 1", "x = 2").ok


def test_write_file_over_a_read_denied_file_records_nothing_of_it(
    tmp_path: Path, attacks: AttackTally
) -> None:
    kind = "write_file over a read-denied file"
    (tmp_path / "secrets").mkdir()
    tools = WorkspaceTools(tmp_path, Permissions.of(deny=["read_file(secrets/**)"]))
    secret_sha = hashlib.sha256(SECRET.encode()).hexdigest()[:16]
    answers = []
    for present in (True, False):
        key = tmp_path / "secrets" / "key.txt"
        if present:
            key.write_text(SECRET, "utf-8")
        elif key.exists():
            key.unlink()
        result = tools.write_file("secrets/key.txt", "new content")
        assert result.ok, result.error
        answers.append((result.output, result.metadata))
        text = f"{result.output} {result.error} {result.metadata}"
        attacks.record(kind, secret_sha in text or SECRET in text, f"present={present}: {text}")
        assert "before_sha" not in result.metadata
    attacks.record(kind, answers[0] != answers[1], f"answers differ: {answers}")
    # An allowed path still reports the hash of what it replaced (loop health uses it).
    (tmp_path / "open.txt").write_text("old", "utf-8")
    assert "before_sha" in tools.write_file("open.txt", "new").metadata


def _install(root: Path) -> dict[str, bytes]:
    """A project venv and an editable agentfsm inside ``root``; their files and content."""
    site_packages = root / ".venv" / "lib" / "python3.11" / "site-packages"
    site_packages.mkdir(parents=True)
    (root / ".venv" / "lib64").symlink_to("lib")
    (root / ".venv" / "bin").mkdir()
    (root / ".venv" / "bin" / "python").write_text("#!/bin/sh\n", "utf-8")
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n", "utf-8")
    (site_packages / "dep.py").write_text("VALUE = 1\n", "utf-8")
    (site_packages / "distutils-precedence.pth").write_text("import os\n", "utf-8")
    (root / "src" / "agentfsm").mkdir(parents=True)
    (root / "src" / "agentfsm" / "__init__.py").write_text("VERSION = 1\n", "utf-8")
    (root / "sp").symlink_to(".venv/lib/python3.11/site-packages")
    (root / "pkg").symlink_to("src/agentfsm")
    return _files(root / ".venv") | _files(root / "src" / "agentfsm")


def _files(folder: Path) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for path in sorted(folder.rglob("*")):
        found[str(path)] = os.readlink(path).encode() if path.is_symlink() else b""
        if path.is_file() and not path.is_symlink():
            found[str(path)] = path.read_bytes()
    return found


def test_the_agents_own_installation_is_read_only(tmp_path: Path, attacks: AttackTally) -> None:
    kind = "path tools: agent's install"
    root = tmp_path / "ws"
    root.mkdir()
    before = _install(root)
    tools = WorkspaceTools(root, readonly=[root / ".venv", root / "src" / "agentfsm"])
    sp = ".venv/lib/python3.11/site-packages"
    targets = [
        f"{sp}/evil.pth",
        f"{sp}/dep.py",
        f"{sp}/distutils-precedence.pth",
        f"{sp}/newpkg/__init__.py",
        f"./{sp}/../site-packages/evil.pth",
        f"src/../{sp}/evil.pth",
        ".venv/lib64/python3.11/site-packages/evil.pth",
        ".VENV/lib/python3.11/site-packages/evil.pth",
        f"{root}/{sp}/evil.pth",
        "sp/evil.pth",
        "sp/dep.py",
        ".venv/bin/python",
        ".venv/pyvenv.cfg",
        ".venv/sitecustomize.py",
        "src/agentfsm/__init__.py",
        "src/agentfsm/evil.py",
        "pkg/__init__.py",
        "pkg/engine/new.py",
    ]
    for path in targets:
        for result in (
            tools.write_file(path, "import os; os.system('touch /tmp/pwned')\n"),
            tools.edit_file(path, "VALUE = 1", "VALUE = 2"),
            tools.edit_file(path, "import os", "import sys"),
            tools.edit_file(path, "VERSION = 1", "VERSION = 2"),
        ):
            changed = _files(root / ".venv") | _files(root / "src" / "agentfsm") != before
            attacks.record(kind, result.ok or changed, f"{path}: {result.error}")
            assert not result.ok
            assert "part of the agent's own installation" in (result.error or ""), result.error
    assert not (root / ".VENV").exists()
    # Reading stays allowed; the rest of the workspace stays writable.
    assert "VALUE = 1" in tools.read_file(f"{sp}/dep.py").output
    assert "VALUE = 1" in tools.read_file("sp/dep.py").output
    assert tools.write_file("src/app.py", "print(1)\n").ok
    assert tools.write_file(".venvs/notes.txt", "x").ok
    assert tools.edit_file("src/app.py", "1", "2").ok


def test_by_default_the_running_installation_is_read_only(tmp_path: Path) -> None:
    """With no ``readonly`` given, the folders the running agent is installed in are
    read-only where they lie inside the root: here a real venv inside the workspace,
    whose interpreter runs the tools (and would run a planted ``.pth`` at its next start)."""
    root = tmp_path / "ws"
    root.mkdir()
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")],
        check=True,
        timeout=120,
    )
    python = root / ".venv" / "bin" / "python"
    source = Path(agentfsm.__file__).parent.parent
    deps = [source, *site.getsitepackages()]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    planted = root / ".venv" / "lib" / version / "site-packages" / "evil.pth"
    script = textwrap.dedent(
        f"""
        import sys
        from agentfsm.adapters.tools import WorkspaceTools
        tools = WorkspaceTools({str(root)!r})
        result = tools.write_file({str(planted.relative_to(root))!r}, "import os\\n")
        print(result.ok, result.error)
        print(tools.write_file("app.py", "print(1)\\n").ok)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, deps))}
    done = subprocess.run(
        [str(python), "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first.startswith("False ")
    assert "agent's own installation" in first
    assert second == "True"
    assert not planted.exists()
    assert (root / "app.py").exists()


def test_the_default_covers_the_agentfsm_package_of_an_editable_checkout() -> None:
    """The tools of a checkout of agentfsm (this one) leave its ``agentfsm`` package alone."""
    package = Path(agentfsm.__file__).resolve().parent
    tools = WorkspaceTools(package.parent.parent)
    rel = package.relative_to(package.parent.parent).parts
    assert tools.root.is_readonly((*rel, "engine", "loop.py"))
    assert not tools.root.is_readonly(("not-the-package", "x.py"))
