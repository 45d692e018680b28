"""What ``agentfsm sessions list|show``, ``trace`` and ``trace --html`` print, read from real
session files through the real ``agentfsm`` command (a process): malformed records are read
past, an unreadable file or a bad option is one line with exit code 2, failed tool results
and the verifier's PARTIAL read as sentences."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from agentfsm import ChatResult, Message
from agentfsm.adapters.providers import ProviderError
from agentfsm.adapters.sessions import default_session_dir, read_session
from agentfsm.conformance._frames import DONE, chunk, tool_delta
from agentfsm.testing import FakeProviderServer, Reply, ScriptedChat

from ..run_sessions import tool_run
from ..security.commands import provider_options
from .conftest import sandbox_options

FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""What must never reach a terminal (see docs/security.md#the-terminal)."""


def agentfsm(cwd: Path, *argv: str, **environ: str) -> subprocess.CompletedProcess[str]:
    """The console script, as a user starts it (``environ``: more variables)."""
    script = Path(sys.executable).with_name("agentfsm")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(COLUMNS="1000", **environ)  # COLUMNS: no line wrapped
    return subprocess.run(
        [str(script), *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="surrogateescape",
        timeout=120,
    )


def one_line_error(done: subprocess.CompletedProcess[str], prefix: str) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(prefix), lines[0]
    return lines[0]


def record(kind: str, payload: object) -> str:
    return json.dumps({"ts": "2026-01-01T00:00:00.000Z", "kind": kind, kind: payload}) + "\n"


def test_a_meta_record_of_any_shape_is_read_past_by_every_command(tmp_path: Path) -> None:
    """The format allows any metadata: an event that is a list (this made ``trace --html``
    end in a traceback), a meta that is a list, a number or null."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "20260101T000000000000Z-0001.jsonl").write_text(
        record("meta", {"event": ["run_start"], "turn": {"a": 1}})
        + record("meta", ["a", "list"])
        + record("meta", None)
        + record("meta", {"event": "run_start", "seeded": 0})
        + record("message", {"role": "user", "content": "count the words"})
        + record("meta", {"event": {"policy_warn": 1}, "code": [1]})
        + record("message", {"role": "assistant", "content": "two words"})
        + record("meta", {"event": 7})
        + record("meta", {"event": "run_end", "stopped_reason": "final", "usage": {}}),
        "utf-8",
    )
    where = ["--session-dir", str(folder)]
    page = tmp_path / "run.html"
    drawn = agentfsm(tmp_path, "trace", "latest", "--html", str(page), *where)
    assert drawn.returncode == 0, drawn.stderr
    assert "Traceback" not in drawn.stderr
    assert "two words" in page.read_text("utf-8")
    traced = agentfsm(tmp_path, "trace", "latest", "--json", *where)
    assert traced.returncode == 0, traced.stderr
    [run] = json.loads(traced.stdout)["runs"]
    assert (run["turns"], run["stopped_reason"], run["health_warnings"]) == (1, "final", {})
    for argv in (["sessions", "list"], ["sessions", "show", "latest"], ["trace", "latest"]):
        done = agentfsm(tmp_path, *argv, *where)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
    assert (
        "[assistant] two words" in agentfsm(tmp_path, "sessions", "show", "latest", *where).stdout
    )


def test_an_unreadable_session_is_one_line_and_exit_2_for_every_command(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    big = folder / "20260101T000000000000Z-0001.jsonl"
    with big.open("wb") as file:
        file.truncate(512 * 1024 * 1024 + 1)  # sparse: over the bound, no disk used
    where = ["--session-dir", str(folder)]
    workspace = tmp_path / "project"
    workspace.mkdir()
    for argv, prefix in (
        (["trace", big.stem, "--html", str(tmp_path / "x.html")], "agentfsm trace: "),
        (["trace", big.stem], "agentfsm trace: "),
        (["trace", big.stem, "--json"], "agentfsm trace: "),
        (["sessions", "show", big.stem], "agentfsm sessions show: "),
        (["run", "go on", "--resume", big.stem, "--workspace", str(workspace)], "agentfsm run: "),
    ):
        line = one_line_error(agentfsm(tmp_path, *argv, *where), prefix)
        assert "larger than 512 MiB" in line
    assert not (tmp_path / "x.html").exists()
    listed = agentfsm(tmp_path, "sessions", "list", *where)
    assert listed.returncode == 0
    assert listed.stdout.split() == [big.stem, "unreadable:", *line.split(": ", 1)[1].split()]


def test_an_empty_html_file_name_is_a_usage_error(tmp_path: Path) -> None:
    """``--html ''`` used to print the text trace and write nothing, silently."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "20260101T000000000000Z-0001.jsonl").write_text(
        record("meta", {"event": "run_start"}), "utf-8"
    )
    where = ["--session-dir", str(folder)]
    line = one_line_error(agentfsm(tmp_path, "trace", "latest", "--html", "", *where), "")
    assert line == "agentfsm trace: argument --html: needs a file name (see agentfsm trace -h)"
    line = one_line_error(agentfsm(tmp_path, "run", "hi", "--html", " ", *where), "")
    assert line == "agentfsm run: argument --html: needs a file name (see agentfsm run -h)"
    assert os.listdir(tmp_path) == ["sessions"]


def test_conformance_usage_errors_are_one_line(tmp_path: Path) -> None:
    """``replay-vcr``'s took four lines (argparse's usage, then the error)."""
    for argv, prefix in (
        (["replay-vcr"], "agentfsm conformance replay-vcr: the following arguments are required"),
        (["replay-vcr", str(tmp_path), "--bogus"], "agentfsm conformance replay-vcr: unrecognized"),
        (["replay-vcr", str(tmp_path), "--json", ""], "agentfsm conformance replay-vcr: argument"),
        (["matrix"], "agentfsm conformance matrix: the following arguments are required"),
        (["probe"], "agentfsm conformance probe: the following arguments are required"),
        (["corpus", "--bogus"], "agentfsm conformance corpus: unrecognized"),
        ([], "agentfsm conformance: the following arguments are required"),
    ):
        one_line_error(agentfsm(tmp_path, "conformance", *argv), prefix)


def cells(text: str) -> int:
    """Terminal columns, counted independently of the command's own helper."""
    return sum(
        0
        if unicodedata.combining(c) or unicodedata.category(c) == "Cf"
        else 2
        if unicodedata.east_asian_width(c) in "WF"
        else 1
        for c in text
    )


def prompt_column(line: str) -> int:
    """Where the sixth column (what the session was asked) starts."""
    found = re.match(r"(\S+ +){5}", line)
    assert found is not None, line
    return found.end()


async def test_sessions_list_tells_sessions_apart(tmp_path: Path) -> None:
    """Each row shows what the session was first asked and why its last run stopped, in
    columns that stay aligned whatever the prompts hold."""
    folder = tmp_path / "sessions"
    prompts = {
        "plain": "count the words",
        "wide": "日本語のとても長い質問です。" * 5,
        "hostile": "\x1b]0;title\x07\x1b[2Jfix\u202e it\nplease\tnow",
        "combining": "e\u0301" * 60,
    }
    for prompt in prompts.values():
        await tool_run(folder, prompt=prompt)

    async def refused(messages: Sequence[Message], tools: object, **options: object) -> ChatResult:
        raise ProviderError("auth", "invalid API key")

    from agentfsm import Agent

    with contextlib.suppress(ProviderError):
        await Agent(refused, session_dir=folder).run("deploy the site")
    done = agentfsm(tmp_path, "sessions", "list", "--session-dir", str(folder))
    assert done.returncode == 0, done.stderr
    assert not FORBIDDEN.search(done.stdout)
    lines = done.stdout.splitlines()
    assert len(lines) == 5
    failed, *rest = lines
    assert "last=failed" in failed
    assert "deploy the site" in failed
    assert failed.rstrip().endswith("ProviderError (auth): auth: invalid API key")
    assert any("count the words" in line for line in rest)
    assert any("<U+202E>" in line and "fix" in line and "please now" in line for line in rest)
    # every column starts at the same terminal column on every row
    for column in ("runs=", "turns=", "tool_calls=", "last="):
        assert len({cells(line[: line.index(column)]) for line in lines}) == 1, column
    assert len({cells(line[: prompt_column(line)]) for line in lines}) == 1
    assert max(cells(line) for line in rest) < 200  # a long prompt is cut with …
    assert any("…" in line for line in rest)
    # a terminal that takes ASCII only: the same columns, what it cannot show escaped
    ascii = agentfsm(
        tmp_path, "sessions", "list", "--session-dir", str(folder), PYTHONIOENCODING="ascii"
    )
    assert ascii.returncode == 0, ascii.stderr
    assert ascii.stdout.isascii()
    assert "\\u65e5" in ascii.stdout  # 日
    ascii_lines = ascii.stdout.splitlines()
    assert len({line.index("last=") for line in ascii_lines}) == 1
    assert len({prompt_column(line) for line in ascii_lines}) == 1
    listed = agentfsm(tmp_path, "sessions", "list", "--json", "--session-dir", str(folder))
    rows = json.loads(listed.stdout)
    assert [row["prompt"] for row in rows] == ["deploy the site", *reversed(prompts.values())]
    assert rows[0]["reason"] == "ProviderError (auth): auth: invalid API key"
    assert [row["reason"] for row in rows[1:]] == [None] * 4


async def test_sessions_show_renders_a_failed_tool_result(tmp_path: Path) -> None:
    path = await tool_run(tmp_path / "sessions")
    [shell] = [m for m in read_session(path).messages if getattr(m, "tool_call_id", "") == "c2"]
    assert shell.content == '{"ok":false,"output":"","error":"exit 1"}'  # as recorded
    done = agentfsm(tmp_path, "sessions", "show", "latest", "--session-dir", str(path.parent))
    assert done.returncode == 0, done.stderr
    assert "[tool shell c2 FAILED] exit 1" in done.stdout.splitlines()
    assert "[tool read c3] hello world" in done.stdout.splitlines()
    assert '"ok":false' not in done.stdout


def test_a_partial_verdict_says_why_in_the_output_the_session_and_the_trace(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()

    def said(text: str) -> Reply:
        return Reply.sse([chunk({"content": text}), chunk({}, finish="stop"), DONE])

    write = json.dumps({"path": "out.txt", "content": "ok\n"})
    with FakeProviderServer() as server:
        server.enqueue(
            Reply.sse(
                [
                    chunk(tool_delta(index=0, id="w", name="write_file", arguments=write)),
                    chunk({}, finish="tool_calls"),
                    DONE,
                ]
            ),
            said("Wrote out.txt."),
            said("I could not run the tests: no test command.\nVERDICT: PARTIAL"),
        )
        options = provider_options(workspace, server)
        del options[-2:]  # "--preset minimal": the default preset has the verifier
        done = agentfsm(tmp_path, "run", "write ok to out.txt", *options, *sandbox_options())
    assert done.returncode == 0, done.stderr
    why = "VERDICT: PARTIAL (review 1 of at most 3): I could not run the tests: no test command."
    assert f"verifier(max_turns=15): {why}" in done.stdout
    folder = default_session_dir(workspace)
    [path] = folder.glob("*.jsonl")
    [run] = read_session(path).runs
    assert f"verifier(max_turns=15): {why}" in run.notes
    traced = agentfsm(tmp_path, "trace", "latest", "--session-dir", str(folder))
    assert why in traced.stdout


async def test_a_partial_verdict_without_a_verdict_line_says_so(tmp_path: Path) -> None:
    from agentfsm import Agent
    from agentfsm.policies import verifier

    for review, why in (
        ("Looks fine to me.", "no VERDICT line in the reviewer's answer: Looks fine to me."),
        ("", "its answer was empty"),
        ("Could not tell.\nVERDICT: PARTIAL", "Could not tell."),
        ("VERDICT: PARTIAL", "the reviewer gave no reason"),
    ):
        agent = Agent(ScriptedChat(["done", review]), policies=[verifier()], session_dir=tmp_path)
        outcome = await agent.run("do it")
        [run] = read_session(str(outcome.session_path)).runs
        assert run.notes == [
            f"verifier(max_turns=15): VERDICT: PARTIAL (review 1 of at most 3): {why}"
        ]


def test_sessions_show_prints_what_a_resume_sends_after_a_compression(tmp_path: Path) -> None:
    """The second reading: the messages the resumed run really sent to a server."""
    from agentfsm.testing import scenario_handler

    folder = tmp_path / "sessions"
    folder.mkdir()

    def user(text: str) -> str:
        return record("message", {"role": "user", "content": text})

    def reply(text: str) -> str:
        return record("message", {"role": "assistant", "content": text})

    summary = {"role": "user", "content": "[context summary of earlier turns]\nS\n[end summary]"}
    kept = [{"role": "assistant", "content": "answer 5"}, {"role": "user", "content": "ask 6"}]
    lines = [record("meta", {"event": "run_start"}), user("ask 0")]
    for n in range(5):
        lines += [reply(f"answer {n}"), user(f"ask {n + 1}")]
    lines.append(
        record("meta", {"event": "compress_end", "summary_chars": 1, "history": [summary, *kept]})
    )
    lines += [reply("answer 6"), record("meta", {"event": "run_end", "stopped_reason": "final"})]
    (folder / "20260101T000000Z-0001.jsonl").write_text("".join(lines), "utf-8")
    where = ["--session-dir", str(folder)]
    shown = agentfsm(tmp_path, "sessions", "show", "latest", *where)
    assert shown.returncode == 0, shown.stderr
    with FakeProviderServer() as server:
        server.handler = scenario_handler("echo")
        options = ["--base-url", f"{server.base_url}/v1", "--model", "m", "--quiet"]
        workspace = tmp_path / "w"
        workspace.mkdir()
        resumed = agentfsm(
            tmp_path,
            "run",
            "--resume",
            "20260101T000000Z-0001",
            "next",
            "--workspace",
            str(workspace),
            *where,
            *options,
            *sandbox_options(),
        )
        assert resumed.returncode == 0, resumed.stderr
        sent = server.requests[0].json()["messages"]
    history = [m for m in sent if m["role"] != "system"][:-1]  # less the new prompt
    printed = [
        line for line in shown.stdout.splitlines() if re.match(r"\[(user|assistant)\]", line)
    ]
    assert printed == [f"[{m['role']}] {m['content']}".split("\n")[0] for m in history]
    assert shown.stdout.startswith("(the history was compressed")
    assert "ask 0" not in shown.stdout  # summarized: no longer sent


def test_edge_cases_of_crafted_sessions(tmp_path: Path) -> None:
    """A byte order mark before ``run_start``, a ``policy_stop`` with no policy or reason, a
    number for ``stopped_reason``, a run ending before it started, a bidi override."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    text = (
        "\ufeff"
        + json.dumps({"ts": "9999-01-01T00:00:00Z", "kind": "meta", "meta": {"event": "run_start"}})
        + "\n"
        + record("message", {"role": "user", "content": "before \u202eevil"})
        + record("message", {"role": "assistant", "content": "reply"})
        + record("meta", {"event": "policy_warn", "code": None, "policy": None, "turn": 1})
        + record("meta", {"event": "policy_stop", "policy": None, "reason": None, "turn": 2})
        + json.dumps(
            {
                "ts": "0001-01-01T00:00:00Z",
                "kind": "meta",
                "meta": {"event": "run_end", "stopped_reason": 7},
            }
        )
        + "\n"
    )
    (folder / "20260101T000000Z-0001.jsonl").write_text(text, "utf-8")
    where = ["--session-dir", str(folder)]
    traced = agentfsm(tmp_path, "trace", "latest", *where)
    assert traced.returncode == 0, traced.stderr
    assert "run 1: ended (no reason recorded) after 1 turn(s)\n" in traced.stdout
    assert " in -" not in traced.stdout  # no negative duration
    assert "stopped by an unnamed policy: no reason recorded" in traced.stdout
    assert "health warnings: {'unnamed': 1}" in traced.stdout
    assert "None" not in traced.stdout
    shown = agentfsm(tmp_path, "sessions", "show", "latest", *where)
    assert "[user] before <U+202E>evil" in shown.stdout
    listed = agentfsm(tmp_path, "sessions", "list", "--json", *where)
    (row,) = json.loads(listed.stdout)
    assert (row["prompt"], row["turns"], row["last_ending"]) == (
        "before \u202eevil",
        1,
        "ended (no reason recorded)",
    )
    page = tmp_path / "p.html"
    assert agentfsm(tmp_path, "trace", "latest", "--html", str(page), *where).returncode == 0
    html = page.read_text("utf-8")
    assert "\\u202e" not in html.lower()
    assert "\u202e" not in html
    assert "U+202E" in html


def test_latest_is_the_newest_readable_session(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    lines = (
        record("meta", {"event": "run_start"})
        + record("message", {"role": "user", "content": "mine"})
        + record("message", {"role": "assistant", "content": "ok"})
    )
    mine = folder / "20260101T000000Z-0002.jsonl"
    mine.write_text(lines, "utf-8")
    future = folder / "20260101T000000Z-0003.jsonl"
    future.write_text(lines.replace("mine", "copied"), "utf-8")
    os.utime(future, (4_000_000_000, 4_000_000_000))  # the year 2096
    huge = folder / "20260101T000000Z-0004.jsonl"
    with huge.open("wb") as sparse:
        sparse.truncate(513 * 1024 * 1024)
    traced = agentfsm(tmp_path, "sessions", "show", "latest", "--session-dir", str(folder))
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == "[user] mine\n[assistant] ok\n"
    listed = agentfsm(tmp_path, "sessions", "list", "--json", "--session-dir", str(folder))
    ids = [row["id"] for row in json.loads(listed.stdout)]
    assert ids == [huge.stem, mine.stem, future.stem]  # the future-dated one last


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    lines = [record("meta", {"event": "run_start"})]
    for n in range(5000):
        lines.append(record("message", {"role": "user", "content": f"ask {n}"}))
        lines.append(record("message", {"role": "assistant", "content": f"answer {n}"}))
    (folder / "20260101T000000Z-0001.jsonl").write_text("".join(lines), "utf-8")
    script = Path(sys.executable).with_name("agentfsm")
    for argv in (["trace", "latest"], ["sessions", "show", "latest"]):
        pipeline = f"{script} {' '.join(argv)} --session-dir {folder} | head -1"
        done = subprocess.run(
            ["bash", "-c", pipeline + "; echo rc=${PIPESTATUS[0]}"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.stderr == "", done.stderr
        assert done.stdout.splitlines()[-1] in ("rc=141", "rc=0"), done.stdout


def test_sessions_show_hides_nothing_a_resume_sends(tmp_path: Path) -> None:
    """Checked on the request a resumed run really sends: the recorded system prompt shows
    as replaced (the run sends its own), a later system message as sent, and every text
    ``show`` cuts says how many characters a resume sends beyond what it shows (a planted
    session cannot hide an instruction past the cut)."""
    from agentfsm.testing import scenario_handler

    folder = tmp_path / "sessions"
    folder.mkdir()
    long_user = "u" * 2500 + " HIDDEN-USER-TAIL"
    long_output = "o" * 700 + " HIDDEN-TOOL-TAIL"
    call = {"id": "c1", "name": "read_file", "arguments": {"path": "a"}}
    image = {"media_type": "image/png", "data": "iVBORw0KGgo="}
    messages = [
        {"role": "system", "content": "RECORDED SYSTEM PROMPT"},
        {"role": "user", "content": long_user, "images": [image]},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": long_output},
        {"role": "system", "content": "A LATER SYSTEM MESSAGE"},
        {"role": "assistant", "content": "done"},
    ]
    lines = [record("meta", {"event": "run_start", "seeded": 1})]
    lines += [record("message", message) for message in messages]
    lines.append(record("meta", {"event": "run_end", "stopped_reason": "final"}))
    (folder / "20260101T000000Z-0001.jsonl").write_text("".join(lines), "utf-8")
    where = ["--session-dir", str(folder)]
    shown = agentfsm(tmp_path, "sessions", "show", "latest", *where)
    assert shown.returncode == 0, shown.stderr
    workspace = tmp_path / "w"
    workspace.mkdir()
    with FakeProviderServer() as server:
        server.handler = scenario_handler("echo")
        options = ["--base-url", f"{server.base_url}/v1", "--model", "m", "--quiet"]
        resumed = agentfsm(
            tmp_path, "run", "--resume", "latest", "next", "--workspace", str(workspace),
            *where, *options, *sandbox_options(),
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        sent = json.loads(server.requests[0].body)["messages"]
    assert "RECORDED SYSTEM PROMPT" not in json.dumps(sent)
    assert sent[0]["role"] == "system"
    assert "[system, replaced by the resuming run's own] RECORDED SYSTEM PROMPT" in shown.stdout
    assert {"role": "system", "content": "A LATER SYSTEM MESSAGE"} in sent
    assert "[system] A LATER SYSTEM MESSAGE" in shown.stdout
    user = next(m for m in sent if m["role"] == "user" and isinstance(m["content"], list))
    text = next(part["text"] for part in user["content"] if part["type"] == "text")
    assert text == long_user
    assert sum(part["type"] == "image_url" for part in user["content"]) == 1
    assert f"[... {len(long_user) - 2000} more characters not shown] [+1 image(s)]" in shown.stdout
    tool = next(m for m in sent if m["role"] == "tool")
    assert tool["content"] == long_output
    assert f"[... {len(long_output) - 500} more characters not shown]" in shown.stdout
