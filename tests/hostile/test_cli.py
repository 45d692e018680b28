"""Bad command lines and settings: each ends with exit code 2 and one clear line on stderr,
no traceback, and nothing but JSON on stdout under ``--json``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agentfsm.cli import main
from agentfsm.testing import ScriptedChat

from .table import measure

HANG_GUARD = 30.0


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(folder))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return folder


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("hello\n", "utf-8")
    return root


def _settings(workspace: Path, content: bytes | None = None, *, kind: str = "file") -> None:
    folder = workspace / ".agentfsm"
    folder.mkdir(exist_ok=True)
    target = folder / "settings.json"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    elif kind == "symlink":
        target.symlink_to("/dev/zero")
    else:
        target.write_bytes(content or b"")


RUN = ["run", "do it", "--no-sandbox"]
"""``--no-sandbox`` only matters to runs that get past the checks, which none here do."""

SETTINGS: dict[str, tuple[bytes | None, str]] = {
    "settings: not JSON": (b"{nope", "file"),
    "settings: a list": (b"[1, 2]", "file"),
    "settings: wrong types": (b'{"sandbox": {"network": "yes"}}', "file"),
    "settings: unknown key": (b'{"colour": "red"}', "file"),
    "settings: bad rule": (b'{"permissions": {"allow": ["shell("]}}', "file"),
    "settings: 2 MiB": (b'{"a": "' + b"x" * (2 << 20) + b'"}', "file"),
    "settings: 100,000-deep": (b"[" * 100_000 + b"]" * 100_000, "file"),
    "settings: invalid UTF-8": (b'{"a": "\xff"}', "file"),
    "settings: a FIFO": (None, "fifo"),
    "settings: a folder": (None, "folder"),
    "settings: /dev/zero": (None, "symlink"),
}

CASES: dict[str, list[str]] = {
    "--temperature nan": [*RUN, "--temperature", "nan"],
    "--temperature inf": [*RUN, "--temperature", "inf"],
    "--temperature -inf --json": [*RUN, "--temperature", "-inf", "--json"],
    "--temperature -1": [*RUN, "--temperature", "-1"],
    "--temperature 3": [*RUN, "--temperature", "3"],
    "--temperature abc": [*RUN, "--temperature", "abc"],
    "--max-tokens 0": [*RUN, "--max-tokens", "0"],
    "--max-tokens -5 --json": [*RUN, "--max-tokens", "-5", "--json"],
    "--max-tokens 10**12": [*RUN, "--max-tokens", str(10**12)],
    "--max-turns 0": [*RUN, "--max-turns", "0"],
    "--max-turns -1": [*RUN, "--max-turns", "-1"],
    "--max-turns 10**9": [*RUN, "--max-turns", str(10**9)],
    "--max-turns 1.5": [*RUN, "--max-turns", "1.5"],
    "--context-budget -100": [*RUN, "--context-budget", "-100"],
    "--context-budget 0 --json": [*RUN, "--context-budget", "0", "--json"],
    "--workspace missing": [*RUN, "--workspace", "{tmp}/missing"],
    "--workspace a file": [*RUN, "--workspace", "{ws}/notes.txt"],
    "--workspace with NUL": [*RUN, "--workspace", "a\0b"],
    "--workspace 5000-char name": [*RUN, "--workspace", "x" * 5000],
    "--session-dir a file": [*RUN, "--session-dir", "{ws}/notes.txt"],
    "--session-dir with NUL": [*RUN, "--session-dir", "s\0d"],
    "--session-dir contains the workspace": [*RUN, "--session-dir", "{tmp}"],
    "--resume unknown id --json": [*RUN, "--resume", "nope", "--json"],
    "--resume ../escape": [*RUN, "--resume", "../escape"],
    "--resume empty": [*RUN, "--resume", ""],
    "--resume with NUL": [*RUN, "--resume", "a\0b"],
    "--resume latest, no sessions": [*RUN, "--resume", "latest"],
    "--base-url not a URL": [*RUN, "--base-url", "not a url"],
    "--base-url ftp": [*RUN, "--base-url", "ftp://example.com/v1"],
    "--provider o-c without --base-url": [*RUN, "--provider", "openai-compatible"],
    "--api-key-env unset": [*RUN, "--provider", "openai", "--api-key-env", "AGENTFSM_NO_SUCH"],
    "--provider bogus": [*RUN, "--provider", "bogus"],
    "--json and --quiet": [*RUN, "--json", "--quiet"],
    "run without prompt": ["run"],
    "unknown command": ["explode"],
    "no command": [],
    "diagram --out missing folder": ["diagram", "--out", "{tmp}/no/such/dir/m.mmd"],
    "diagram --out a folder": ["diagram", "--out", "{tmp}"],
    "diagram --out /proc/version": ["diagram", "--out", "/proc/version"],
    "diagram --out with NUL": ["diagram", "--out", "a\0b"],
    "diagram --format gif": ["diagram", "--format", "gif"],
    "sessions show empty ref": ["sessions", "show", "", "--session-dir", "{tmp}"],
    "trace ../../etc/passwd": ["trace", "../../etc/passwd", "--session-dir", "{tmp}"],
    "trace --session-dir with NUL": ["trace", "latest", "--session-dir", "a\0b"],
    "sessions list --session-dir a file": ["sessions", "list", "--session-dir", "{ws}/notes.txt"],
    "sessions bogus": ["sessions", "bogus"],
    "trace --html empty": ["trace", "latest", "--html", "", "--session-dir", "{tmp}"],
    "run --html empty": [*RUN, "--html", ""],
    "diagram --out empty": ["diagram", "--out", ""],
    "conformance replay-vcr without DIR": ["conformance", "replay-vcr"],
    "conformance replay-vcr --json empty": ["conformance", "replay-vcr", "{tmp}", "--json", ""],
    "conformance matrix without reports": ["conformance", "matrix"],
    "conformance probe --bogus": ["conformance", "probe", "--bogus"],
}


def _prefix(argv: list[str]) -> str:
    if argv[:1] == ["conformance"]:
        return f"agentfsm conformance {argv[1]}: "
    if not argv or argv[0] not in ("run", "sessions", "trace", "diagram"):
        return "agentfsm: "
    if argv[0] == "sessions" and len(argv) > 1 and argv[1] in ("list", "show"):
        return f"agentfsm sessions {argv[1]}: "
    return f"agentfsm {argv[0]}: "


def _main(argv: list[str]) -> int:
    box: dict[str, int] = {}

    def work() -> None:
        box["code"] = main(argv, chat=ScriptedChat(["done"]))

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(HANG_GUARD)
    assert not worker.is_alive(), "hung"
    return box["code"]


def _check(name: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with measure("cli", name) as row:
        code = _main(argv)
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        row.outcome = f"exit {code}: {lines[0][:120] if lines else '(no message)'}"
    assert code == 2, captured.err
    assert "Traceback" not in captured.err + captured.out
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(_prefix(argv)), lines[0]
    assert len(lines[0]) < 600
    for line in captured.out.splitlines():
        json.loads(line)  # under --json only JSON reaches stdout; elsewhere nothing
    if "--json" not in argv:
        assert captured.out == ""
    assert row.seconds < 10
    assert row.growth_mb < 200


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_arguments(
    name: str, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{ws}", str(workspace)) for a in CASES[name]]
    if argv[:1] == ["run"] and len(argv) > 1 and "--workspace" not in argv:
        argv += ["--workspace", str(workspace)]
    _check(name, argv, capsys)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_malformed_settings(name: str, workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    content, kind = SETTINGS[name]
    _settings(workspace, content, kind=kind)
    _check(name, [*RUN, "--workspace", str(workspace), "--json"], capsys)


def test_a_real_process_prints_one_line(workspace: Path, tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(key, None)
    with measure("cli", "subprocess: --temperature nan --json") as row:
        done = subprocess.run(
            [sys.executable, "-m", "agentfsm", *RUN, "--temperature", "nan", "--json"],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
        )
        row.outcome = f"exit {done.returncode}: {done.stderr.strip()}"
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().count("\n") == 0
    assert done.stderr.startswith("agentfsm run: --temperature")
