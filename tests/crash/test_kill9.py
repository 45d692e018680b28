"""kill -9 a real ``agentfsm run`` at random moments; every session must resume validly.

Each attempt starts ``python -m agentfsm run`` against a ``FakeProviderServer`` whose model
streams slowly, then runs a slow ``shell`` command, then writes a dozen large files (a burst
of tool runs and session writes), then answers. The process is killed with SIGKILL at a
seeded random moment of one of three phases (streaming, tool, write). Then the session
file must read back, and ``agentfsm run --resume latest`` against a *strict* fake server
(which answers HTTP 400 to a request breaking the OpenAI pairing rules, as OpenAI does)
must succeed.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentfsm.adapters.sessions import read_session_messages
from agentfsm.conformance._frames import DONE, chunk, tool_delta
from agentfsm.engine._messages import AssistantMessage, ToolMessage
from agentfsm.testing import FakeProviderServer, Pause, RecordedRequest, Reply

pytestmark = pytest.mark.crash

SEED = 20_614
PHASES = ("streaming", "tool", "write")
KILLS_PER_PHASE = 8
MAX_ATTEMPTS = 60
WRITES = 12
WRITE_BYTES = 200_000
STREAM_PIECES = 6
PIECE_PAUSE = 0.15
SHELL_SECONDS = 1.0


def first_run_reply(request: RecordedRequest) -> Reply:
    """The model of the killed run: slow stream + shell, then a write burst, then done."""
    answered = sum(1 for m in request.json()["messages"] if m.get("role") == "tool")
    if answered == 0:
        frames: list[str | Pause] = []
        for index in range(STREAM_PIECES):
            frames += [chunk({"content": f"thinking {index} "}), Pause(PIECE_PAUSE)]
        command = f"sleep {SHELL_SECONDS}; echo slept"
        arguments = json.dumps({"command": command})
        frames += [chunk(tool_delta(index=0, id="s1", name="shell", arguments=arguments))]
        return Reply.sse([*frames, chunk({}, finish="tool_calls"), DONE])
    if answered == 1:
        calls = [
            chunk(
                tool_delta(
                    index=i,
                    id=f"w{i}",
                    name="write_file",
                    arguments=json.dumps({"path": f"out/f{i}.txt", "content": "x" * WRITE_BYTES}),
                )
            )
            for i in range(WRITES)
        ]
        return Reply.sse([*calls, chunk({}, finish="tool_calls"), DONE])
    return Reply.sse([chunk({"content": "done"}), chunk({}, finish="stop"), DONE])


def resume_reply(request: RecordedRequest) -> Reply:
    return Reply.sse([chunk({"content": "resumed"}), chunk({}, finish="stop"), DONE])


def agentfsm(
    server: FakeProviderServer, folder: Path, prompt: str, *extra: str, quiet: bool = False
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "XDG_STATE_HOME": str(folder / "state"), "PYTHONUNBUFFERED": "1"}
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentfsm",
            "run",
            prompt,
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
        ],
        stdout=subprocess.DEVNULL if quiet else subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else subprocess.PIPE,
    )


def wait_for(check: Callable[[], bool], proc: subprocess.Popen[bytes], limit: float = 20) -> bool:
    """Poll ``check`` until true; ``False`` if the process ended first."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if check():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.002)
    raise AssertionError("the run did not reach its phase in time")


def session_bytes(folder: Path) -> bytes:
    files = list((folder / "sessions").glob("*.jsonl"))
    return files[0].read_bytes() if files else b""


def writes_recorded(folder: Path) -> bool:
    """The reply asking for the writes is in the session file: the write burst begins."""
    return b'"w0"' in session_bytes(folder)


def write_burst_seconds(tmp: Path) -> float:
    """How long the write phase lasts here: a full run, timed from the recorded reply that
    asks for the writes to the next request."""
    folder = tmp / "calibrate"
    (folder / "work").mkdir(parents=True)
    with FakeProviderServer() as server:
        server.handler = first_run_reply
        proc = agentfsm(server, folder, "go")
        assert wait_for(lambda: writes_recorded(folder), proc)
        began = time.monotonic()
        assert wait_for(lambda: len(server.requests) >= 3, proc)
        took = time.monotonic() - began
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err.decode("utf-8", "replace")
    return max(took, 0.005)


def kill_once(folder: Path, phase: str, rng: random.Random, burst: float) -> bool:
    """One killed run; ``True`` if the kill landed while the process was alive."""
    (folder / "work").mkdir(parents=True)
    with FakeProviderServer() as server:
        server.handler = first_run_reply
        proc = agentfsm(server, folder, "go", quiet=True)
        try:
            if phase == "streaming":
                reached = wait_for(lambda: len(server.requests) >= 1, proc)
                delay = rng.uniform(0.0, STREAM_PIECES * PIECE_PAUSE)
            elif phase == "tool":
                reached = wait_for(lambda: b'"tool_call_start"' in session_bytes(folder), proc)
                delay = rng.uniform(0.0, SHELL_SECONDS * 0.9)
            else:
                reached = wait_for(lambda: writes_recorded(folder), proc)
                delay = rng.uniform(0.0, burst)
            time.sleep(delay)
            alive = reached and proc.poll() is None
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    return alive


def resume(folder: Path) -> tuple[int, list[int], str]:
    """``--resume latest`` against a strict server: exit code, reply statuses, stderr."""
    with FakeProviderServer(strict=True) as server:
        statuses: list[int] = []

        def answer(request: RecordedRequest) -> Reply:
            reply = resume_reply(request)
            statuses.append(reply.status)
            return reply

        server.handler = answer
        proc = agentfsm(server, folder, "continue", "--resume", "latest")
        _, err = proc.communicate(timeout=60)
        rejected = len(server.requests) - len(statuses)
        return proc.returncode, statuses + [400] * rejected, err.decode("utf-8", "replace")


def test_kill9_at_random_moments_leaves_resumable_sessions(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    burst = write_burst_seconds(tmp_path)
    landed: Counter[str] = Counter()
    finished_first = 0
    folders: list[tuple[str, Path]] = []
    for attempt in range(MAX_ATTEMPTS):
        todo = [p for p in PHASES if landed[p] < KILLS_PER_PHASE]
        if not todo:
            break
        phase = todo[attempt % len(todo)]
        folder = tmp_path / f"kill-{attempt:02d}-{phase}"
        if kill_once(folder, phase, rng, burst):
            landed[phase] += 1
        else:
            finished_first += 1
        folders.append((phase, folder))
    torn = sum(not session_bytes(f).endswith(b"\n") for _, f in folders)
    unanswered_read_back = 0
    for _, folder in folders:
        messages = read_session_messages(next((folder / "sessions").glob("*.jsonl")))
        for index, message in enumerate(messages):  # every call answered when read back
            if isinstance(message, AssistantMessage) and message.tool_calls:
                answers = messages[index + 1 : index + 1 + len(message.tool_calls)]
                assert all(isinstance(m, ToolMessage) for m in answers)
                unanswered_read_back += sum(
                    "run stopped" in m.content for m in answers if isinstance(m, ToolMessage)
                )
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda item: resume(item[1]), folders))
    resumed = sum(code == 0 and statuses == [200] for code, statuses, _ in results)
    print(
        f"\nkill -9: {sum(landed.values())} kills landed "
        f"(streaming {landed['streaming']}, tool {landed['tool']}, write {landed['write']}); "
        f"{finished_first} runs finished before their kill; {torn} session files ended in a "
        f"torn record; {unanswered_read_back} calls read back as stopped during the run; "
        f"write phase {burst * 1000:.0f} ms; resumed {resumed} of {len(results)} with HTTP 200"
    )
    for (phase, folder), (code, statuses, err) in zip(folders, results, strict=True):
        assert (code, statuses) == (0, [200]), (phase, folder.name, err[-2000:])
    assert sum(landed.values()) >= 20
    assert all(landed[p] == KILLS_PER_PHASE for p in PHASES)
