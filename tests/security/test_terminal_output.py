"""Hostile text printed by the real ``agentfsm`` command: model text (streamed and split
across pieces), reasoning, tool output and arguments, provider errors, last words, the quiet
answer, JSON lines, ``sessions show``, ``sessions list`` and ``trace``. No escape sequence,
C1 control, other C0 control than newline and tab, or raw bidi control reaches the output.

Each form carries a marker ``⟦P3⟧`` (surface letter, form number): what follows a marker up
to the next one is what the terminal got of that form.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentfsm.adapters.sessions import default_session_dir
from agentfsm.conformance._frames import DONE, chunk, tool_delta
from agentfsm.testing import FakeProviderServer, Reply

from ..cli.conftest import sandbox_options
from .commands import run_argv
from .tally import AttackTally

FORMS = [
    "\x1b]52;c;cm0gLXJmIH4vCg==\x07",  # OSC 52: write the clipboard
    "\x1b]0;pwned\x07",  # OSC 0: the window title
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",  # OSC 8: a hidden link
    "\x1b[2J\x1b[H",  # clear the screen, cursor home
    "\x1b[1A\x1b[2K  stopped: final",  # rewrite the summary line above
    "all good\rrm -rf ~",  # carriage return: overwrite the line
    "\x9b2J",  # the 8-bit CSI
    "\x9d0;pwned\x9c",  # the 8-bit OSC and ST
    "\x1bPq#0;2;0;0;0#0~~\x1b\\",  # DCS (sixel)
    "\x1b_Gf=100;AAAA\x1b\\",  # APC (kitty graphics)
    "\x1bc",  # full reset
    "\u202eevil\u202c",  # bidi override
    "\x07\x08\x08\x7f",  # bell, backspaces, DEL
]
UNTERMINATED = "\x1b]52;c;never-ended"
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SEGMENT = re.compile("⟦([A-Z])(\\d+)⟧([^⟦\n]*)")
SANDBOX = sandbox_options()


def hostile(surface: str, forms: list[str] = FORMS) -> str:
    return "".join(f"⟦{surface}{i}⟧ {form} " for i, form in enumerate(forms))


def pieces(text: str, size: int = 3) -> Iterator[str]:
    """``text`` in pieces of ``size`` characters: every sequence is split across deltas."""
    for start in range(0, len(text), size):
        yield text[start : start + size]


def tally(attacks: AttackTally, surface: str, letter: str, output: str, count: int) -> None:
    """Record one attack per form shown on ``surface``; every form must have been shown."""
    seen: dict[int, bool] = {}
    for match in SEGMENT.finditer(output):
        if match.group(1) == letter:
            number = int(match.group(2))
            seen[number] = seen.get(number, False) or bool(FORBIDDEN.search(match.group(3)))
    assert sorted(seen) == list(range(count)), f"{surface}: forms shown {sorted(seen)}"
    for number, escaped in sorted(seen.items()):
        attacks.record("terminal", escaped, f"{surface}: {FORMS[number]!r}")


def agentfsm(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "1000"}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "agentfsm", *argv],
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="surrogateescape",
        timeout=120,
        cwd=tmp_path,
        env=env,
    )


def look(workspace: Path, server: FakeProviderServer, *extra: str) -> list[str]:
    return run_argv("look", workspace, server, *SANDBOX, *extra)


def streamed(text: str, key: str = "content") -> list[str]:
    return [chunk({key: piece}) for piece in pieces(text)]


def finish(text: str) -> Reply:
    return Reply.sse([*streamed(text), chunk({}, finish="stop"), DONE])


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = tmp_path / "project"
    root.mkdir()
    for i, form in enumerate(FORMS):
        (root / f"t{i}.txt").write_text(f"⟦O{i}⟧ {form}\n", "utf-8")
    return root


def tool_turn() -> Reply:
    """Reasoning and text streamed in 3-character pieces, then one call per form reading a
    hostile file, and one per form whose argument is hostile."""
    frames = [*streamed(hostile("R"), "reasoning_content"), *streamed(hostile("S"))]
    for i in range(len(FORMS)):
        arguments = json.dumps({"path": f"t{i}.txt"})
        frames.append(chunk(tool_delta(index=i, id=f"o{i}", name="read_file", arguments=arguments)))
    for i, form in enumerate(FORMS):
        arguments = json.dumps({"path": f"⟦A{i}⟧ {form}"})
        index = len(FORMS) + i
        frames.append(
            chunk(tool_delta(index=index, id=f"a{i}", name="read_file", arguments=arguments))
        )
    return Reply.sse([*frames, chunk({}, finish="tool_calls"), DONE])


def test_agentfsm_run_prints_no_terminal_sequence(
    tmp_path: Path, workspace: Path, attacks: AttackTally
) -> None:
    with FakeProviderServer() as server:
        server.enqueue(tool_turn(), finish(hostile("F") + "⟦Z0⟧ " + UNTERMINATED))
        done = agentfsm(tmp_path, *look(workspace, server))
    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr
    tally(attacks, "run: reasoning streamed", "R", output, len(FORMS))
    tally(attacks, "run: text streamed in pieces", "S", output, len(FORMS))
    tally(attacks, "run: tool output", "O", output, len(FORMS))
    tally(attacks, "run: tool arguments and errors", "A", output, len(FORMS))
    tally(attacks, "run: final answer streamed", "F", output, len(FORMS))
    assert "never-ended" not in output  # an open sequence ends with its message
    assert re.search("^stopped +final", done.stdout, re.MULTILINE)  # the real summary
    assert not FORBIDDEN.search(output)

    shown = agentfsm(tmp_path, "sessions", "show", "latest", "--workspace", str(workspace))
    assert shown.returncode == 0, shown.stderr
    for letter, surface in (("S", "text"), ("O", "tool output"), ("A", "tool arguments")):
        tally(attacks, f"sessions show: {surface}", letter, shown.stdout, len(FORMS))
    tally(attacks, "sessions show: final answer", "F", shown.stdout, len(FORMS))
    assert not FORBIDDEN.search(shown.stdout + shown.stderr)


def test_quiet_json_errors_and_last_words(
    tmp_path: Path, workspace: Path, attacks: AttackTally
) -> None:
    with FakeProviderServer() as server:
        server.enqueue(finish(hostile("Q")))
        quiet = agentfsm(tmp_path, *look(workspace, server, "--quiet"))
        server.enqueue(finish(hostile("J")))
        as_json = agentfsm(tmp_path, *look(workspace, server, "--json"))
        server.enqueue(Reply.json({"error": {"message": hostile("E")}}, 400))
        failed = agentfsm(tmp_path, *look(workspace, server))
        capped = Reply.sse(
            [
                *streamed(hostile("L")),
                chunk(tool_delta(index=0, id="c", name="list_dir", arguments="{}")),
                chunk({}, finish="tool_calls"),
                DONE,
            ]
        )
        server.enqueue(capped)
        budget = agentfsm(tmp_path, *look(workspace, server, "--max-turns", "1"))
    assert (quiet.returncode, as_json.returncode, failed.returncode) == (0, 0, 1)
    assert budget.returncode == 3, budget.stderr
    tally(attacks, "run --quiet: the answer", "Q", quiet.stdout, len(FORMS))
    tally(attacks, "run --json", "J", as_json.stdout, len(FORMS))
    assert all(json.loads(line) for line in as_json.stdout.splitlines())
    tally(attacks, "run: a provider's error", "E", failed.stdout + failed.stderr, len(FORMS))
    tally(attacks, "run: last words of a capped run", "L", budget.stdout, len(FORMS))
    for done in (quiet, as_json, failed, budget):
        assert not FORBIDDEN.search(done.stdout + done.stderr)


def record(kind: str, **fields: Any) -> str:
    return json.dumps({"kind": kind, "ts": "2026-01-01T00:00:00Z", **fields}) + "\n"


def test_sessions_list_and_trace_of_hostile_files(
    tmp_path: Path, workspace: Path, attacks: AttackTally
) -> None:
    """Session files written by someone else: their names and recorded strings."""
    folder = default_session_dir(workspace)
    folder.mkdir(parents=True)
    lines = []
    for i, form in enumerate(FORMS):
        mark = f"⟦G{i}⟧ {form}"
        lines += [
            record(
                "meta",
                meta={
                    "event": "run_start",
                    "resumed_from": {"id": mark},
                    "sandbox": {"mechanism": mark, "version": mark, "network": False},
                },
            ),
            record(
                "message",
                message={
                    "role": "assistant",
                    "content": mark,
                    "tool_calls": [{"id": "c", "name": mark, "arguments": {}}],
                },
            ),
            record("meta", meta={"event": "policy_note", "policy": mark, "reason": mark}),
            record("meta", meta={"event": "policy_stop", "policy": mark, "reason": mark}),
            record(
                "meta",
                meta={
                    "event": "run_end",
                    "stopped_reason": mark,
                    "error": {"name": mark, "kind": mark, "message": mark},
                },
            ),
        ]
        name = f"⟦N{i}⟧ {form}".replace("/", "_")
        listed = record("meta", meta={"event": "run_start", "resumed_from": {"id": name}})
        (folder / f"{name}.jsonl").write_text(listed, "utf-8")
    (folder / "zz-hostile.jsonl").write_text("".join(lines), "utf-8")
    later = time.time() + 5  # the latest (within the slack a future date is given)
    os.utime(folder / "zz-hostile.jsonl", (later, later))

    listed_out = agentfsm(tmp_path, "sessions", "list", "--workspace", str(workspace))
    assert listed_out.returncode == 0, listed_out.stderr
    tally(attacks, "sessions list: names and ids", "N", listed_out.stdout, len(FORMS))
    traced = agentfsm(tmp_path, "trace", "zz-hostile", "--workspace", str(workspace))
    assert traced.returncode == 0, traced.stderr
    tally(attacks, "trace: recorded strings", "G", traced.stdout, len(FORMS))
    for done in (listed_out, traced):
        assert not FORBIDDEN.search(done.stdout + done.stderr)
    as_json = agentfsm(tmp_path, "trace", "zz-hostile", "--json", "--workspace", str(workspace))
    assert as_json.returncode == 0
    assert not FORBIDDEN.search(as_json.stdout)  # ESC included
