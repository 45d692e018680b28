"""Finding a session file from a reference: ``latest``, an id, or a unique id prefix."""

from __future__ import annotations

from pathlib import Path

__all__ = ["SessionNotFound", "resolve_session"]


class SessionNotFound(LookupError):
    """No session, or more than one, matches a reference. The message names the reference only."""

    def __init__(self, ref: str, reason: str) -> None:
        super().__init__(f"session not found: {ref!r} ({reason})")
        self.ref = ref
        self.reason = reason


def resolve_session(session_dir: str | Path, ref: str) -> Path:
    """The session file ``ref`` names in ``session_dir``.

    ``latest`` is the newest ``.jsonl`` file by modification time; anything else is an
    exact id (``<id>.jsonl``, with or without the suffix) or else a unique file-name prefix.
    """
    folder = Path(session_dir)
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if ref == "latest":
        if not files:
            raise SessionNotFound(ref, "there are no sessions")
        return max(files, key=lambda p: (p.stat().st_mtime, p.name))
    if not ref or "/" in ref or "\\" in ref:
        raise SessionNotFound(ref, "not a session id")
    name = ref if ref.endswith(".jsonl") else f"{ref}.jsonl"
    exact = folder / name
    if exact.is_file():
        return exact
    matches = [p for p in files if p.name.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise SessionNotFound(ref, "no session id starts with it")
    raise SessionNotFound(ref, f"ambiguous: {len(matches)} sessions start with it")
