"""A run's HTML picture, read from real session files of scripted runs: the path each turn
took, the timeline across resumes, the page's safety properties and the CLI commands that
write it (the browser's view of it is in test_run_html_browser.py)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from agentfsm import (
    Agent,
    AssistantMessage,
    ChatResult,
    Remind,
    Retry,
    Stop,
    ToolCall,
    Usage,
    Warn,
    render_run,
)
from agentfsm.adapters.providers import ProviderError
from agentfsm.adapters.sessions import SessionStore, default_session_dir, read_session_chain
from agentfsm.cli import main
from agentfsm.cli._run_html import CSP
from agentfsm.cli._run_svg import machine_edges
from agentfsm.cli._run_view import read_run_view
from agentfsm.engine._context import RunContext
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from ..run_sessions import HOSTILE, long_run, tool_run
from .conftest import sandbox_options


def view_of(path: Path) -> dict[str, Any]:
    view = read_run_view(path)
    assert set(view["edges"]) <= set(machine_edges()), "every edge drawn is the machine's"
    return view


def data_block(page: str) -> Any:
    match = re.search(r'<script type="application/json" id="run-data">(.*?)</script>', page, re.S)
    assert match is not None
    return json.loads(match.group(1))


async def test_the_path_of_a_run_with_tools(tmp_path: Path) -> None:
    view = view_of(await tool_run(tmp_path))
    paths = [turn["path"] for turn in view["turns"]]
    head = ["turn_start>compress_check", "compress_check>llm_start", "llm_start>llm_end"]
    assert paths == [
        [*head, "llm_end>run_tools", "run_tools>turn_start"],
        [*head, "llm_end>run_tools", "run_tools>turn_start"],
        [*head, "llm_end>final_check", "final_check>final"],
    ]
    assert view["edges"]["run_tools>turn_start"] == 2
    assert view["edges"]["turn_start>compress_check"] == 3
    assert view["end_state"] == "final"
    calls = [[(c["name"], c["status"]) for c in t["tool_calls"]] for t in view["turns"]]
    assert calls == [[("read", "ok")], [("shell", "failed"), ("read", "ok")], []]
    assert [t["usage"]["input_tokens"] for t in view["turns"]] == [120, 200, 260]
    assert all(isinstance(t["ms"], int) and t["ms"] >= 0 for t in view["turns"])
    run = view["runs"][0]
    assert [view["messages"][i]["role"] for i in run["context"]] == ["system"]
    assert [view["messages"][i]["text"] for i in run["input"]] == ["count the words"]


async def test_budget_policy_stop_gate_and_reminders_are_on_their_edges(tmp_path: Path) -> None:
    class Refuse:
        """Refuses the first final answer."""

        refused = False

        def check_final(self, ctx: RunContext) -> Retry | None:
            if self.refused:
                return None
            self.refused = True
            return Retry("run the tests first")

    class Watch:
        """Warns and reminds on turn 2, stops on turn 4."""

        def check_turn(self, ctx: RunContext) -> Any:
            if ctx.turn == 2:
                return [Warn("slow going", code="slow"), Remind("hurry")]
            return Stop("enough") if ctx.turn == 4 else None

    chat = ScriptedChat(["first answer", tool_reply(("read", {})), "second answer", "never"])
    agent = Agent(
        chat,
        ScriptedTools({"read": lambda **_: "x"}),
        policies=[Refuse(), Watch()],
        session_dir=tmp_path,
    )
    outcome = await agent.run("go")
    assert outcome.stopped_reason == "final"  # the gate passed the second answer on turn 3
    view = view_of(Path(str(outcome.session_path)))
    assert view["turns"][0]["path"][-2:] == ["final_check>retry", "retry>turn_start"]
    assert view["verdicts"]["final_check>retry"] == {"refused: Refuse": 1}
    assert view["verdicts"]["turn_start>compress_check"] == {"warn: slow": 1}
    kinds = [[e["kind"] for e in t["events"]] for t in view["turns"]]
    assert kinds[0] == ["gate"]
    assert kinds[1] == ["warning", "reminder"]
    assert view["end_state"] == "final"

    stopped = Agent(
        ScriptedChat([tool_reply(("read", {}))] * 5),
        ScriptedTools({"read": lambda **_: "x"}),
        policies=[Watch()],
        session_dir=tmp_path,
    )
    outcome = await stopped.run("go")
    assert outcome.stopped_reason == "policy"
    view = view_of(Path(str(outcome.session_path)))
    assert view["turns"][-1]["path"] == ["turn_start>stopped"]
    assert view["verdicts"]["turn_start>stopped"] == {"stop: Watch": 1}
    assert view["end_state"] == "stopped"

    capped = Agent(
        ScriptedChat([tool_reply(("read", {}))] * 3),
        ScriptedTools({"read": lambda **_: "x"}),
        session_dir=tmp_path,
        max_turns=2,
    )
    outcome = await capped.run("go")
    view = view_of(Path(str(outcome.session_path)))
    assert view["turns"][-1]["path"][-1] == "llm_end>budget"
    assert view["end_state"] == "budget"
    assert [c["status"] for c in view["turns"][-1]["tool_calls"]] == ["skipped"]


async def test_a_failed_and_an_interrupted_run_end_on_the_edge_they_took(tmp_path: Path) -> None:
    failing = Agent(
        ScriptedChat([tool_reply(("read", {})), ProviderError("auth", "bad key")]),
        ScriptedTools({"read": lambda **_: "x"}),
        session_dir=tmp_path,
    )
    with pytest.raises(ProviderError):
        await failing.run("go")
    path = max(tmp_path.glob("*.jsonl"))
    view = view_of(path)
    assert view["runs"][0]["last_state"] == "llm_start"
    assert view["turns"][-1]["path"][-1] == "llm_start>failed"
    assert view["end_state"] == "failed"
    assert "bad key" in view["runs"][0]["error"]
    assert view["turns"][-1]["events"][-1]["kind"] == "stop"
    assert "run failed: ProviderError" in view["turns"][-1]["events"][-1]["text"]

    started = asyncio.Event()

    async def slow(**_: object) -> str:
        started.set()
        await asyncio.sleep(30)
        return "late"

    agent = Agent(
        ScriptedChat([tool_reply(("slow", {}))]),
        ScriptedTools({"slow": slow}),
        session_dir=tmp_path / "cut",
    )
    task = asyncio.create_task(agent.run("go"))
    await started.wait()
    agent.interrupt("test")
    outcome = await task
    assert outcome.stopped_reason == "aborted"
    view = view_of(Path(str(outcome.session_path)))
    assert view["turns"][-1]["path"][-1] == "run_tools>aborted"
    assert [c["status"] for c in view["turns"][-1]["tool_calls"]] == ["cancelled"]
    assert view["end_state"] == "aborted"


def session_chain(path: Path) -> list[Path]:
    return [log.path for log in read_session_chain(path)]


async def test_resumed_sessions_make_one_timeline(tmp_path: Path) -> None:
    first = await tool_run(tmp_path)
    paths = [first]
    for answer in ("second", "third"):
        agent = Agent(ScriptedChat([answer]), session_dir=tmp_path, system_prompt="sys")
        outcome = await agent.run(f"again {answer}", resume=paths[-1].stem)
        paths.append(Path(str(outcome.session_path)))
    assert session_chain(paths[-1]) == paths
    view = view_of(paths[-1])
    assert view["files"] == [p.stem for p in paths]
    assert [(r["index"], r["session"]) for r in view["runs"]] == [
        (1, paths[0].stem),
        (2, paths[1].stem),
        (3, paths[2].stem),
    ]
    assert [r["resumed_from"] for r in view["runs"]] == [None, paths[0].stem, paths[1].stem]
    assert [(t["run"], t["turn"]) for t in view["turns"]] == [
        (1, 1),
        (1, 2),
        (1, 3),
        (2, 1),
        (3, 1),
    ]
    # each message once: the history a resumed run was seeded with is not shown again
    texts = [m["text"] for m in view["messages"] if m["role"] == "user"]
    assert texts == ["count the words", "again second", "again third"]
    assert view["edges"]["final_check>final"] == 3

    # the middle file alone shows the chain up to it
    assert read_run_view(paths[1])["files"] == [p.stem for p in paths[:2]]


async def test_runs_on_one_handle_share_the_file_and_the_timeline(tmp_path: Path) -> None:
    handle = SessionStore(tmp_path).new_handle()
    agent = Agent(ScriptedChat(["one", "two"]), session_dir=tmp_path)
    await agent.run("a", session=handle)
    await agent.run("b", session=handle)
    view = view_of(handle.path)
    assert [(t["run"], t["turn"]) for t in view["turns"]] == [(1, 1), (2, 1)]
    assert [view["messages"][t["reply"]]["text"] for t in view["turns"]] == ["one", "two"]


async def test_a_session_cycle_or_a_missing_parent_ends_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "20260101T000000000000Z-0001.jsonl"
    start = {"event": "run_start", "seeded": 0, "resumed_from": {"id": path.stem}}
    path.write_text(json.dumps({"ts": "x", "kind": "meta", "meta": start}) + "\n", "utf-8")
    assert session_chain(path) == [path]
    other = tmp_path / "20260101T000000000000Z-0002.jsonl"
    start["resumed_from"] = {"id": "../../etc/passwd", "path": "/nonexistent.jsonl"}
    other.write_text(json.dumps({"ts": "x", "kind": "meta", "meta": start}) + "\n", "utf-8")
    assert session_chain(other) == [other]
    assert "<svg" in render_run(other)
    fifo = tmp_path / "20260101T000000000000Z-0003.jsonl"
    os.mkfifo(fifo)
    start["resumed_from"] = {"id": fifo.stem, "path": str(fifo)}
    other.write_text(json.dumps({"ts": "x", "kind": "meta", "meta": start}) + "\n", "utf-8")
    assert session_chain(other) == [other]  # a FIFO is not read (it would block)


async def test_the_page_is_self_contained_and_its_data_cannot_end_the_script(
    tmp_path: Path,
) -> None:
    odd = "\udcff lone \u2028 sep \u2029 " + HOSTILE + " ]]> --> <!-- &amp; </SCRIPT >"
    path = await tool_run(tmp_path, answer=odd, prompt=odd)
    page = render_run(path, out=tmp_path / "run.html")
    assert (tmp_path / "run.html").read_text("utf-8") == page
    page.encode("utf-8")  # no lone surrogate reaches the file
    assert f'content="{CSP}"' in page
    assert "default-src 'none'" in CSP
    block = page.split('id="run-data">', 1)[1].split("</script>", 1)[0]
    assert block.isascii()
    assert not set(block) & set("<>&\u2028\u2029")
    data = data_block(page)
    assert data["messages"][-1]["text"] == odd  # read back exactly, lone surrogate included
    # nothing is fetched: no URL but the SVG namespace
    urls = set(re.findall(r"[a-z]+://[^\s\"')]*", page))
    assert urls <= {"http://www.w3.org/2000/svg"}
    assert re.findall(r"(?:src|href)=\"([^\"]*)\"", page) == ["data:,"]
    assert set(re.findall(r"url\(([^)]*)\)", page)) == {"#arrow", "#arrow-taken"}
    sinks = r"\.(?:inner|outer)HTML|insertAdjacentHTML|document\.write|\beval\(|new Function"
    assert not re.findall(sinks, page)


async def test_a_500_turn_run_renders_small_and_fast(tmp_path: Path) -> None:
    path = await long_run(tmp_path, 500)
    started = time.perf_counter()
    page = render_run(path)
    elapsed = time.perf_counter() - started
    data = data_block(page)
    assert len(data["turns"]) == 500
    assert data["edges"]["run_tools>turn_start"] == 499
    size = len(page.encode("utf-8"))
    session_size = path.stat().st_size
    print(
        f"500 turns: page {size / 1024:.0f} KiB (session {session_size / 1024:.0f} KiB), {elapsed:.2f} s"
    )
    assert size < 1.5 * session_size + 100_000
    assert elapsed < 10


def test_trace_html_writes_the_picture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = asyncio.run(tool_run(tmp_path / "sessions"))
    out = tmp_path / "run.html"
    code = main(["trace", "latest", "--html", str(out), "--session-dir", str(path.parent)])
    assert code == 0
    assert f"wrote {out.resolve()}" in capsys.readouterr().err
    assert data_block(out.read_text("utf-8"))["session"] == path.stem
    code = main(["trace", "nope", "--html", str(out), "--session-dir", str(path.parent)])
    assert code == 2
    assert "agentfsm trace:" in capsys.readouterr().err
    unwritable = tmp_path / "missing" / "run.html"
    code = main(["trace", "latest", "--html", str(unwritable), "--session-dir", str(path.parent)])
    assert code == 2


def test_run_html_puts_the_picture_in_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    out = tmp_path / "picture.html"
    chat = ScriptedChat([tool_reply(("list_dir", {})), "done"])
    argv = ["run", "look", "--workspace", str(workspace), *sandbox_options(), "--html", str(out)]
    assert main(argv, chat=chat) == 0
    printed = capsys.readouterr().out
    assert f"picture: {out.resolve()}" in printed
    session = next(default_session_dir(workspace).glob("*.jsonl"))
    data = data_block(out.read_text("utf-8"))
    assert data["session"] == session.stem
    assert [c["name"] for c in data["turns"][0]["tool_calls"]] == ["list_dir"]

    chat = ScriptedChat(["again"])
    argv = [*argv[:-1], str(tmp_path / "json.html"), "--json", "--resume", "latest"]
    assert main(argv, chat=chat) == 0
    end = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert end["html_path"] == str((tmp_path / "json.html").resolve())
    data = data_block((tmp_path / "json.html").read_text("utf-8"))
    assert len(data["files"]) == 2  # the resumed session's picture shows both runs

    chat = ScriptedChat(["no picture"])
    bad = [*argv[:4], *sandbox_options(), "--html", str(tmp_path / "missing" / "x.html")]
    assert main(bad, chat=chat) == 0  # a picture that cannot be written keeps the exit code
    assert "picture not written" in capsys.readouterr().err


def test_every_human_summary_gives_the_picture_beside_the_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    chat = ScriptedChat([tool_reply(("list_dir", {})), "done"])
    assert main(["run", "look", "--workspace", str(workspace), *sandbox_options()], chat=chat) == 0
    printed = capsys.readouterr().out
    session = next(default_session_dir(workspace).glob("*.jsonl"))
    picture = session.with_suffix(".html").resolve()
    assert f"picture: {picture}" in printed
    assert data_block(picture.read_text("utf-8"))["session"] == session.stem
    assert not any(p.suffix == ".html" for p in workspace.rglob("*"))  # not in the workspace

    chat = ScriptedChat(["quiet"])
    argv = ["run", "x", "--workspace", str(workspace), *sandbox_options(), "--json"]
    assert main(argv, chat=chat) == 0
    end = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert "html_path" not in end  # --json writes a picture only when asked


def test_model_text_in_a_tool_name_or_arguments_stays_data(tmp_path: Path) -> None:
    chat = ScriptedChat(
        [
            ChatResult(
                AssistantMessage(
                    HOSTILE,
                    tool_calls=(ToolCall("c1", HOSTILE, {HOSTILE: HOSTILE}),),
                    reasoning=HOSTILE,
                ),
                Usage(1, 1),
            ),
            "ok",
        ]
    )
    outcome = asyncio.run(Agent(chat, ScriptedTools({}), session_dir=tmp_path).run(HOSTILE))
    page = render_run(str(outcome.session_path))
    assert HOSTILE not in page
    data = data_block(page)
    first = data["turns"][0]
    assert first["tool_calls"][0]["name"] == HOSTILE
    assert data["messages"][first["reply"]]["reasoning"] == HOSTILE


def test_a_bidi_control_in_a_verdict_label_is_shown_not_obeyed(tmp_path: Path) -> None:
    """A policy's code becomes a key of the page's verdicts (the label drawn on the edge):
    a bidirectional control there is written out as in every other string of the page."""
    session = tmp_path / "20260101T000000Z-0001.jsonl"
    records = [
        {"event": "run_start"},
        {"event": "policy_warn", "turn": 1, "policy": "p\u202e", "code": "loop\u202egnp.exe"},
        {"event": "run_end", "stopped_reason": "final"},
    ]
    lines = [json.dumps({"kind": "meta", "meta": records[0]})]
    lines.append(json.dumps({"kind": "message", "message": {"role": "assistant", "content": "a"}}))
    lines += [json.dumps({"kind": "meta", "meta": record}) for record in records[1:]]
    session.write_text("\n".join(lines) + "\n", "utf-8")
    data = data_block(render_run(session))
    assert data["verdicts"] == {"turn_start>compress_check": {"warn: loop<U+202E>gnp.exe": 1}}
    assert not re.search("[\u202a-\u202e\u2066-\u2069]", json.dumps(data, ensure_ascii=False))


def test_the_drawn_path_counts_every_reply_trace_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reply recorded after an aborted run's end (a damaged or crafted file) is a turn for
    ``trace`` and ``sessions list``: the drawing takes its ``llm_start>llm_end`` edge too,
    so its counts agree with theirs."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    session = folder / "20260101T000000Z-0001.jsonl"
    end = {"event": "run_end", "stopped_reason": "aborted", "last_state": "turn_start"}
    reply = {"role": "assistant", "content": "a", "tool_calls": []}
    session.write_text(
        json.dumps({"kind": "meta", "meta": end})
        + "\n"
        + json.dumps({"kind": "message", "message": reply, "turn": 1})
        + "\n",
        "utf-8",
    )
    assert main(["trace", "latest", "--json", "--session-dir", str(folder)]) == 0
    assert [run["turns"] for run in json.loads(capsys.readouterr().out)["runs"]] == [1]
    view = view_of(session)
    assert view["runs"][0]["counts"]["turns"] == 1
    assert view["edges"].get("llm_start>llm_end") == 1
