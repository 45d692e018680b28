"""A workspace's ``.agentfsm/settings.json`` that widens the sandbox is not applied silently.

The real ``agentfsm`` command against a fake provider: without a terminal each widening is
refused with exit code 2 and one line (no model call); on a pseudo-terminal the user is asked
once per workspace and file hash (``y`` applies and remembers, ``n`` refuses, a changed file
asks again); ``--trust-workspace-settings`` applies for one run; the user's own settings
(``$XDG_CONFIG_HOME``) apply without a question; narrowing settings need none.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentfsm.adapters.sessions import default_session_dir
from agentfsm.adapters.tools._settings import SettingsError, load_settings
from agentfsm.cli._settings_trust import trust_file
from agentfsm.conformance._frames import DONE, chunk
from agentfsm.sandbox import BubblewrapSandbox
from agentfsm.testing import FakeProviderServer, Reply

from .commands import provider_options, run_argv
from .sandboxing import require_bubblewrap
from .tally import AttackTally

KIND = "workspace settings"
REFUSAL = "review it, then pass --trust-workspace-settings (or answer yes on a terminal)"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's folders: state (sessions, consents) and config (user-level settings)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return tmp_path


@pytest.fixture
def bubblewrap(tmp_path_factory: pytest.TempPathFactory) -> BubblewrapSandbox:
    """The OS sandbox, for a folder of its own: this module's ``tmp_path`` holds the user's
    XDG folders, which no workspace may hold."""
    return require_bubblewrap(tmp_path_factory.mktemp("bubblewrap"))


@pytest.fixture
def workspace(home: Path) -> Path:
    root = home / "cloned"
    (root / ".agentfsm").mkdir(parents=True)
    (root / "notes.txt").write_text("hello\n", "utf-8")
    (home / "outside").mkdir()
    return root


def write_settings(workspace: Path, settings: dict[str, Any]) -> None:
    (workspace / ".agentfsm" / "settings.json").write_text(json.dumps(settings), "utf-8")


def argv(workspace: Path, server: FakeProviderServer, *extra: str) -> list[str]:
    return run_argv("hi", workspace, server, *extra)


def done_reply() -> Reply:
    return Reply.sse([chunk({"content": "done"}), chunk({}, finish="stop"), DONE])


def agentfsm(home: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    """The command with stdin, stdout and stderr not terminals."""
    return subprocess.run(
        [sys.executable, "-m", "agentfsm", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=home,
    )


def on_terminal(home: Path, args: list[str], answer: str | None) -> tuple[int, str, bool]:
    """The command on a pseudo-terminal (stdin, stdout, stderr); ``answer`` is typed when
    the question appears. Returns the exit code, what the terminal showed, and whether the
    question was asked."""
    master, slave = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "agentfsm", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=home,
        close_fds=True,
    )
    os.close(slave)
    shown, asked = b"", False
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the command closed the terminal
                    break
                if not data:
                    break
                shown += data
                if not asked and b"[y/N]" in shown:
                    asked = True
                    if answer is not None:
                        os.write(master, answer.encode() + b"\n")
            elif process.poll() is not None:
                break
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    return code, shown.decode("utf-8", "replace"), asked


def recorded_sandbox(workspace: Path) -> dict[str, Any]:
    """The sandbox the latest run recorded in its ``run_start``."""
    path = max(default_session_dir(workspace).glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
    for line in path.read_text("utf-8").splitlines():
        record = json.loads(line)
        if record.get("kind") == "meta" and record["meta"].get("event") == "run_start":
            sandbox: dict[str, Any] = record["meta"]["sandbox"]
            return sandbox
    raise AssertionError("no run_start")


def known(settings: dict[str, Any], home: Path) -> bool:
    """Whether the settings schema of this version takes these keys."""
    folder = home / "probe"
    (folder / ".agentfsm").mkdir(parents=True, exist_ok=True)
    (folder / ".agentfsm" / "settings.json").write_text(json.dumps(settings), "utf-8")
    try:
        load_settings(folder)
    except SettingsError:
        return False
    return True


def widening_cases(workspace: Path, home: Path) -> dict[str, dict[str, Any]]:
    outside = str(home / "outside")
    (workspace / "link").symlink_to(outside)
    return {
        "network": {"sandbox": {"network": True}},
        "read outside": {"sandbox": {"read": [outside]}},
        "write outside": {"sandbox": {"write": [outside]}},
        "read through a symlink in the workspace": {"sandbox": {"read": [str(workspace / "link")]}},
        "read ~": {"sandbox": {"read": ["~"]}},
        "write the workspace's .agentfsm": {"sandbox": {"write": [str(workspace / ".agentfsm")]}},
        "read the workspace root (holds .agentfsm)": {"sandbox": {"read": [str(workspace)]}},
        "env": {"sandbox": {"env": ["GITHUB_TOKEN"]}},
        "raised limits": {"sandbox": {"limits": {"processes": 1_000_000}}},
    }


def test_each_widening_is_refused_without_a_terminal(
    home: Path, workspace: Path, bubblewrap: BubblewrapSandbox, attacks: AttackTally
) -> None:
    with FakeProviderServer() as server:
        for name, settings in widening_cases(workspace, home).items():
            write_settings(workspace, settings)
            done = agentfsm(home, argv(workspace, server))
            applied = done.returncode != 2 or bool(server.requests)
            attacks.record(KIND, applied, f"{name} without a terminal")
            assert done.returncode == 2, (name, done.stderr)
            assert done.stderr.count("\n") == 1, done.stderr
            if known(settings, home):
                assert done.stderr.startswith(
                    "agentfsm run: .agentfsm/settings.json widens the sandbox ("
                ), done.stderr
                assert done.stderr.rstrip().endswith(REFUSAL)
            else:  # a key this version's schema does not have yet: refused as unknown
                assert "unknown key" in done.stderr, done.stderr
            as_json = agentfsm(home, argv(workspace, server, "--json"))
            applied = as_json.returncode != 2 or bool(server.requests)
            attacks.record(KIND, applied, f"{name} with --json")
            assert as_json.returncode == 2
        assert server.requests == []
    assert not trust_file().exists()


def test_the_refusal_names_what_the_file_widens(home: Path, workspace: Path) -> None:
    outside = str(home / "outside")
    write_settings(workspace, {"sandbox": {"network": True, "read": [outside]}})
    with FakeProviderServer() as server:
        done = agentfsm(home, argv(workspace, server))
    assert done.stderr == (
        f"agentfsm run: .agentfsm/settings.json widens the sandbox (network, read {outside}); "
        f"{REFUSAL}\n"
    )


def test_yes_on_a_terminal_applies_and_is_remembered_until_the_file_changes(
    home: Path, workspace: Path, bubblewrap: BubblewrapSandbox, attacks: AttackTally
) -> None:
    outside = str(home / "outside")
    write_settings(workspace, {"sandbox": {"network": True}})
    with FakeProviderServer() as server:
        server.enqueue(done_reply())
        code, shown, asked = on_terminal(home, argv(workspace, server), "y")
        assert asked, shown
        assert code == 0, shown
        assert "widens the OS sandbox" in shown
        assert "  - network" in shown
        assert recorded_sandbox(workspace)["network"] is True
        assert json.loads(trust_file().read_text("utf-8"))["trusted"] == {
            str(workspace): json.loads(json.dumps(trust_file_digest(workspace)))
        }

        # Remembered: the same file is applied without a question, even without a terminal.
        server.enqueue(done_reply())
        again = agentfsm(home, argv(workspace, server))
        assert again.returncode == 0, again.stderr
        assert recorded_sandbox(workspace)["network"] is True

        # A changed file asks again.
        write_settings(workspace, {"sandbox": {"network": True, "read": [outside]}})
        changed = agentfsm(home, argv(workspace, server))
        attacks.record(KIND, changed.returncode != 2, "a changed file without a terminal")
        assert changed.returncode == 2
        assert f"(network, read {outside})" in changed.stderr
        server.enqueue(done_reply())
        code, shown, asked = on_terminal(home, argv(workspace, server), "yes")
        assert asked, shown
        assert code == 0, shown
        assert f"  - read {outside}" in shown
        assert outside in recorded_sandbox(workspace)["read"]


def trust_file_digest(workspace: Path) -> str:
    import hashlib

    return hashlib.sha256((workspace / ".agentfsm" / "settings.json").read_bytes()).hexdigest()


def test_no_on_a_terminal_refuses(
    home: Path, workspace: Path, bubblewrap: BubblewrapSandbox, attacks: AttackTally
) -> None:
    write_settings(workspace, {"sandbox": {"write": [str(home / "outside")]}})
    with FakeProviderServer() as server:
        for answer in ("n", "", "whatever"):
            code, shown, asked = on_terminal(home, argv(workspace, server), answer)
            attacks.record(KIND, code != 2, f"answered {answer!r} on a terminal")
            assert asked, shown
            assert code == 2, shown
            assert REFUSAL in shown
        assert server.requests == []
    assert not trust_file().exists()


def test_the_flag_applies_for_one_run_only(
    home: Path, workspace: Path, bubblewrap: BubblewrapSandbox
) -> None:
    write_settings(workspace, {"sandbox": {"network": True}})
    with FakeProviderServer() as server:
        server.enqueue(done_reply())
        done = agentfsm(home, argv(workspace, server, "--trust-workspace-settings"))
        assert done.returncode == 0, done.stderr
        assert recorded_sandbox(workspace)["network"] is True
        assert agentfsm(home, argv(workspace, server)).returncode == 2  # not remembered
    assert not trust_file().exists()


def test_user_settings_apply_without_a_question(
    home: Path, workspace: Path, bubblewrap: BubblewrapSandbox
) -> None:
    outside = str(home / "outside")
    user = home / "config" / "agentfsm" / "settings.json"
    user.parent.mkdir(parents=True)
    user.write_text(json.dumps({"sandbox": {"network": True, "read": [outside]}}), "utf-8")
    write_settings(workspace, {"permissions": {"deny": ["shell(rm *)"]}})  # narrows only
    with FakeProviderServer() as server:
        server.enqueue(done_reply())
        done = agentfsm(home, argv(workspace, server))
    assert done.returncode == 0, done.stderr
    assert "widens" not in done.stderr
    sandbox = recorded_sandbox(workspace)
    assert sandbox["network"] is True
    assert outside in sandbox["read"]


def test_narrowing_settings_need_no_consent(
    home: Path, workspace: Path, bubblewrap: BubblewrapSandbox
) -> None:
    (workspace / "cache").mkdir()
    write_settings(
        workspace,
        {
            "permissions": {"allow": ["shell(git status)"], "deny": ["shell(rm *)"]},
            "sandbox": {"network": False, "write": [str(workspace / "cache")]},
            "provider": {"quirks": {"explicit_tool_choice": True}},
        },
    )
    with FakeProviderServer() as server:
        server.enqueue(done_reply())
        done = agentfsm(home, argv(workspace, server))
    assert done.returncode == 0, done.stderr
    assert recorded_sandbox(workspace)["network"] is False


def test_batch_refuses_before_anything_is_enqueued(
    home: Path, workspace: Path, attacks: AttackTally
) -> None:
    pytest.importorskip("dbos")
    write_settings(workspace, {"sandbox": {"network": True}})
    tasks = home / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "prompt": "x"}) + "\n", "utf-8")
    database = home / "queue.sqlite"
    with FakeProviderServer() as server:
        options = provider_options(workspace, server)
        done = agentfsm(
            home, ["batch", str(tasks), *options, "--database-url", f"sqlite:///{database}"]
        )
        attacks.record(KIND, done.returncode != 2 or bool(server.requests), "batch")
        assert done.returncode == 2, done.stderr
        assert "widens the sandbox (network)" in done.stderr
        assert server.requests == []
    assert not database.exists()
