"""``agentfsm batch`` on SQLite: each task one durable run on the queue, run by the command's
own worker; resubmitting the file makes no new model call; ``--out`` has one line per task.
The Python side: ``enqueue`` + ``TaskWorker`` + ``gather_results``."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentfsm import Agent
from agentfsm.adapters.durable import (
    RunSpec,
    TaskWorker,
    enqueue,
    open_client,
    register_agent_factory,
)
from agentfsm.adapters.durable._queue import gather_results, parse_rate
from agentfsm.adapters.durable._slots import executor_slot
from agentfsm.cli import main
from agentfsm.testing import FakeProviderServer, ScriptedChat, ScriptedTools, tool_reply

from .batch_helpers import (
    agentfsm,
    environment,
    provider_options,
    reply,
    requests_per_task,
    side_log,
    write_tasks,
)

IDS = ["alpha", "beta", "gamma", "delta"]


def database_url(folder: Path) -> str:
    return f"sqlite:///{folder / 'queue.sqlite'}"


def _batch(folder: Path, server: FakeProviderServer, *extra: str) -> tuple[int, str, str]:
    proc = agentfsm(
        folder,
        "batch",
        str(folder / "tasks.jsonl"),
        *provider_options(server),
        "--workspace",
        str(folder / "work"),
        "--database-url",
        database_url(folder),
        "--concurrency",
        "2",
        "--poll",
        "0.1",
        *extra,
    )
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out.decode(), err.decode()


def test_batch_runs_each_task_once_and_resubmission_pays_nothing(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    write_tasks(tmp_path / "tasks.jsonl", IDS)
    with FakeProviderServer() as server:
        server.handler = reply
        code, _, err = _batch(tmp_path, server, "--out", str(tmp_path / "results.jsonl"))
        assert code == 0, err
        assert "4 task(s) enqueued" in err
        assert "done 4/4" in err  # the plain progress line (stderr is not a terminal)
        first = requests_per_task(server)
        assert first == {(i, turn): 1 for i in IDS for turn in (0, 1)}
        assert side_log(tmp_path / "work") == dict.fromkeys(IDS, 1)

        lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
        assert [line["id"] for line in lines] == IDS
        for line in lines:
            assert line["status"] == "SUCCESS"
            assert line["stopped_reason"] == "final"
            assert line["final"] == f"done {line['id']}"
            assert line["usage"] == {"input_tokens": 10, "output_tokens": 2}
            assert line["error"] is None
            assert Path(line["session"]).name == f"task-{line['id']}.jsonl"
            assert Path(line["session"]).is_file()

        # The same file again, one task more: only the new one is paid for.
        write_tasks(tmp_path / "tasks.jsonl", [*IDS, "epsilon"])
        code, out, err = _batch(tmp_path, server)
        assert code == 0, err
        assert "1 task(s) enqueued on agentfsm.tasks, 4 already known" in err
        assert len(server.requests) == len(first) + 2
        again = [json.loads(x) for x in out.splitlines()]  # no --out: the lines on stdout
        assert [line["final"] for line in again] == [f"done {i}" for i in [*IDS, "epsilon"]]
    assert side_log(tmp_path / "work") == dict.fromkeys([*IDS, "epsilon"], 1)

    # The results stay queryable in the database.
    listing = agentfsm(
        tmp_path, "runs", "list", "--all", "--json", "--database-url", database_url(tmp_path)
    )
    listed, _ = listing.communicate(timeout=60)
    runs = {run["id"]: run["status"] for run in map(json.loads, listed.decode().splitlines())}
    assert runs == dict.fromkeys([*IDS, "epsilon"], "SUCCESS")


def test_batch_refuses_bad_task_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "work").mkdir()
    cases = {
        "not json\n": "not JSON",
        '{"id": "a"}\n': "prompt must be",
        '{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n': "duplicate id",
        '{"id": "a", "prompt": "x", "max_turns": 0}\n': "max_turns must be",
        '{"id": "a", "prompt": "x", "workspace": "missing"}\n': "is not a folder",
        "\n": "has no tasks",
        '{"id": "a", "prompt": "x"}\n' + "[" * 100_000 + "\n": "tasks.jsonl:2: not a task",
        '{"id": "a", "prompt": "x"}\n{"id": "b", "prompt": "x\0"}\n': "tasks.jsonl:2: a NUL",
        '{"id": "a", "prompt": "x\\u0000"}\n': "tasks.jsonl:1: 'prompt' holds a NUL",
        '{"id": "a", "prompt": "x\\ud800"}\n': "tasks.jsonl:1: 'prompt' holds a NUL",
        '{"id": "a", "prompt": "x", "workspace": "w\\u0000"}\n': "tasks.jsonl:1: 'workspace'",
        '{"id": "a", "prompt": "x"}\n\n{"id": \n': "tasks.jsonl:3: not JSON",
        '{"id": "a", "prompt": "x"}\n\udcff\n': "tasks.jsonl:2: not UTF-8",
    }
    with FakeProviderServer() as server:
        for text, message in cases.items():
            (tmp_path / "tasks.jsonl").write_bytes(text.encode("utf-8", "surrogateescape"))
            code = main(
                [
                    "batch",
                    str(tmp_path / "tasks.jsonl"),
                    *provider_options(server),
                    "--workspace",
                    str(tmp_path / "work"),
                    "--database-url",
                    database_url(tmp_path),
                ]
            )
            err = capsys.readouterr().err
            assert code == 2, err
            assert message in err, err
            assert len(err.splitlines()) == 1, err
        assert server.requests == []
    # Nothing of the refused files was submitted.
    assert _listed(tmp_path) == {}


def _listed(tmp_path: Path) -> dict[str, str]:
    """The runs of the queue's database and their states, read by ``agentfsm runs list``."""
    listing = agentfsm(
        tmp_path, "runs", "list", "--all", "--json", "--database-url", database_url(tmp_path)
    )
    out, err = listing.communicate(timeout=120)
    assert listing.returncode == 0, err
    return {run["id"]: run["status"] for run in map(json.loads, out.decode().split("\n")[:-1])}


def test_batch_takes_a_bom_crlf_and_line_separators_inside_prompts(tmp_path: Path) -> None:
    """A UTF-8 BOM at the start is skipped, CRLF ends a line, and U+2028, U+2029 and U+0085
    in a prompt are text, not line ends: each prompt reaches the model whole."""
    (tmp_path / "work").mkdir()
    prompts = {"a": "task a one\u2028two", "b": "task b three\u2029four\x85five"}
    lines = [json.dumps({"id": k, "prompt": v}, ensure_ascii=False) for k, v in prompts.items()]
    (tmp_path / "tasks.jsonl").write_bytes(("\ufeff" + "\r\n".join(lines) + "\r\n").encode())
    with FakeProviderServer() as server:
        server.handler = reply
        code, _, err = _batch(tmp_path, server)
        assert code == 0, err
        sent = sorted(
            m["content"]
            for request in server.requests
            for m in request.json()["messages"]
            if m.get("role") == "user"
        )
    assert set(prompts.values()) <= set(sent)
    assert _listed(tmp_path) == dict.fromkeys(prompts, "SUCCESS")


def test_rates_parse() -> None:
    assert parse_rate("10/min") == {"limit": 10, "period": 60.0}
    assert parse_rate("10/60") == {"limit": 10, "period": 60.0}
    assert parse_rate("2/s") == {"limit": 2, "period": 1.0}
    for bad in ("", "x/min", "0/min", "3/0"):
        with pytest.raises(ValueError, match="rate"):
            parse_rate(bad)


def test_executor_slots_are_held_per_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with executor_slot("sqlite:///x", "w") as first, executor_slot("sqlite:///x", "w") as second:
        assert (first, second) == ("w-0", "w-1")
    with executor_slot("sqlite:///x", "w") as again:
        assert again == "w-0"  # released with its holder


_built: list[str] = []


def _adder(spec: RunSpec) -> Agent:
    _built.append(spec.prompt)
    replies: list[Any] = [tool_reply(("add", {"a": 2, "b": len(spec.prompt)})), f"{spec.prompt}!"]
    return Agent(ScriptedChat(replies), ScriptedTools({"add": lambda a, b: str(a + b)}))


register_agent_factory("tests.batch.adder", _adder)


def test_python_enqueue_worker_gather(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    url = f"sqlite:///{tmp_path / 'queue.sqlite'}"
    tasks = {
        f"py-{i}": RunSpec(
            prompt=f"p{i}", factory="tests.batch.adder", session_path=str(tmp_path / f"{i}.jsonl")
        )
        for i in range(3)
    }
    client = open_client(url)
    try:
        assert enqueue(tasks, client=client) == list(tasks)
        assert enqueue(tasks, client=client) == []  # known ids are not enqueued again
        seen: list[str] = []
        with TaskWorker(url, concurrency=2, polling_interval=0.1):
            found = asyncio.run(
                gather_results(
                    list(tasks), client=client, on_progress=lambda p: seen.append(p.line())
                )
            )
    finally:
        client.destroy()
    assert [r.final for r in found] == ["p0!", "p1!", "p2!"]
    assert {r.status for r in found} == {"SUCCESS"}
    assert sorted(_built) == ["p0", "p1", "p2"]
    assert seen[-1].startswith("done 3/3")


def test_a_long_submission_is_not_a_database_outage(tmp_path: Path) -> None:
    """Enqueueing a thousand tasks takes several seconds, much longer than --database-wait
    1: the database answers each one, so no outage is said and nothing is given up."""
    (tmp_path / "work").mkdir()
    ids = [f"t{n}" for n in range(1000)]
    write_tasks(tmp_path / "tasks.jsonl", ids)
    with FakeProviderServer() as server:
        code, _, err = _batch(tmp_path, server, "--detach", "--database-wait", "1")
    assert code == 0, err
    assert "has not answered" not in err, err
    assert "1000 task(s) enqueued" in err, err
    assert server.requests == []
    assert _listed(tmp_path) == dict.fromkeys(ids, "ENQUEUED")


def test_runs_list_columns_hold_with_wide_and_control_characters(tmp_path: Path) -> None:
    """``runs list --all``: ids and prompts with wide (East Asian) characters, combining
    marks and terminal controls; every status column starts at the same terminal cell and
    no control character reaches the terminal."""
    from agentfsm.cli._terminal import cells

    (tmp_path / "work").mkdir()
    tasks = {
        "plain": "task plain",
        "漢字のタスク": "task wide 中文の説明がとても長いプロンプト" * 5,
        "é-combined": "task \x1b[31mred\x1b[0m\x07 and \x1b]0;title\x07 and \u202eevil",
        "x": "task \u2028 separated \u0085 lines",
    }
    (tmp_path / "tasks.jsonl").write_text(
        "".join(json.dumps({"id": k, "prompt": v}) + "\n" for k, v in tasks.items())
    )
    with FakeProviderServer() as server:
        code, _, err = _batch(tmp_path, server, "--detach")
    assert code == 0, err
    listing = agentfsm(tmp_path, "runs", "list", "--all", "--database-url", database_url(tmp_path))
    out, err_bytes = listing.communicate(timeout=120)
    assert listing.returncode == 0, err_bytes
    lines = out.decode().split("\n")[:-1]
    assert len(lines) == len(tasks), lines
    starts = {cells(line.split("  ENQUEUED")[0]) for line in lines}
    assert len(starts) == 1, lines
    for line in lines:
        assert not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 or c == "\u202e" for c in line), line
        assert cells(line) <= max(starts) + 2 + 9 + 1 + 4 + 8 + 60, line


def _on_a_tiny_disk(
    tmp_path: Path, size: str, *arguments: str
) -> subprocess.CompletedProcess[bytes]:
    """``agentfsm ARGUMENTS`` in a mount namespace of its own where ``tmp_path/tiny`` is a
    tmpfs of ``size`` (``unshare -rm``; skipped where it is unavailable, failed under CI)."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-rm", "true"], capture_output=True).returncode:
        if os.environ.get("CI"):
            pytest.fail("unshare -rm (user and mount namespaces) is needed; CI is set")
        pytest.skip("unshare -rm (user and mount namespaces) is not available here")
    script = f'mount -t tmpfs -o size={size} tmpfs "{tmp_path / "tiny"}" && exec "$@"'
    return subprocess.run(
        [unshare, "-rm", "sh", "-c", script, "sh", sys.executable, "-m", "agentfsm", *arguments],
        capture_output=True,
        timeout=300,
        env=environment(tmp_path),
    )


def test_a_full_disk_under_the_database_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """The SQLite database on a 400 KiB tmpfs (a mount namespace of its own) that fills up
    while the tasks are enqueued: one line naming the cause and the command to run again,
    exit 1, no traceback, no wait for a database that answers."""
    (tmp_path / "work").mkdir()
    (tmp_path / "tiny").mkdir()
    write_tasks(tmp_path / "tasks.jsonl", [f"t{n}" for n in range(1500)])
    url = f"sqlite:///{tmp_path / 'tiny' / 'queue.sqlite'}"
    with FakeProviderServer() as server:
        proc = _on_a_tiny_disk(
            tmp_path,
            "400k",
            "batch",
            str(tmp_path / "tasks.jsonl"),
            *provider_options(server),
            "--workspace",
            str(tmp_path / "work"),
            "--database-url",
            url,
            "--detach",
            "--database-wait",
            "600",
        )
    lines = [x for x in proc.stderr.decode().splitlines() if "--no-sandbox" not in x[:40]]
    print(f"batch on a full disk: exit {proc.returncode}, {lines[-1][:120] if lines else ''}")
    assert proc.returncode == 1, lines
    assert "Traceback" not in proc.stderr.decode()
    assert len(lines) == 1, lines
    assert "disk is full" in lines[0], lines
    assert "run it again with: agentfsm batch" in lines[0], lines


def test_two_batches_on_one_queue_both_finish(tmp_path: Path) -> None:
    """Two ``agentfsm batch`` commands at once on one SQLite queue, each with its own worker
    (which may take the other's tasks): both end with every one of their tasks done, each
    task run once, nothing left pending or queued in the database."""
    (tmp_path / "work").mkdir()
    first = [f"one-{n}" for n in range(6)]
    second = [f"two-{n}" for n in range(6)]
    write_tasks(tmp_path / "one.jsonl", first)
    write_tasks(tmp_path / "two.jsonl", second)
    with FakeProviderServer() as server:
        server.handler = reply
        procs = [
            agentfsm(
                tmp_path,
                "batch",
                str(tmp_path / name),
                *provider_options(server),
                "--workspace",
                str(tmp_path / "work"),
                "--database-url",
                database_url(tmp_path),
                "--concurrency",
                "3",
                "--poll",
                "0.1",
            )
            for name in ("one.jsonl", "two.jsonl")
        ]
        ended = [proc.communicate(timeout=240) for proc in procs]
        for proc, (_, err) in zip(procs, ended, strict=True):
            assert proc.returncode == 0, err.decode()
        done = [{json.loads(x)["id"] for x in out.decode().split("\n")[:-1]} for out, _ in ended]
        assert done == [set(first), set(second)]
        assert requests_per_task(server) == {(i, t): 1 for i in first + second for t in (0, 1)}
    assert _listed(tmp_path) == dict.fromkeys(first + second, "SUCCESS")


def test_a_full_disk_under_a_durable_run_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """``run --durable`` with its SQLite database on a 200 KiB tmpfs: the database cannot
    even be created; one line naming the cause, exit 1, no traceback."""
    (tmp_path / "work").mkdir()
    (tmp_path / "tiny").mkdir()
    url = f"sqlite:///{tmp_path / 'tiny' / 'durable.sqlite'}"
    with FakeProviderServer() as server:
        server.handler = reply
        proc = _on_a_tiny_disk(
            tmp_path,
            "200k",
            "run",
            "task a",
            "--durable",
            *provider_options(server),
            "--workspace",
            str(tmp_path / "work"),
            "--database-url",
            url,
        )
    lines = [x for x in proc.stderr.decode().splitlines() if "--no-sandbox" not in x[:40]]
    print(f"run --durable on a full disk: exit {proc.returncode}, {lines}")
    assert proc.returncode == 1, lines
    assert "Traceback" not in proc.stderr.decode()
    assert len(lines) == 1, lines
    assert "disk is full" in lines[0], lines
