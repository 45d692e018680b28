"""Finding a session file from a reference: ``latest``, an id, or a unique id prefix."""

from __future__ import annotations

import stat
import time
from pathlib import Path

__all__ = ["SessionNotFound", "is_session_file", "resolve_session", "session_files"]


class SessionNotFound(LookupError):
    """No session, or more than one, matches a reference, or the file it names cannot be
    read as one (not a regular file, too large, the folder is a file). The message names the
    reference only."""

    def __init__(self, ref: str, reason: str) -> None:
        super().__init__(f"session not found: {ref!r} ({reason})")
        self.ref = ref
        self.reason = reason


def is_session_file(path: Path) -> bool:
    """``path`` is a regular file (symlinks followed); never blocks, never raises."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except (OSError, ValueError):
        return False


FUTURE_SLACK_S = 60.0
"""How far in the future a modification time may lie and still count (clocks drift)."""


def _age_key(path: Path, now: float) -> float:
    """The file's modification time, for ordering: one in the future (a file copied with its
    dates, or crafted) counts as the oldest, so it never wins ``latest``."""
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return 0.0
    return mtime if mtime <= now + FUTURE_SLACK_S else 0.0


def _readable(path: Path) -> bool:
    """Holds something, within the size a session may have."""
    from ._lines import MAX_SESSION_BYTES

    try:
        return 0 < path.stat().st_size <= MAX_SESSION_BYTES
    except OSError:
        return False


def _present(path: Path) -> bool:
    try:
        path.lstat()
    except (OSError, ValueError):
        return False
    return True


def _own_file(path: Path) -> bool:
    """A regular file itself: not a symlink (which may lead out of the folder)."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except (OSError, ValueError):
        return False


def session_files(session_dir: str | Path) -> list[Path]:
    """The regular ``*.jsonl`` files of ``session_dir``, oldest first by modification time
    (one dated in the future counts as the oldest; symlinks, FIFOs, devices, sockets and
    folders with that suffix are left out: a session is a file of the folder, and a link
    planted there could lead a resume to any file; a missing folder has none). Raises
    :class:`SessionNotFound` when ``session_dir`` exists but is not a folder."""
    folder = Path(session_dir)
    if not folder.is_dir():
        if folder.exists():
            raise SessionNotFound(str(folder.name), "the session folder is not a folder")
        return []
    try:
        files = [p for p in folder.glob("*.jsonl") if _own_file(p)]
    except OSError:
        return []
    now = time.time()
    return sorted(files, key=lambda p: (_age_key(p, now), p.name))


def resolve_session(session_dir: str | Path, ref: str) -> Path:
    """The session file ``ref`` names in ``session_dir``.

    ``latest`` is the newest ``.jsonl`` file by modification time (none dated in the future
    wins) that can be read as a session: it holds something (an empty file is a session
    whose start was never recorded) and is within ``MAX_SESSION_BYTES``; anything else is an
    exact id (``<id>.jsonl``, with or without the suffix) or else a unique file-name prefix. Only
    the folder's own regular files count: a symlink, FIFO or device named like a session is
    never chosen.
    """
    folder = Path(session_dir)
    files = session_files(folder)
    if ref == "latest":
        recorded = [p for p in files if _readable(p)]
        if not recorded:
            raise SessionNotFound(ref, "there are no sessions")
        return recorded[-1]
    if not ref or "/" in ref or "\\" in ref or "\0" in ref:
        raise SessionNotFound(ref, "not a session id")
    name = ref if ref.endswith(".jsonl") else f"{ref}.jsonl"
    exact = folder / name
    if exact in files:
        return exact
    if exact.is_symlink():
        raise SessionNotFound(ref, "a symlink: a session is a regular file of its folder")
    if _present(exact):
        raise SessionNotFound(ref, "not a regular file")
    matches = sorted(p for p in files if p.name.startswith(ref))
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise SessionNotFound(ref, "no session id starts with it")
    raise SessionNotFound(ref, f"ambiguous: {len(matches)} sessions start with it")
