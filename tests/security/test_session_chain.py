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
