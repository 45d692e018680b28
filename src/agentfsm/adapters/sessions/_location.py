"""Where the CLI keeps a workspace's sessions: the user's state folder, not the workspace.

Session files are the agent's own record. Inside the workspace the model could read them
with its tools or append a forged turn that a later ``--resume`` would send, so by default
they live under ``$XDG_STATE_HOME/agentfsm/sessions/<workspace>-<hash>/`` (``~/.local/state``
when ``XDG_STATE_HOME`` is unset), one folder per workspace path.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

__all__ = ["default_session_dir", "state_home"]


def state_home() -> Path:
    """``$XDG_STATE_HOME`` when it is an absolute path, else ``~/.local/state``."""
    value = os.environ.get("XDG_STATE_HOME", "")
    if value and os.path.isabs(value):
        return Path(value)
    return Path.home() / ".local" / "state"


def default_session_dir(workspace: str | Path) -> Path:
    """The session folder of ``workspace`` inside the user's state folder."""
    root = Path(workspace).resolve()
    digest = hashlib.sha256(os.fsencode(root)).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", root.name).strip("-.") or "root"
    return state_home() / "agentfsm" / "sessions" / f"{name[:40]}-{digest}"
