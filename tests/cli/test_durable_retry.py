"""Durable work from the command line as a user meets it: a wrong ``--base-url`` leaves
failed tasks that ``batch --retry-failed`` and ``runs retry`` run again with the new
command line's provider; each failed task is one line (DBOS's tracebacks and the retries'
chatter go to a log file); ``--no-sandbox`` warns once; Ctrl-C says what is pending and how
to finish it. Real ``agentfsm`` processes, a real FakeProviderServer, SQLite."""

from __future__ import annotations

import json
import re
import shlex
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from agentfsm.adapters.durable import open_client, progress
from agentfsm.testing import FakeProviderServer, Reply
from tests.durable.batch_helpers import agentfsm, reply, task_of, write_tasks

PROGRESS = re.compile(r"^done \d+/\d+ · running \d+ · queued \d+ · failed \d+ · tokens \d+$")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def database_url(folder: Path) -> str:
    return f"sqlite:///{folder / 'queue.sqlite'}"


def provider(base_url: str) -> list[str]:
    return [
        "--provider",
        "openai-compatible",
        "--base-url",
        base_url,
        "--model",
        "m",
        "--preset",
        "minimal",
        "--no-sandbox",
    ]


def batch(folder: Path, base_url: str, *extra: str) -> tuple[int, list[str], list[str]]:
    proc = agentfsm(
        folder,
        "batch",
        str(folder / "tasks.jsonl"),
        *provider(base_url),
        "--workspace",
        str(folder / "work"),
        "--database-url",
        database_url(folder),
        "--poll",
        "0.1",
        *extra,
    )
    out, err = proc.communicate(timeout=180)
    return proc.returncode, out.decode().splitlines(), err.decode().splitlines()


def told(err: list[str]) -> list[str]:
    """stderr without the progress lines (which change as the counts do)."""
    return [line for line in err if not PROGRESS.match(line)]


def test_failed_tasks_are_one_line_each_and_retry_failed_uses_the_new_base_url(
    tmp_path: Path,
) -> None:
    (tmp_path / "work").mkdir()
    write_tasks(tmp_path / "tasks.jsonl", ["alpha", "beta"])
    refused = f"http://127.0.0.1:{closed_port()}/v1"
    code, out, err = batch(tmp_path, refused)
    assert code == 1, err
    lines = told(err)
    print(f"stderr of two failed tasks: {len(err)} lines, {len(lines)} besides progress")
    assert len(lines) == 6, lines  # --no-sandbox, enqueued, logs, 2 failures, how to retry
    assert sum("--no-sandbox:" in line for line in err) == 1
    failures = [line for line in lines if line.startswith("agentfsm batch: task ")]
    assert len(failures) == 2
    address = refused.removeprefix("http://").removesuffix("/v1")
    for line in failures:  # where the calls went, and what to check, as `run` says
        assert "ERROR: ProviderError" in line
        assert "could not connect" in line
        assert f"(at {address}); hint: is a server listening at {address}" in line
    # The hint does not repeat the --base-url that failed: it asks for the right one.
    assert "give the right --base-url" in lines[-1]
    hint = shlex.split(lines[-1].split("then rerun them with: ", 1)[1])
    assert hint[hint.index("--base-url") + 1] == "URL"
    assert refused not in lines[-1]
    assert "--retry-failed" in hint
    assert not any("Traceback" in line for line in err)
    [log_line] = [line for line in lines if line.startswith("agentfsm batch: logs go to ")]
    log = Path(log_line.removeprefix("agentfsm batch: logs go to "))
    logged = log.read_text()
    assert "Traceback" in logged
    assert "attempt 1 failed" in logged
    assert [json.loads(line)["status"] for line in out] == ["ERROR", "ERROR"]

    with FakeProviderServer() as server:
        server.handler = reply
        # Without --retry-failed a failed task stays as it is: nothing is paid for.
        code, out, err = batch(tmp_path, f"{server.base_url}/v1")
        assert code == 1, err
        assert server.requests == []
        assert "2 already known (not run again)" in "\n".join(err)
        # With it, the new base URL runs them, as new attempts.
        code, out, err = batch(tmp_path, f"{server.base_url}/v1", "--retry-failed")
        assert code == 0, err
        assert "2 failed one(s) retried" in "\n".join(err)
        assert {task_of(r) for r in server.requests} == {"alpha", "beta"}
        results = [json.loads(line) for line in out]
        assert [(r["id"], r["run"], r["status"]) for r in results] == [
            ("alpha", "alpha@retry1", "SUCCESS"),
            ("beta", "beta@retry1", "SUCCESS"),
        ]
        assert all(Path(r["session"]).name.endswith(".retry1.jsonl") for r in results)
        paid = len(server.requests)
        # Again: the latest attempts are reported; nothing runs.
        code, out, err = batch(tmp_path, f"{server.base_url}/v1", "--retry-failed")
        assert code == 0, err
        assert len(server.requests) == paid
        assert [json.loads(line)["run"] for line in out] == ["alpha@retry1", "beta@retry1"]

    listing = agentfsm(
        tmp_path, "runs", "list", "--all", "--json", "--database-url", database_url(tmp_path)
    )
    listed, _ = listing.communicate(timeout=60)
    runs = {run["id"]: run["status"] for run in map(json.loads, listed.decode().splitlines())}
    assert runs == {
        "alpha": "ERROR",
        "beta": "ERROR",
        "alpha@retry1": "SUCCESS",
        "beta@retry1": "SUCCESS",
    }
    # The plain listing keeps its columns with ids of different widths.
    listing = agentfsm(tmp_path, "runs", "list", "--all", "--database-url", database_url(tmp_path))
    listed, _ = listing.communicate(timeout=60)
    rows = listed.decode().splitlines()
    assert len(rows) == 4
    assert len({row.index(" steps") for row in rows}) == 1, rows


def test_a_known_id_with_another_prompt_is_named_in_one_warning(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    write_tasks(tmp_path / "tasks.jsonl", ["alpha", "beta"])
    with FakeProviderServer() as server:
        server.handler = reply
        code, _, err = batch(tmp_path, f"{server.base_url}/v1")
        assert code == 0, err
        assert not any("already known with another" in line for line in err)
        paid = len(server.requests)
        text = (tmp_path / "tasks.jsonl").read_text().replace("task beta", "task beta again")
        (tmp_path / "tasks.jsonl").write_text(text)
        code, _, err = batch(tmp_path, f"{server.base_url}/v1")
        assert code == 0, err
        warnings = [line for line in err if "already known with another" in line]
        assert len(warnings) == 1
        assert "'beta'" in warnings[0]
        assert "'alpha'" not in warnings[0]
        # Other options (a new --max-turns) are named too.
        code, _, err = batch(tmp_path, f"{server.base_url}/v1", "--max-turns", "7")
        warnings = [line for line in err if "already known with another" in line]
        assert len(warnings) == 1
        assert "'alpha'" in warnings[0]
        assert "'beta'" in warnings[0]
        assert len(server.requests) == paid


def test_runs_retry_reruns_a_failed_durable_run_with_the_new_provider(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    url = database_url(tmp_path)
    refused = f"http://127.0.0.1:{closed_port()}/v1"
    run = agentfsm(
        tmp_path,
        "run",
        "task solo",
        *provider(refused),
        "--workspace",
        str(tmp_path / "work"),
        "--durable",
        "--database-url",
        url,
    )
    _, err = run.communicate(timeout=120)
    assert run.returncode == 1, err
    assert b"Traceback" not in err
    found = re.search(r"durable run (\S+) \(resume", err.decode())
    assert found is not None, err
    run_id = found.group(1)
    assert f"run it again with: agentfsm runs retry {run_id}" in err.decode()
    assert b"chat call failed" not in err  # the failure is told once, by the renderer

    with FakeProviderServer() as server:
        server.handler = reply
        retry = agentfsm(
            tmp_path,
            "runs",
            "retry",
            run_id,
            "--base-url",
            f"{server.base_url}/v1",
            "--model",
            "m",
            "--database-url",
            url,
        )
        out, err = retry.communicate(timeout=120)
        assert retry.returncode == 0, err
        [result] = [json.loads(x) for x in out.decode().splitlines()]
        assert result["run"] == f"{run_id}@retry1"
        assert result["status"] == "SUCCESS"
        assert result["final"] == "done solo"
        assert Path(result["session"]).name == f"{run_id}.retry1.jsonl"
        assert len(server.requests) == 2
        # It succeeded: a second retry is refused in one line, and nothing is paid for.
        again = agentfsm(tmp_path, "runs", "retry", run_id, "--database-url", url)
        _, err = again.communicate(timeout=60)
        assert again.returncode == 2
        assert err.decode().count("\n") == 1
        assert "is SUCCESS, not failed" in err.decode()
        assert len(server.requests) == 2


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(
    "inherited",
    ["default", "ignored"],
    ids=["SIGINT as inherited", "started with SIGINT ignored, as a background job of a script is"],
)
def test_ctrl_c_on_batch_prints_the_pending_count_and_the_command_that_finishes(
    tmp_path: Path, inherited: str
) -> None:
    (tmp_path / "work").mkdir()
    write_tasks(tmp_path / "tasks.jsonl", ["alpha", "beta", "gamma"])
    with FakeProviderServer() as server:
        server.handler = lambda request: Reply.stall(60, reply(request))
        proc = agentfsm(
            tmp_path,
            "batch",
            str(tmp_path / "tasks.jsonl"),
            *provider(f"{server.base_url}/v1"),
            "--workspace",
            str(tmp_path / "work"),
            "--database-url",
            database_url(tmp_path),
            "--concurrency",
            "2",
            "--poll",
            "0.1",
            preexec_fn=_ignore_sigint if inherited == "ignored" else None,
        )
        deadline = time.monotonic() + 60
        while len(server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(server.requests) == 2  # two tasks are running, one is queued
        proc.send_signal(signal.SIGINT)
        started = time.monotonic()
        out, err = proc.communicate(timeout=60)
        print(f"batch ended {time.monotonic() - started:.1f} s after SIGINT")
        lines = err.decode().splitlines()
        assert proc.returncode == 130, lines
        assert not any("Traceback" in line for line in lines)
        [notice] = [line for line in lines if "interrupted" in line]
        assert "3 of 3 task(s) pending (2 running, 1 queued)" in notice
        command = notice.split("finish them with: ", 1)[1]
        assert command.startswith("agentfsm batch ")
        assert "--retry-failed" not in command

        server.handler = reply
        arguments = shlex.split(command)[1:]
        rest = agentfsm(tmp_path, *arguments)
        out, err = rest.communicate(timeout=120)
        assert rest.returncode == 0, err
        results = [json.loads(line) for line in out.decode().splitlines()]
        assert [(r["id"], r["status"]) for r in results] == [
            ("alpha", "SUCCESS"),
            ("beta", "SUCCESS"),
            ("gamma", "SUCCESS"),
        ]


def test_a_worker_tells_each_failed_task_in_one_line_and_warns_once(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    write_tasks(tmp_path / "tasks.jsonl", ["alpha", "beta", "gamma"])
    code, _, err = batch(tmp_path, f"http://127.0.0.1:{closed_port()}/v1", "--detach")
    assert code == 0, err
    worker = agentfsm(tmp_path, "worker", "--database-url", database_url(tmp_path), "--poll", "0.1")
    stream, output = worker.stderr, worker.stdout
    assert stream is not None
    assert output is not None
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(x.decode() for x in iter(stream.readline, b""))
    )
    reader.start()
    deadline = time.monotonic() + 120
    while sum(" failed: " in line for line in lines) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    worker.send_signal(signal.SIGINT)
    worker.wait(timeout=60)
    reader.join(timeout=10)
    stream.close()
    assert output.read() == b""
    output.close()
    print(f"worker stderr: {len(lines)} lines")
    assert worker.returncode == 0, lines
    failures = [line for line in lines if " failed: " in line]
    assert sorted(line.split("'")[1] for line in failures) == ["alpha", "beta", "gamma"]
    assert all("ProviderError" in line and "could not connect" in line for line in failures)
    assert sum("--no-sandbox:" in line for line in lines) == 1
    assert not any("Traceback" in line or "attempt 1 failed" in line for line in lines)
    # serving, warning, the log file (named when it starts), 3 failures, stopping
    assert len(lines) == 7, lines
    assert "serving agentfsm.tasks" in lines[0]
    [log_line] = [line for line in lines if "logs go to " in line]
    assert Path(log_line.split("logs go to ", 1)[1].strip()).is_file()


def test_a_worker_tells_each_task_it_ends_and_stops_on_sigterm(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    write_tasks(tmp_path / "tasks.jsonl", ["alpha", "beta", "gamma"])
    with FakeProviderServer() as server:
        server.handler = reply
        code, _, err = batch(tmp_path, f"{server.base_url}/v1", "--detach")
        assert code == 0, err
        worker = agentfsm(
            tmp_path, "worker", "--database-url", database_url(tmp_path), "--poll", "0.1"
        )
        stream = worker.stderr
        assert stream is not None
        lines: list[str] = []
        reader = threading.Thread(
            target=lambda: lines.extend(x.decode() for x in iter(stream.readline, b""))
        )
        reader.start()
        deadline = time.monotonic() + 120
        while sum(" done (" in line for line in lines) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        client = open_client(database_url(tmp_path))  # the outcomes recorded, too
        try:
            ids = ["alpha", "beta", "gamma"]
            while not progress(ids, client=client).finished and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            client.destroy()
        worker.send_signal(signal.SIGTERM)
        started = time.monotonic()
        worker.wait(timeout=60)  # not communicate(): it would race the reader for lines
        took = time.monotonic() - started
        reader.join(timeout=10)
        stream.close()
        assert worker.stdout is not None
        worker.stdout.close()
    print(f"worker ended {took:.1f} s after SIGTERM; stderr: {lines}")
    assert worker.returncode == 0, lines
    done = sorted(line for line in lines if " done (" in line)
    assert [line.split("'")[1] for line in done] == ["alpha", "beta", "gamma"]
    assert all("(final, 2 model calls, " in line for line in done)
    assert lines[-1].endswith(": stopping\n")
    assert not list((tmp_path / "state" / "agentfsm" / "logs").glob("*"))  # nothing logged


def test_a_runs_retry_cut_off_runs_on_when_given_again(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    url = database_url(tmp_path)
    run = agentfsm(
        tmp_path,
        "run",
        "task solo",
        *provider(f"http://127.0.0.1:{closed_port()}/v1"),
        "--workspace",
        str(tmp_path / "work"),
        "--durable",
        "--database-url",
        url,
    )
    _, err = run.communicate(timeout=120)
    found = re.search(r"durable run (\S+) \(resume", err.decode())
    assert found is not None, err
    run_id = found.group(1)
    with FakeProviderServer() as server:
        server.handler = lambda request: Reply.stall(60, reply(request))
        options = ["--base-url", f"{server.base_url}/v1", "--model", "m", "--database-url", url]
        cut = agentfsm(tmp_path, "runs", "retry", run_id, *options)
        deadline = time.monotonic() + 60
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.requests, "the retry never called the model"
        cut.kill()  # kill -9: no word about what was left
        cut.communicate(timeout=30)

        server.handler = reply
        again = agentfsm(tmp_path, "runs", "retry", run_id, *options)
        out, err = again.communicate(timeout=120)
    told = err.decode()
    assert again.returncode == 0, told
    assert f"continuing {run_id}@retry1" in told
    [result] = [json.loads(line) for line in out.decode().splitlines()]
    assert (result["run"], result["status"], result["final"]) == (
        f"{run_id}@retry1",
        "SUCCESS",
        "done solo",
    )


class _Writes:
    """A stderr that keeps each write apart."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_the_interrupted_notice_is_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """The notice that says how to finish the batch reaches stderr in one write with its
    newline: ``print`` wrote the newline apart, and a progress line another thread wrote
    between them ran into the command it gives (``--poll 0.1agentfsm batch: …``)."""
    from agentfsm.cli import _queue_work

    stderr = _Writes()
    monkeypatch.setattr(sys, "stderr", stderr)
    view = cast(Any, SimpleNamespace(known=None))  # no counts read yet
    client = cast(Any, None)  # the database does not answer
    _queue_work._pending("batch", ["a"], client, view, "agentfsm batch t.jsonl", "interrupted")
    [notice] = stderr.writes
    assert notice.startswith("agentfsm batch: interrupted: 1 task(s) not known to have ended")
    assert notice.endswith("; finish them with: agentfsm batch t.jsonl\n")
