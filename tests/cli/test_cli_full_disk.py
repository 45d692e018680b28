"""A session that cannot be recorded: a real full disk (a size-limited tmpfs made by
bubblewrap) and a real file size limit, through the real ``agentfsm run`` and ``Agent``.

The file is never left with part of a record, the run says so in one line (no traceback),
and the command exits non-zero.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentfsm.testing import FakeProviderServer, scenario_handler

from .conftest import sandbox_options

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _environment(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    env["XDG_STATE_HOME"] = str(state)
    return env


def _whole_records(path: Path) -> list[dict[str, object]]:
    """Every line of the session file, each a whole JSON record ending in a newline."""
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), data[-200:]
    return [json.loads(line) for line in data.splitlines()]


def _untimed(line: bytes) -> tuple[int, dict[str, object]]:
    """A record line's length and content, without its time stamp or session ids."""
    record = json.loads(line)
    del record["ts"]
    return len(line), record


def _run_on_small_disk(
    tmp_path: Path, workspace: Path, base_url: str, *, fill: bool
) -> tuple[subprocess.CompletedProcess[str], Path | None]:
    """``agentfsm run`` whose session folder is on a 4 KiB tmpfs (full from the start with
    ``fill``); the session file is copied out (to ``tmp_path/out``) after the run."""
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    command = [
        sys.executable,
        "-c",
        "from agentfsm.cli import main; raise SystemExit(main())",
        "run",
        "What is in this project?",
        "--base-url",
        base_url + "/v1",
        "--model",
        "fake",
        "--workspace",
        str(workspace),
        "--session-dir",
        str(disk / "sessions"),
        *sandbox_options(),
    ]
    fill_it = f"cat /dev/zero > {disk}/fill 2>/dev/null; " if fill else ""
    script = (
        f"mkdir {disk}/sessions && {fill_it}"
        f'"$@"; code=$?; cp {disk}/sessions/*.jsonl {out}/ 2>/dev/null; exit $code'
    )
    tiny_disk = ["bwrap", "--dev-bind", "/", "/", "--size", "4096", "--tmpfs", str(disk)]
    done = subprocess.run(
        [*tiny_disk, "--", "sh", "-c", script, "sh", *command],
        capture_output=True,
        text=True,
        timeout=120,
        env=_environment(tmp_path / "state"),
    )
    sessions = list(out.glob("*.jsonl"))
    assert len(sessions) <= 1
    return done, sessions[0] if sessions else None


@pytest.mark.requires_program("bwrap", "bubblewrap")
@pytest.mark.parametrize("fill", [False, True], ids=["space-runs-out", "no-space-at-all"])
def test_a_full_disk_leaves_whole_records_and_fails_the_run(
    tmp_path: Path, workspace: Path, fill: bool
) -> None:
    with FakeProviderServer() as server:
        server.handler = scenario_handler("tools")
        done, session = _run_on_small_disk(tmp_path, workspace, server.base_url, fill=fill)
        requests = len(server.requests)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    said = [line for line in done.stderr.splitlines() if "session" in line]
    assert len(said) == 1, done.stderr
    assert "No space left on device" in said[0]
    if fill:
        assert session is None  # nothing could be recorded: no empty file is left behind
        assert "session: not recorded" in done.stdout
        assert requests == 0  # nothing of the run could be recorded: no model call was paid
    else:
        assert session is not None
        assert "incomplete" in done.stdout  # the summary's session line says so too
        records = _whole_records(session)
        assert records[0]["meta"]["event"] == "run_start"  # type: ignore[index]
        assert requests >= 1


_WRITE_UNDER_LIMIT = textwrap.dedent(
    """
    import asyncio, resource, sys
    from agentfsm import Agent
    from agentfsm.testing import ScriptedChat

    limit = int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    chat = ScriptedChat(["x" * 3000])
    agent = Agent(chat, session_dir=sys.argv[1], max_turns=5)
    try:
        outcome = agent.run_sync("go")
    except OSError as error:  # not even the run's start could be recorded
        print("unrecorded", error, "calls", chat.calls)
    else:
        print(outcome.stopped_reason, outcome.session_error)
    """
)


def test_a_file_size_limit_cuts_the_session_back_to_whole_records(tmp_path: Path) -> None:
    # RLIMIT_FSIZE makes a write stop part-way (a short write, then EFBIG): the torn record
    # is cut back, the run goes on, and its outcome says the session is incomplete.
    def run(limit: int) -> tuple[subprocess.CompletedProcess[str], Path | None]:
        folder = tmp_path / "sessions" / str(limit)
        done = subprocess.run(
            [sys.executable, "-c", _WRITE_UNDER_LIMIT, str(folder), str(limit)],
            capture_output=True,
            text=True,
            timeout=60,
            env=_environment(tmp_path / "state"),
        )
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        sessions = list(folder.glob("*.jsonl"))
        return done, sessions[0] if sessions else None

    done, whole = run(10**9)
    assert whole is not None
    assert done.stdout.split() == ["final", "None"]
    size = whole.stat().st_size
    lines = whole.read_bytes().splitlines(keepends=True)
    ends = [sum(len(line) for line in lines[: i + 1]) for i in range(len(lines))]
    limits = sorted({1, *range(size // 4, size, size // 4), *(end - 1 for end in ends[:-1])})
    for limit in limits:
        done, session = run(limit)
        reason, _, error = done.stdout.strip().partition(" ")
        data = session.read_bytes() if session is not None else b""  # none: nothing fitted
        # What is there is exactly the records that fitted, whole: a prefix of the full run.
        fitted = [line for line, end in zip(lines, ends, strict=True) if end <= limit]
        assert [_untimed(line) for line in data.splitlines(keepends=True)] == [
            _untimed(line) for line in fitted
        ]
        assert "File too large" in error, (limit, done.stdout)
        assert len([r for r in done.stderr.splitlines() if "incomplete" in r]) <= 1
        if reason == "unrecorded":  # the run's start (its input) did not fit
            assert done.stdout.split()[-2:] == ["calls", "0"]  # no model call was paid for
        else:
            assert reason == "final", done.stdout
    print(f"file size limits tried: {len(limits)}, records: {len(lines)}")
