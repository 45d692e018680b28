"""Waiting on a system database that does not answer, without PostgreSQL: reads retried on
a real refused connection until it answers or the wait runs out, the line the user sees
(password hidden), and what the durable commands leave in the log folder. The PostgreSQL
tier (``test_database_faults.py``) runs the commands against a database that goes away."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
from pathlib import Path

import psycopg
import pytest

from agentfsm.adapters.durable import DatabaseUnreachable
from agentfsm.adapters.durable._outage import Outage, is_connection_error, reason_of
from agentfsm.adapters.durable._queue import read_patiently
from agentfsm.cli import main
from agentfsm.cli._database_wait import DatabaseStatus
from agentfsm.cli._logfile import KEEP, MAX_BYTES, log_folder, logs_to_file
from agentfsm.cli._queue_work import blamed_option, command_line
from agentfsm.testing import FakeProviderServer

from .batch_helpers import agentfsm, provider_options, reply, write_tasks


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _refused(port: int) -> None:
    """A real connection attempt to a port nobody listens on."""
    psycopg.connect(host="127.0.0.1", port=port, user="u", dbname="d", connect_timeout=2).close()


def test_a_read_is_retried_while_the_database_refuses_then_returns() -> None:
    port = _closed_port()
    attempts: list[float] = []
    waits: list[tuple[float, str | None]] = []

    def read() -> str:
        attempts.append(time.monotonic())
        if len(attempts) < 4:
            _refused(port)
        return "answer"

    answer = asyncio.run(read_patiently(Outage(60), lambda s, r: waits.append((s, r)), read))
    print(f"{len(attempts)} reads, {len(waits)} wait notices: {waits[:2]}")
    assert answer == "answer"
    assert len(attempts) == 4
    # Retried about every second, and the user told once the wait passed 2 s.
    assert waits
    assert all(s >= 2 for s, _ in waits)
    assert all(r is not None and "refused" in r.lower() for _, r in waits)


def test_the_wait_runs_out_with_the_reason() -> None:
    port = _closed_port()
    with pytest.raises(DatabaseUnreachable) as raised:
        asyncio.run(read_patiently(Outage(2.5), None, _refused, port))
    assert raised.value.seconds > 2.5
    assert "refused" in str(raised.value).lower()


def test_a_read_that_never_answers_is_abandoned_not_waited_for() -> None:
    started = time.monotonic()
    waits: list[float] = []
    with pytest.raises(DatabaseUnreachable):
        asyncio.run(read_patiently(Outage(3), lambda s, r: waits.append(s), time.sleep, 3600))
    took = time.monotonic() - started
    print(f"a read that never returns: given up after {took:.1f} s, {len(waits)} notices")
    assert took < 60  # the hour-long read was abandoned, its thread a daemon
    assert waits


def test_only_connection_errors_are_waited_on() -> None:
    with pytest.raises(psycopg.OperationalError) as refused:
        _refused(_closed_port())
    assert is_connection_error(refused.value)
    assert "refused" in reason_of(refused.value).lower()
    assert not is_connection_error(ValueError("a bug"))
    with pytest.raises(ValueError, match="a bug"):
        asyncio.run(read_patiently(Outage(60), None, _raise, ValueError("a bug")))


def _raise(error: Exception) -> None:
    raise error


def test_the_wait_line_names_the_database_without_its_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = DatabaseStatus("batch", "postgresql://ops:s3cr3t-pw@db.example:5432/queue", 300)
    status.waiting(2.2, "connection refused")
    status.waiting(5.0, "connection refused")  # not again within 10 s
    status.waiting(12.5, "connection refused")
    status.answered(14.0)
    status.answered(20.0)  # nothing was shown since
    lines = capsys.readouterr().err.splitlines()
    print("\n".join(lines))
    assert lines == [
        "agentfsm batch: the database 'postgresql://ops:***@db.example:5432/queue' has not "
        "answered for 2 s (connection refused); waiting up to 300 s (--database-wait)",
        "agentfsm batch: the database 'postgresql://ops:***@db.example:5432/queue' has not "
        "answered for 12 s (connection refused); waiting up to 300 s (--database-wait)",
        "agentfsm batch: the database answers again after 14 s",
    ]
    assert "s3cr3t" not in "\n".join(lines)
    # A password in the query string is hidden too, there and in the commands printed.
    url = "postgresql://ops@db.example/queue?sslmode=require&password=s3cr3t&api_key=k3y"
    status = DatabaseStatus("worker w-0", url, None)
    assert "s3cr3t" not in status.line(3, None)
    assert "password=***" in status.line(3, None)
    printed = command_line(["batch", "t.jsonl", "--database-url", url])
    assert "s3cr3t" not in printed
    assert "k3y" not in printed
    assert "sslmode=require" in printed


def test_the_retry_hint_leaves_the_failed_option_blank() -> None:
    argv = ["batch", "t.jsonl", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    assert command_line(argv, "--retry-failed", blank={"--base-url": "URL"}) == (
        "agentfsm batch t.jsonl --base-url URL --model m --retry-failed"
    )
    assert command_line(
        ["batch", "t.jsonl", "--base-url=http://x"], blank={"--base-url": "URL"}
    ) == ("agentfsm batch t.jsonl --base-url=URL")
    assert command_line(["batch", "t.jsonl"], blank={"--api-key-env": "VAR"}) == (
        "agentfsm batch t.jsonl --api-key-env VAR"
    )


def test_unknown_task_keys_are_refused_with_the_known_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "work").mkdir()
    line = {"id": "a", "prompt": "x", "base_url": "http://127.0.0.1:9/v1"}
    (tmp_path / "tasks.jsonl").write_text(json.dumps(line) + "\n")
    with FakeProviderServer() as server:
        code = main(
            [
                "batch",
                str(tmp_path / "tasks.jsonl"),
                *provider_options(server),
                "--workspace",
                str(tmp_path / "work"),
                "--database-url",
                f"sqlite:///{tmp_path / 'queue.sqlite'}",
            ]
        )
        assert server.requests == []
    err = capsys.readouterr().err
    assert code == 2, err
    assert "tasks.jsonl:1: unknown key(s) 'base_url'" in err
    assert "a task has id, prompt, workspace, max_turns" in err


def test_read_only_and_quiet_commands_leave_no_log_file(tmp_path: Path) -> None:
    """``runs list`` and a worker with nothing to log create no log file and name none;
    a batch whose tasks succeed neither."""
    url = f"sqlite:///{tmp_path / 'queue.sqlite'}"
    (tmp_path / "work").mkdir()
    write_tasks(tmp_path / "tasks.jsonl", ["alpha"])
    with FakeProviderServer() as server:
        server.handler = reply
        batch = agentfsm(
            tmp_path,
            "batch",
            str(tmp_path / "tasks.jsonl"),
            *provider_options(server),
            "--workspace",
            str(tmp_path / "work"),
            "--database-url",
            url,
            "--poll",
            "0.1",
        )
        _, err = batch.communicate(timeout=120)
        assert batch.returncode == 0, err
    for _ in range(3):
        listing = agentfsm(tmp_path, "runs", "list", "--all", "--database-url", url)
        out, _ = listing.communicate(timeout=60)
        assert listing.returncode == 0
        assert b"alpha" in out
    worker = agentfsm(tmp_path, "worker", "--database-url", url, "--poll", "0.1")
    assert worker.stderr is not None
    first = worker.stderr.readline().decode()
    assert "serving agentfsm.tasks" in first
    worker.terminate()
    _, rest = worker.communicate(timeout=60)
    assert worker.returncode == 0, rest
    folder = tmp_path / "state" / "agentfsm" / "logs"
    print(f"logs folder after a batch, 3 runs list and a worker: exists {folder.exists()}")
    assert not folder.exists()  # not even the folder
    assert "logs go to" not in err.decode() + first + rest.decode()


def test_log_files_are_rotated_and_pruned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    folder = log_folder()
    folder.mkdir(parents=True)
    for n in range(KEEP + 20):
        old = folder / f"old-{n:03d}.log"
        old.write_text("x")
        os.utime(old, (1_000_000 + n, 1_000_000 + n))
    (folder / "old-000.log.1").write_text("x")
    with logs_to_file("worker", verbose=False, loggers=("dbos",), announce=True) as path:
        assert path is not None
        assert not path.exists()  # nothing logged yet: no file, no pruning
        assert len(list(folder.glob("*.log"))) == KEEP + 20
        chunk = "y" * 10_000
        for _ in range(MAX_BYTES // 10_000 * 3):
            logging.getLogger("dbos").warning(chunk)
    parts = sorted(p.name for p in folder.iterdir() if p.name.startswith("worker-"))
    sizes = [p.stat().st_size for p in folder.iterdir() if p.name.startswith("worker-")]
    logs = sorted(folder.glob("*.log"))
    print(f"{len(logs)} log files kept of {KEEP + 21}; this one in {parts}, sizes {sizes}")
    assert len(logs) == KEEP
    assert parts == [path.name, path.name + ".1"]
    assert max(sizes) <= MAX_BYTES + 20_000
    assert not (folder / "old-000.log").exists()
    assert not (folder / "old-000.log.1").exists()
    assert (folder / f"old-{KEEP + 19:03d}.log").exists()
    err = capsys.readouterr().err
    assert err.count("logs go to") == 1  # named once, when it started
    assert f"agentfsm worker: logs go to {path}" in err


def test_the_option_every_failure_points_at() -> None:
    from agentfsm.adapters.durable import TaskResult

    refused = TaskResult(id="a", status="ERROR", error_kind="connection")
    slow = TaskResult(id="b", status="ERROR", error_kind="timeout")
    key = TaskResult(id="c", status="ERROR", error_kind="auth")
    other = TaskResult(id="d", status="ERROR", error_kind=None)
    assert blamed_option([refused, slow]) == ("--base-url", "URL")
    assert blamed_option([key]) == ("--api-key-env", "VAR")
    assert blamed_option([refused, key]) is None
    assert blamed_option([refused, other]) is None


def test_a_log_file_on_a_full_disk_is_one_line_and_loses_no_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The log file is /dev/full (every write: ENOSPC): one line says so, every record
    reaches stderr instead, no traceback."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with logs_to_file("batch", verbose=False, loggers=("dbos",), announce=True) as path:
        assert path is not None
        path.parent.mkdir(parents=True)
        path.symlink_to("/dev/full")
        for n in range(5):
            logging.getLogger("dbos").warning("record %d", n)
    err = capsys.readouterr().err
    print(err)
    assert "Traceback" not in err, err
    assert "Logging error" not in err, err
    assert err.count("No space left on device") == 1, err
    assert all(f"record {n}" in err for n in range(5)), err
