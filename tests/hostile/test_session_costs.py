"""What a session file within the documented limits costs to read: time and memory.

The shapes an attacker used: lines of 4 MiB holding a million and more empty objects, as
junk records and as a tool call's arguments; lines just under the per-record bound of
containers, many of them; and a file larger than what ``sessions list`` reads. Each case
runs the real commands (``sessions list``, ``trace``) and prints its seconds and peak RSS
(the hostile table at the end of the run too); what is asserted is the outcome: the right
lines skipped, the right rows shown.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from agentfsm.adapters.sessions import (
    MAX_JSON_CONTAINERS,
    MAX_SESSION_CONTAINERS,
    read_session,
    read_session_chain,
)
from agentfsm.cli import main
from agentfsm.cli._sessions_cmd import LIST_READ_BYTES

from .table import measure

START = json.dumps({"kind": "meta", "ts": "2026-01-01T00:00:00Z", "meta": {"event": "run_start"}})
USER = json.dumps({"kind": "message", "message": {"role": "user", "content": "first ask"}})
END = json.dumps({"kind": "meta", "meta": {"event": "run_end", "stopped_reason": "final"}})


def objects(count: int) -> str:
    return '{"x":[' + ",".join(["{}"] * count) + "]}"


def call(number: int, arguments: str) -> str:
    head = '{"kind":"message","message":{"role":"assistant","content":"","tool_calls":'
    return head + f'[{{"id":"c{number}","name":"f","arguments":{arguments}}}]}}}}'


def write(path: Path, lines: list[str]) -> float:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for line in lines:
            out.write(line + "\n")
    return path.stat().st_size / 2**20


def commands(folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    where = ["--session-dir", str(folder)]
    assert main(["sessions", "list", "--json", *where]) == 0
    listed = capsys.readouterr().out
    assert main(["trace", "latest", "--json", *where]) == 0
    return listed, capsys.readouterr().out


MILLION = (4 * 1024 * 1024 - 200) // 3  # empty objects in a line of 4 MiB


@pytest.mark.parametrize(
    ("case", "line"),
    [
        ("junk records of 1.4 million empty objects", lambda n: objects(MILLION)),
        ("tool-call arguments of 1.4 million empty objects", lambda n: call(n, objects(MILLION))),
    ],
)
def test_lines_of_millions_of_objects(
    tmp_path: Path, case: str, line: object, capsys: pytest.CaptureFixture[str]
) -> None:
    assert callable(line)
    path = tmp_path / "s" / "20260101T000000Z-0001.jsonl"
    size = write(path, [START, USER, *(line(n) for n in range(10)), END])
    with measure("session costs", f"10 lines: {case}") as row:
        listed, traced = commands(path.parent, capsys)
        row.outcome = "10 lines skipped"
    (found,) = json.loads(listed)
    assert (found["prompt"], found["last_stop"], found["turns"]) == ("first ask", "final", 0)
    assert json.loads(traced)["runs"][0]["stopped_reason"] == "final"
    print(
        f"\n{case}: {size:.0f} MiB file; sessions list + trace in {row.seconds:.1f} s, "
        f"peak RSS {row.peak_rss_mb:.0f} MiB (grew {row.growth_mb:.0f} MiB)"
    )


def test_many_lines_just_under_the_record_bound(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each record keeps its arguments; the file's budget of containers stops the rest (a
    small record after them is still read while the budget has room for it)."""
    per_line = MAX_JSON_CONTAINERS - 10  # the record around them holds 6 more
    lines = [call(n, objects(per_line)) for n in range(40)]
    path = tmp_path / "s" / "20260101T000000Z-0001.jsonl"
    size = write(path, [START, USER, *lines, END])
    with measure("session costs", "40 tool calls of 100,000 objects each") as row:
        with caplog.at_level(logging.WARNING, "agentfsm.sessions"):
            log = read_session(path)
            listed, _ = commands(path.parent, capsys)
        row.outcome = f"{log.runs[0].turns} kept"
    kept = log.runs[0].turns
    assert kept == MAX_SESSION_CONTAINERS // MAX_JSON_CONTAINERS  # then the budget is spent
    assert log.runs[0].stopped_reason == "final"  # small records still read
    assert any(f"skipped {40 - kept} unreadable" in r.getMessage() for r in caplog.records)
    assert json.loads(listed)[0]["turns"] == kept
    print(
        f"\n40 lines of {per_line} objects: {size:.0f} MiB; {kept} kept; read, listed and "
        f"traced in {row.seconds:.1f} s, peak RSS {row.peak_rss_mb:.0f} MiB"
    )


def test_a_chain_shares_one_budget(tmp_path: Path) -> None:
    """Three files of 1.5 million objects each: the chain reads what one file may."""
    folder = tmp_path / "s"
    previous = None
    per_line = MAX_JSON_CONTAINERS - 10
    for number in range(3):
        start = {"event": "run_start"}
        if previous is not None:
            start["resumed_from"] = {"id": previous}  # type: ignore[assignment]
        name = f"2026010{number}T000000Z-0001"
        lines = [json.dumps({"kind": "meta", "meta": start}), USER]
        lines += [call(n, objects(per_line)) for n in range(15)]
        write(folder / f"{name}.jsonl", [*lines, END])
        previous = name
    with measure("session costs", "a chain of 3 files of 1.5 million objects") as row:
        chain = read_session_chain(folder / f"{previous}.jsonl")
        row.outcome = f"{len(chain)} files read"
    kept = sum(run.turns for log in chain for run in log.runs)
    assert kept <= MAX_SESSION_CONTAINERS // MAX_JSON_CONTAINERS
    print(f"\nchain: {len(chain)} files, {kept} records kept, peak RSS {row.peak_rss_mb:.0f} MiB")


def test_sessions_list_reads_the_head_of_a_large_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "y" * (1024 * 1024)
    reply = json.dumps({"kind": "message", "message": {"role": "assistant", "content": text}})
    count = LIST_READ_BYTES // len(reply) + 8
    path = tmp_path / "s" / "20260101T000000Z-0001.jsonl"
    size = write(path, [START, USER, *[reply] * count, END])
    with measure("session costs", f"sessions list of a {size:.0f} MiB file") as row:
        assert main(["sessions", "list", "--json", "--session-dir", str(path.parent)]) == 0
        listed = json.loads(capsys.readouterr().out)[0]
        assert main(["sessions", "list", "--session-dir", str(path.parent)]) == 0
        table = capsys.readouterr().out
        row.outcome = f"{listed['turns']} of {count} turns read"
    assert listed["complete"] is False
    assert listed["prompt"] == "first ask"
    assert listed["last_stop"] is None  # not read: not claimed
    assert 0 < listed["turns"] < count
    assert "last=?" in table
    assert "only its first 64 MiB read" in table
    assert read_session(path).runs[0].turns == count  # trace reads it all
    print(f"\nsessions list of {size:.0f} MiB: {row.seconds:.1f} s, read {listed['turns']} turns")
