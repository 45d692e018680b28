"""kill -9 a real ``agentfsm run --durable`` mid-run; ``agentfsm runs resume`` finishes it
without repeating a completed LLM call or tool call, and the session file ends as the one
of an uninterrupted run (timestamps aside)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentfsm.conformance._frames import DONE, chunk, tool_delta
from agentfsm.testing import FakeProviderServer, RecordedRequest, Reply

TURNS = 4
"""Chat calls of the run: three ask for a shell command, the last answers."""
KILL_AT = 2
"""The run is killed while the chat call of this turn (0-based) is in flight."""


def _turn(request: RecordedRequest) -> int:
    return sum(1 for m in request.json()["messages"] if m.get("role") == "assistant")


def _reply(turn: int) -> Reply:
    if turn < TURNS - 1:
        arguments = json.dumps({"command": f"echo {turn} >> side.log"})
        call = tool_delta(index=0, id=f"c{turn}", name="shell", arguments=arguments)
        return Reply.sse([chunk(call), chunk({}, finish="tool_calls"), DONE])
    return Reply.sse([chunk({"content": "done"}), chunk({}, finish="stop"), DONE])


def _agentfsm(folder: Path, *arguments: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "XDG_STATE_HOME": str(folder / "state"), "PYTHONUNBUFFERED": "1"}
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    return subprocess.Popen(
        [sys.executable, "-m", "agentfsm", *arguments],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _run(server: FakeProviderServer, folder: Path, *extra: str) -> subprocess.Popen[bytes]:
    (folder / "work").mkdir(parents=True, exist_ok=True)
    return _agentfsm(
        folder,
        "run",
        "go",
        "--durable",
        "--provider",
        "openai-compatible",
        "--base-url",
        f"{server.base_url}/v1",
        "--model",
        "m",
        "--preset",
        "minimal",
        "--workspace",
        str(folder / "work"),
        "--session-dir",
        str(folder / "sessions"),
        "--no-sandbox",
        "--quiet",
        *extra,
    )


def _wait_for(check: Callable[[], bool], limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, "the run did not get there in time"
        time.sleep(0.01)


def _session(folder: Path) -> list[dict[str, Any]]:
    [path] = (folder / "sessions").glob("*.jsonl")
    text = path.read_text("utf-8").replace(str(folder), "<folder>")
    records = [json.loads(line) for line in text.splitlines()]
    for record in records:
        record.pop("ts")
    return records


def _finish(proc: subprocess.Popen[bytes]) -> str:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


def test_a_killed_durable_run_resumes_without_paying_again(tmp_path: Path) -> None:
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    with FakeProviderServer() as server:
        server.handler = lambda request: _reply(_turn(request))
        assert _finish(_run(server, reference)).strip() == "done"
    expected = _session(reference)
    assert (reference / "work" / "side.log").read_text() == "0\n1\n2\n"

    with FakeProviderServer() as server:
        in_flight = {"stall": True}

        def reply(request: RecordedRequest) -> Reply:
            turn = _turn(request)
            if turn == KILL_AT and in_flight["stall"]:
                return Reply.stall(60, _reply(turn))
            return _reply(turn)

        server.handler = reply
        proc = _run(server, killed)
        try:
            _wait_for(lambda: any(_turn(r) == KILL_AT for r in server.requests))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
        in_flight["stall"] = False

        listing = _agentfsm(killed, "runs", "list", "--json")
        [run] = [json.loads(line) for line in _finish(listing).splitlines()]
        assert run["status"] == "PENDING"  # nothing picked it up
        assert run["steps"] >= 2 * KILL_AT  # the chat and tool steps before the kill
        assert _finish(_agentfsm(killed, "runs", "resume", run["id"], "--quiet")).strip() == "done"

        per_turn = Counter(_turn(r) for r in server.requests)
    # Each chat call was paid once, except the one in flight at the kill.
    assert per_turn == {**dict.fromkeys(range(TURNS), 1), KILL_AT: 2}
    assert (killed / "work" / "side.log").read_text() == "0\n1\n2\n"  # each tool ran once
    assert _session(killed) == expected
    assert _finish(_agentfsm(killed, "runs", "list")).strip() == "no unfinished durable runs"
