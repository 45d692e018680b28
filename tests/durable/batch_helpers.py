"""What the batch tests share: a FakeProviderServer reply per task, and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from agentfsm.conformance._frames import DONE, chunk, tool_delta
from agentfsm.testing import FakeProviderServer, RecordedRequest, Reply


def task_of(request: RecordedRequest) -> str:
    """The task a chat request belongs to: its prompt is ``task ID``."""
    for message in request.json()["messages"]:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str) and "task " in content:
            return content.split("task ", 1)[1].split()[0]
    raise AssertionError("a request without a task prompt")


def turn_of(request: RecordedRequest) -> int:
    return sum(1 for m in request.json()["messages"] if m.get("role") == "assistant")


def reply(request: RecordedRequest) -> Reply:
    """Turn 0: a shell call appending the task id to ``side.log``; turn 1: ``done ID``."""
    task = task_of(request)
    if turn_of(request) == 0:
        arguments = json.dumps({"command": f"echo {task} >> side.log"})
        call = tool_delta(index=0, id=f"c-{task}", name="shell", arguments=arguments)
        usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
        return Reply.sse([chunk(call), chunk({}, finish="tool_calls", usage=usage), DONE])
    return Reply.sse([chunk({"content": f"done {task}"}), chunk({}, finish="stop"), DONE])


def write_tasks(path: Path, ids: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "prompt": f"task {i}"}) + "\n" for i in ids))
    return path


def environment(folder: Path) -> dict[str, str]:
    env = {**os.environ, "XDG_STATE_HOME": str(folder / "state"), "PYTHONUNBUFFERED": "1"}
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    return env


def provider_options(server: FakeProviderServer) -> list[str]:
    return [
        "--provider",
        "openai-compatible",
        "--base-url",
        f"{server.base_url}/v1",
        "--model",
        "m",
        "--preset",
        "minimal",
        "--no-sandbox",
    ]


def agentfsm(folder: Path, *arguments: str, **popen: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # type: ignore[call-overload,no-any-return]
        [sys.executable, "-m", "agentfsm", *arguments],
        env=environment(folder),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **popen,
    )


def requests_per_task(server: FakeProviderServer) -> Counter[tuple[str, int]]:
    return Counter((task_of(r), turn_of(r)) for r in server.requests)


def side_log(workspace: Path) -> Counter[str]:
    path = workspace / "side.log"
    return Counter(path.read_text().split()) if path.exists() else Counter()
