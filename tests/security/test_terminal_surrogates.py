"""Lone surrogates smuggling terminal sequences past the sanitizer.

Under ``LC_ALL=C.UTF-8``, ``LC_ALL=C`` or ``PYTHONUTF8=1`` Python's stdout uses the
``surrogateescape`` error handler: it writes each of U+DC80 to U+DCFF as the raw byte it
stands for, so a row of them spells any UTF-8 character, a C1 CSI (``c2 9b``) or a
bidirectional override (``e2 80 ae``) included. A session file (``sessions show|list``,
``trace``) or a provider (``agentfsm run``, ``--quiet``) hands such text to the real command;
the bytes it writes must be valid UTF-8 holding no control a terminal acts on.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentfsm.adapters.sessions import default_session_dir
from agentfsm.conformance._frames import DONE, chunk
from agentfsm.testing import FakeProviderServer, Reply

from ..cli.conftest import sandbox_options
from .commands import run_argv
from .tally import AttackTally

FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
HIDDEN = [
    "\u009b2J",  # 8-bit CSI: clear the screen
    "\u202eevil",  # right-to-left override
    "\u009d0;pwned\u009c",  # 8-bit OSC: the window title
    "\x1b[2J",  # 7-bit CSI (ASCII: never smuggled, sent as is)
    "\u2066x\u2069",  # isolates
]
LOCALES = {
    "LC_ALL=C.UTF-8": {"LC_ALL": "C.UTF-8"},
    "LC_ALL=C": {"LC_ALL": "C"},
    "PYTHONUTF8=1": {"PYTHONUTF8": "1"},
}


def smuggle(text: str) -> str:
    """``text``'s UTF-8 bytes, each non-ASCII one as the lone surrogate that
    ``surrogateescape`` writes back as that byte."""
    return "".join(chr(0xDC00 + b) if b >= 0x80 else chr(b) for b in text.encode())


PAYLOADS = [f"X{i}<" + smuggle(form) + ">" for i, form in enumerate(HIDDEN)]


def agentfsm(
    cwd: Path, env_extra: dict[str, str], *argv: str
) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "LANG"))}
    env.pop("PYTHONUTF8", None)
    env.pop("OPENAI_API_KEY", None)
    env.update(env_extra, COLUMNS="1000")
    return subprocess.run(
        [sys.executable, "-m", "agentfsm", *argv],
        capture_output=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


def judge(attacks: AttackTally, surface: str, output: bytes) -> None:
    """One attack per payload: the output must decode as strict UTF-8 and, decoded, hold no
    control; every payload's marker must have been shown."""
    try:
        text = output.decode("utf-8")
    except UnicodeDecodeError as error:
        text = output.decode("utf-8", "replace")
        broken = f"invalid UTF-8 at {error.start}: {output[error.start - 10 : error.start + 10]!r}"
    else:
        broken = ""
    for i in range(len(PAYLOADS)):
        mark = f"X{i}<"
        assert mark in text, f"{surface}: payload {i} not shown: {text[:400]!r}"
        shown = text[text.index(mark) : text.index(mark) + 200]
        shown = shown[: shown.index(">") + 1] if ">" in shown else shown
        escaped = bool(broken) or bool(FORBIDDEN.search(shown))
        attacks.record("terminal: smuggled surrogates", escaped, f"{surface} {broken}{shown!r}")
    assert not broken, f"{surface}: {broken}"
    assert not FORBIDDEN.search(text), surface


def _record(kind: str, **fields: object) -> str:
    return json.dumps({"kind": kind, "ts": "2026-01-01T00:00:00Z", **fields}) + "\n"


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = tmp_path / "project"
    root.mkdir()
    return root


def test_session_commands_escape_smuggled_surrogates(
    tmp_path: Path, workspace: Path, attacks: AttackTally
) -> None:
    folder = default_session_dir(workspace)
    folder.mkdir(parents=True)
    text = " ".join(PAYLOADS)
    lines = [
        _record("meta", meta={"event": "run_start", "resumed_from": {"id": text}}),
        _record("message", message={"role": "user", "content": text}),
        _record(
            "message",
            message={
                "role": "assistant",
                "content": text,
                "tool_calls": [{"id": "c1", "name": text, "arguments": {"p": text}}],
            },
        ),
        _record("meta", meta={"event": "tool_call_start", "call_id": "c1", "turn": 1}),
        _record("message", message={"role": "tool", "tool_call_id": "c1", "content": text}),
        _record("meta", meta={"event": "policy_note", "policy": text, "reason": text}),
        _record("meta", meta={"event": "policy_stop", "policy": text, "reason": text}),
        _record("meta", meta={"event": "run_end", "stopped_reason": "policy"}),
    ]
    (folder / "20260101T000000Z-0001.jsonl").write_text("".join(lines), "utf-8")
    where = ["--workspace", str(workspace)]
    for name, env in LOCALES.items():
        for argv in (["sessions", "show", "latest"], ["sessions", "list"], ["trace", "latest"]):
            done = agentfsm(tmp_path, env, *argv, *where)
            assert done.returncode == 0, done.stderr
            judge(attacks, f"{' '.join(argv)} under {name}", done.stdout + done.stderr)


def test_run_output_escapes_smuggled_surrogates(
    tmp_path: Path, workspace: Path, attacks: AttackTally
) -> None:
    text = " ".join(PAYLOADS)

    def reply() -> Reply:  # streamed three characters a piece
        pieces = [text[i : i + 3] for i in range(0, len(text), 3)]
        frames = [chunk({"content": piece}) for piece in pieces]
        return Reply.sse([*frames, chunk({}, finish="stop"), DONE])

    with FakeProviderServer() as server:
        for name, env in LOCALES.items():
            for extra in ([], ["--quiet"]):
                server.enqueue(reply())
                argv = run_argv("look", workspace, server, *sandbox_options(), *extra)
                done = agentfsm(tmp_path, env, *argv)
                assert done.returncode == 0, done.stderr
                surface = f"run {' '.join(extra) or '(live)'} under {name}"
                judge(attacks, surface, done.stdout + done.stderr)
