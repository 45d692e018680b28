"""``--html FILE`` is written whole or not at all, and only ever as a file.

The real ``agentfsm trace SESSION --html FILE`` against what FILE may be: a symlink (written
through to its target, the link kept), a dangling symlink, a FIFO, a socket, a folder, a
character device of our own (``mknod``, where permitted): those three are refused in one
line with exit code 2 and left as they were; a missing folder's error names the path given,
never a temporary file.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from .tally import AttackTally

KIND = "--html FILE: something other than a file replaced, or a temporary file named"


def trace_html(cwd: Path, folder: Path, out: Path) -> subprocess.CompletedProcess[str]:
    argv = ["trace", "latest", "--html", str(out), "--session-dir", str(folder)]
    return subprocess.run(
        [sys.executable, "-m", "agentfsm", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def a_session(folder: Path) -> None:
    folder.mkdir()
    lines = [
        {"kind": "meta", "ts": "2026-01-01T00:00:00Z", "meta": {"event": "run_start"}},
        {"kind": "message", "message": {"role": "user", "content": "hi"}},
        {"kind": "message", "message": {"role": "assistant", "content": "hello"}},
        {"kind": "meta", "meta": {"event": "run_end", "stopped_reason": "final"}},
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (folder / "20260101T000000Z-0001.jsonl").write_text(text, "utf-8")


def test_what_the_picture_is_written_over(tmp_path: Path, attacks: AttackTally) -> None:
    folder = tmp_path / "sessions"
    a_session(folder)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def refused(
        kind: Callable[[int], bool],
    ) -> Callable[[Path, subprocess.CompletedProcess[str]], bool]:
        def check(out: Path, done: subprocess.CompletedProcess[str]) -> bool:
            lines = done.stderr.strip().splitlines()
            return (
                done.returncode == 2
                and len(lines) == 1
                and "not a regular file" in lines[0]
                and str(out) in lines[0]
                and ".tmp" not in lines[0]
                and kind(out.lstat().st_mode)
                and not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]
            )

        return check

    def written_through(out: Path, done: subprocess.CompletedProcess[str]) -> bool:
        target = elsewhere / "target.html"
        return (
            done.returncode == 0
            and out.is_symlink()
            and target.read_text("utf-8").startswith("<!DOCTYPE html>")
            and stat.S_IMODE(target.stat().st_mode) == 0o640
        )

    def dangling(out: Path, done: subprocess.CompletedProcess[str]) -> bool:
        made = elsewhere / "made.html"
        return done.returncode == 0 and out.is_symlink() and made.is_file()

    def missing(out: Path, done: subprocess.CompletedProcess[str]) -> bool:
        line = done.stderr.strip()
        return done.returncode == 2 and str(out) in line and ".tmp" not in line

    def replaced(out: Path, done: subprocess.CompletedProcess[str]) -> bool:
        return done.returncode == 0 and out.read_text("utf-8").startswith("<!DOCTYPE html>")

    def make_link(out: Path) -> None:
        target = elsewhere / "target.html"
        target.write_text("old", "utf-8")
        target.chmod(0o640)
        out.symlink_to(target)

    def link_to_fifo(out: Path) -> None:
        os.mkfifo(elsewhere / "fifo")
        out.symlink_to(elsewhere / "fifo")

    sockets: list[socket.socket] = []

    def make_socket(out: Path) -> None:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(out))
        sockets.append(server)

    cases: dict[str, tuple[Callable[[Path], object], Callable[..., bool]]] = {
        "a symlink to a file elsewhere": (make_link, written_through),
        "a dangling symlink": (lambda out: out.symlink_to(elsewhere / "made.html"), dangling),
        "a FIFO": (lambda out: os.mkfifo(out), refused(stat.S_ISFIFO)),
        "a socket": (make_socket, refused(stat.S_ISSOCK)),
        "a folder": (lambda out: out.mkdir(), refused(stat.S_ISDIR)),
        "a symlink to a FIFO": (
            link_to_fifo,
            lambda out, done: (
                refused(stat.S_ISLNK)(out, done)
                and stat.S_ISFIFO((elsewhere / "fifo").lstat().st_mode)
            ),
        ),
        "a regular file": (lambda out: out.write_text("old", "utf-8"), replaced),
    }
    try:
        os.mknod(tmp_path / "probe", stat.S_IFCHR | 0o666, os.makedev(1, 7))  # like /dev/full
    except OSError:
        print("character device case not run: mknod is not permitted here")
    else:
        cases["a character device"] = (
            lambda out: os.mknod(out, stat.S_IFCHR | 0o666, os.makedev(1, 7)),
            refused(stat.S_ISCHR),
        )
    try:
        for number, (name, (make, judge)) in enumerate(cases.items()):
            out = tmp_path / f"case{number}" / "out.html"
            out.parent.mkdir()
            make(out)
            done = trace_html(tmp_path, folder, out)
            ok = judge(out, done)
            attacks.record(KIND, not ok, f"{name}: {done.returncode} {done.stderr.strip()!r}")
        out = tmp_path / "nonexistent" / "dir" / "x.html"
        done = trace_html(tmp_path, folder, out)
        attacks.record(KIND, not missing(out, done), f"a missing folder: {done.stderr!r}")
    finally:
        for server in sockets:
            server.close()
