"""The durable commands' log files hold provider errors and DBOS's tracebacks: a hostile
provider that echoes the API key back (whole, in pieces, in the error message, in a header)
must not get it into the log file, the terminal or the result lines. Real ``agentfsm
batch`` and ``agentfsm worker`` processes against a FakeProviderServer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agentfsm.testing import FakeProviderServer, RecordedRequest, Reply
from tests.durable.batch_helpers import write_tasks

from .tally import AttackTally

KIND = "API key in a durable log file"
KEY = "sk-durable-" + "Q7xv9LmT2pRz8KwN4bYc"


def echo_key(request: RecordedRequest) -> Reply:
    """Refuses every call, quoting the key back in the message, whole and in pieces."""
    key = request.headers.get("authorization", "").removeprefix("Bearer ")
    message = f"invalid key {key}; key starts {key[:12]} ends {key[-10:]}"
    return Reply.json({"error": {"message": message}}, 401, headers={"x-echo-key": key})


def _env(folder: Path) -> dict[str, str]:
    env = {**os.environ, "XDG_STATE_HOME": str(folder / "state"), "DURABLE_TEST_KEY": KEY}
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    return env


def test_an_echoed_key_reaches_no_log_file_nor_the_terminal(
    tmp_path: Path, attacks: AttackTally
) -> None:
    (tmp_path / "work").mkdir()
    write_tasks(tmp_path / "tasks.jsonl", ["alpha", "beta"])
    url = f"sqlite:///{tmp_path / 'queue.sqlite'}"
    with FakeProviderServer() as server:
        server.handler = echo_key
        base = [sys.executable, "-m", "agentfsm"]
        options = [
            "--provider",
            "openai-compatible",
            "--base-url",
            f"{server.base_url}/v1",
            "--model",
            "m",
            "--api-key-env",
            "DURABLE_TEST_KEY",
            "--preset",
            "minimal",
            "--no-sandbox",
            "--workspace",
            str(tmp_path / "work"),
            "--database-url",
            url,
            "--poll",
            "0.1",
        ]
        tasks = str(tmp_path / "tasks.jsonl")
        seen: dict[str, str] = {}
        batch = subprocess.run(
            [*base, "batch", tasks, *options], env=_env(tmp_path), capture_output=True, timeout=180
        )
        assert batch.returncode == 1, batch.stderr
        seen["batch stdout"] = batch.stdout.decode()
        seen["batch stderr"] = batch.stderr.decode()
        assert seen["batch stderr"].count(" ERROR: ") == 2  # both tasks failed, one line each
        # The same failures run by a worker (its own log file), after a retry is enqueued.
        again = subprocess.run(
            [*base, "batch", tasks, *options, "--retry-failed", "--detach"],
            env=_env(tmp_path),
            capture_output=True,
            timeout=120,
        )
        assert again.returncode == 0, again.stderr
        worker = subprocess.Popen(
            [*base, "worker", "--database-url", url, "--poll", "0.1"],
            env=_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 120
        while len(server.requests) < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)  # the failures are recorded and logged
        worker.send_signal(signal.SIGINT)
        out, err = worker.communicate(timeout=60)
        seen["worker stdout"], seen["worker stderr"] = out.decode(), err.decode()
    logs = sorted((tmp_path / "state" / "agentfsm" / "logs").glob("*.log"))
    assert len(logs) >= 2  # the failing batch's and the worker's (a quiet command makes none)
    for log in logs:
        seen[log.name] = log.read_text()
    logged = "".join(seen[log.name] for log in logs)
    assert "401" in logged  # the refusals were logged, with DBOS's tracebacks
    assert "Traceback" in logged
    assert "[redacted]" in logged
    assert seen["worker stderr"].count(" failed: ") == 2
    results = [json.loads(line) for line in seen["batch stdout"].splitlines()]
    assert [r["status"] for r in results] == ["ERROR", "ERROR"]
    pieces = (KEY, KEY[:12], KEY[-10:])
    for where, text in seen.items():
        for piece in pieces:
            attacks.record(KIND, piece in text, f"{piece[:6]}… in {where}")
