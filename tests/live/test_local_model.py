"""The slow tier: the real embedded model, started and stopped by the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.live


def _server_alive(port: str) -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (
                    (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
            except OSError:
                continue
            if "llama_cpp.server" in cmdline and f"--port {port}" in cmdline:
                return True
    return False


def test_a_real_run_on_the_local_model(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="needs the local extra: make test-live installs it")
    (tmp_path / "notes.txt").write_text("The release ships on Friday.\n", "utf-8")
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentfsm",
            "run",
            "Read notes.txt and tell me when the release ships.",
            "--provider",
            "local",
            "--workspace",
            str(tmp_path),
            "--max-turns",
            "4",
            "--temperature",
            "0",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 3), done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "turn_start"
    assert "tool_call_end" in kinds, kinds
    assert kinds[-2:] == ["turn_end", "run_end"]
    port = re.search(r"127\.0\.0\.1:(\d+)", done.stderr)
    assert port is not None, done.stderr
    assert not _server_alive(port.group(1)), "the local model server outlived the CLI"
    assert time.monotonic() - started < 600


def test_ctrl_c_interrupts_and_the_server_is_stopped(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="needs the local extra: make test-live installs it")
    import signal

    (tmp_path / "notes.txt").write_text("x\n", "utf-8")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentfsm",
            "run",
            "Write a very long essay about every file here, reading each one many times.",
            "--provider",
            "local",
            "--workspace",
            str(tmp_path),
            "--max-turns",
            "50",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    port = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        found = re.search(r"127\.0\.0\.1:(\d+)", line)
        if found:
            port = found.group(1)
        if "ready" in line:
            break
    assert port is not None
    time.sleep(1.0)  # the run is under way
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err[-2000:]
    deadline = time.monotonic() + 10
    while _server_alive(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _server_alive(port), "Ctrl-C left the local model server running"
