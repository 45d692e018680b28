"""A resumed session's chain is read by id within its own folder, never by a recorded path.

Each case writes a session whose ``run_start`` names, in ``resumed_from``, a file outside
the session folder that looks like a session and holds a secret: by absolute path, by a
path relative to the current folder, by an id whose file in the folder is a symlink out of
it, by ids with ``..`` or separators. The real ``agentfsm trace --html`` picture, ``trace
--json`` and ``read_session_chain`` must show none of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentfsm.adapters.sessions import read_session_chain

from .tally import AttackTally

KIND = "session chain: a file outside the session folder read"
SECRET = "SECRET-OUTSIDE-THE-FOLDER-5a1f"


def session(resumed: dict[str, str] | None, text: str) -> str:
    start: dict[str, object] = {"event": "run_start"}
    if resumed is not None:
        start["resumed_from"] = resumed
    lines = [
        {"kind": "meta", "ts": "2026-01-01T00:00:00Z", "meta": start},
        {"kind": "message", "message": {"role": "user", "content": text}},
        {"kind": "message", "message": {"role": "assistant", "content": "ok"}},
        {"kind": "meta", "meta": {"event": "run_end", "stopped_reason": "final"}},
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_the_chain_never_leaves_the_session_folder(tmp_path: Path, attacks: AttackTally) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    secret = outside / "secret.jsonl"
    secret.write_text(session(None, SECRET), "utf-8")
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "rel.jsonl").write_text(session(None, SECRET), "utf-8")
    cases = {
        "absolute path": {"id": "nothing-here", "path": str(secret)},
        "absolute path, no id": {"path": str(secret)},
        "relative path (to the current folder)": {"id": "x", "path": "rel.jsonl"},
        "id of a symlink out of the folder": {"id": "linked"},
        "id of a symlink to a folder's file by ..": {"id": "../elsewhere/secret"},
        "id with a separator": {"id": str(secret.with_suffix(""))},
        "id naming the folder's parent": {"id": ".."},
    }
    for number, (name, resumed) in enumerate(cases.items()):
        folder = tmp_path / f"s{number}"
        folder.mkdir()
        (folder / "linked.jsonl").symlink_to(secret)
        own = folder / "20260101T000000Z-0001.jsonl"
        own.write_text(session(resumed, "own"), "utf-8")
        os.utime(folder / "linked.jsonl", (1, 1), follow_symlinks=False)
        picture = tmp_path / f"p{number}.html"
        common = ["--session-dir", str(folder)]
        shown = subprocess.run(
            [sys.executable, "-m", "agentfsm", "trace", own.stem, "--html", str(picture), *common],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path / "cwd",
        )
        assert shown.returncode == 0, shown.stderr
        as_json = subprocess.run(
            [sys.executable, "-m", "agentfsm", "trace", own.stem, "--json", *common],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path / "cwd",
        )
        assert as_json.returncode == 0, as_json.stderr
        chain = read_session_chain(own)
        page = picture.read_text("utf-8")
        read = SECRET in page or SECRET in as_json.stdout or len(chain) != 1
        attacks.record(KIND, read, name)
        assert not read, name


def test_a_chain_in_its_own_folder_is_still_followed(tmp_path: Path) -> None:
    first = tmp_path / "20260101T000000Z-0001.jsonl"
    first.write_text(session(None, "first"), "utf-8")
    second = tmp_path / "20260101T000001Z-0002.jsonl"
    second.write_text(session({"id": first.stem, "path": "/nowhere/x.jsonl"}, "second"), "utf-8")
    assert [log.path for log in read_session_chain(second)] == [first, second]


def test_a_symlink_in_the_session_folder_is_no_session(
    tmp_path: Path, attacks: AttackTally
) -> None:
    """A link planted in the folder, by any reference (``latest``, its id, a prefix), leads
    no command to the file it names: not ``sessions show|list``, ``trace`` or a resume, whose
    request would carry that file's messages to the server (checked on the real bytes)."""
    from agentfsm.testing import FakeProviderServer, scenario_handler

    from ..cli.conftest import sandbox_options

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.jsonl").write_text(session(None, SECRET), "utf-8")
    folder = tmp_path / "sessions"
    folder.mkdir()
    own = folder / "20260101T000000Z-0001.jsonl"
    own.write_text(session(None, "own"), "utf-8")
    os.utime(own, (1, 1))  # the link is the newest
    (folder / "20260102T000000Z-0002.jsonl").symlink_to(outside / "secret.jsonl")
    (tmp_path / "w").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")

    def agentfsm(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentfsm", *argv, "--session-dir", str(folder)],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )

    with FakeProviderServer() as server:
        server.handler = scenario_handler("echo")
        run = ["--base-url", f"{server.base_url}/v1", "--model", "m", "--quiet"]
        run += ["--workspace", str(tmp_path / "w"), *sandbox_options()]
        for ref in ("latest", "20260102T000000Z-0002", "20260102"):
            commands = {
                "sessions show": ["sessions", "show", ref],
                "trace": ["trace", ref, "--json"],
                "run --resume": ["run", "--resume", ref, "next", *run],
            }
            for name, argv in commands.items():
                done = agentfsm(*argv)
                read = SECRET in done.stdout + done.stderr
                attacks.record(KIND, read, f"{name} {ref}")
                assert not read, (name, ref)
                if ref == "latest":  # the folder's own file
                    assert done.returncode == 0, done.stderr
                else:
                    assert done.returncode == 2, done.stderr
                    assert "session not found" in done.stderr
        sent = b"".join(request.body for request in server.requests)
        assert SECRET.encode() not in sent
        assert b'"own"' in sent
    listed = agentfsm("sessions", "list", "--json")
    assert [row["id"] for row in json.loads(listed.stdout)][-1] == own.stem
    assert SECRET not in listed.stdout
