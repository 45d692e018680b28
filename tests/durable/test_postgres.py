"""The PostgreSQL tier (``make test-postgres``): a real server, two ``agentfsm worker``
processes, 50 tasks from ``agentfsm batch --no-work``; one worker is killed (-9) mid-batch
and restarted. All 50 finish; a step recorded before the kill never runs again, and no task
runs twice apart from the one step each killed task had in flight."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOS, DBOSClient

from agentfsm.testing import FakeProviderServer, RecordedRequest, Reply

from ..pg_server import PostgresServer, postgres_bin
from .batch_helpers import (
    agentfsm,
    provider_options,
    reply,
    requests_per_task,
    side_log,
    turn_of,
    write_tasks,
)

pytestmark = pytest.mark.postgres

TASKS = 50
NEEDS = "needs PostgreSQL (apt-get install postgresql)"


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    if postgres_bin() is None:
        if os.environ.get("CI"):
            pytest.fail(f"{NEEDS}; CI is set, where every test must run")
        pytest.skip(NEEDS)
    folder = Path(tempfile.mkdtemp(prefix="agentfsm-pg-"))
    server = PostgresServer(folder).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _slow(request: RecordedRequest) -> Reply:
    """Each task's first call takes a while, so a worker always has tasks in flight."""
    answer = reply(request)
    return Reply.stall(0.3, answer) if turn_of(request) == 0 else answer


def _wait_for(check: Callable[[], bool], what: str, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class _Worker:
    def __init__(self, folder: Path, url: str) -> None:
        self.proc = agentfsm(
            folder,
            "worker",
            "--database-url",
            url,
            "--concurrency",
            "4",
            "--poll",
            "0.2",
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline().decode()
        assert "serving agentfsm.tasks" in line, line + self.proc.stderr.read().decode()
        self.executor = line.split()[2].rstrip(":")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            _, err = self.proc.communicate(timeout=60)
            assert self.proc.returncode == 0, err.decode()


def _statuses(client: DBOSClient) -> list[Any]:
    return client.list_workflows(load_input=False, load_output=False)


def test_two_workers_one_killed_every_task_once(tmp_path: Path, postgres: PostgresServer) -> None:
    url = postgres.url
    work = tmp_path / "work"
    work.mkdir()
    ids = [f"t{i:02d}" for i in range(TASKS)]
    write_tasks(tmp_path / "tasks.jsonl", ids)
    workers: list[_Worker] = []
    with FakeProviderServer() as server:
        server.handler = _slow
        batch = agentfsm(
            tmp_path,
            "batch",
            str(tmp_path / "tasks.jsonl"),
            *provider_options(server),
            "--workspace",
            str(work),
            "--database-url",
            url,
            "--no-work",
            "--poll",
            "0.2",
            "--out",
            str(tmp_path / "results.jsonl"),
        )
        try:
            DBOS.migrate(url)  # the batch command does too; the test reads the tables first
            client = DBOSClient(system_database_url=url)
            try:
                _wait_for(lambda: len(_statuses(client)) == TASKS, "the tasks to be enqueued")
                workers = [_Worker(tmp_path, url), _Worker(tmp_path, url)]
                victim = workers[0]

                def victim_busy() -> bool:
                    states = _statuses(client)
                    done = sum(s.status == "SUCCESS" for s in states)
                    mine = [
                        s
                        for s in states
                        if s.status == "PENDING" and s.executor_id == victim.executor
                    ]
                    return done >= 10 and len(mine) >= 2

                _wait_for(victim_busy, "the first worker to be mid-batch")
                victim.kill()
                stranded = {
                    s.workflow_id: [
                        step["function_name"]
                        for step in client.list_workflow_steps(s.workflow_id)
                        if step.get("completed_at_epoch_ms") is not None
                    ]
                    for s in _statuses(client)
                    if s.status == "PENDING" and s.executor_id == victim.executor
                }
                assert stranded, "the killed worker had no task in flight"
                restarted = _Worker(tmp_path, url)
                workers[0] = restarted
                assert restarted.executor == victim.executor  # the freed slot
                _, err = batch.communicate(timeout=120)
                assert batch.returncode == 0, err.decode()
            finally:
                client.destroy()
        finally:
            for worker in workers:
                worker.stop()
            if batch.poll() is None:
                batch.kill()
                batch.communicate()
        per_task = requests_per_task(server)

    results = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in results] == ids
    assert all(r["status"] == "SUCCESS" and r["final"] == f"done {r['id']}" for r in results)
    assert {r["executor"] for r in results} <= {w.executor for w in workers}

    log = side_log(work)
    for task in ids:
        if task not in stranded:
            assert per_task[(task, 0)] == per_task[(task, 1)] == 1, task
            assert log[task] == 1, task
            continue
        # A killed task: its steps recorded before the kill ran once; the one in flight
        # (not recorded) may have run again.
        chats = stranded[task].count("chat")
        for turn in (0, 1):
            assert per_task[(task, turn)] == 1 if chats > turn else per_task[(task, turn)] <= 2
        assert log[task] == 1 if "tool shell" in stranded[task] else log[task] <= 2
    # No task ran a second time as a whole: at most one repeated call per killed task.
    assert sum(per_task.values()) <= 2 * TASKS + len(stranded)
    assert sum(log.values()) <= TASKS + len(stranded)
