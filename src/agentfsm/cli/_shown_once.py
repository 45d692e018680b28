"""Notes ``agentfsm run`` prints once per workspace rather than on every run.

The verify gate's "no check command" note says the same thing on every run of a workspace
without a check; after the first time it is noise. The last such note printed is kept in
``.notes-shown.json`` in the run's session folder (the workspace's own folder under
``$XDG_STATE_HOME/agentfsm/sessions/`` by default, out of the model's reach); the same note
again is not printed. Every run still records it in its session file and in ``--json``.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from pathlib import Path

__all__ = ["NOTES_FILE", "ShownOnce"]

NOTES_FILE = ".notes-shown.json"
"""The file of a session folder that remembers the notes already printed."""

_MAX_BYTES = 64 * 1024


class ShownOnce:
    """Remembers, in ``folder``, the notes already printed: one text per key."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / NOTES_FILE

    def _read(self) -> dict[str, str]:
        """What the file remembers, if it is a regular file (a FIFO there blocks nothing)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            with os.fdopen(fd, "rb") as file:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return {}
                data = json.loads(file.read(_MAX_BYTES))
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): v for k, v in data.items() if isinstance(v, str)}

    def first_time(self, key: str, text: str) -> bool:
        """Whether ``text`` is new under ``key`` (then it is remembered). A folder that
        cannot be read or written counts as new: the note is printed."""
        shown = self._read()
        if shown.get(key) == text:
            return False
        shown[key] = text
        # a new file of an unguessable name, never through a link planted in its place
        temporary = self.path.with_name(f"{NOTES_FILE}.{secrets.token_hex(6)}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            with os.fdopen(os.open(temporary, flags, 0o666), "w", encoding="utf-8") as out:
                out.write(json.dumps(shown))
            os.replace(temporary, self.path)
        except OSError:
            temporary.unlink(missing_ok=True)
        return True
