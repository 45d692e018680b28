"""Where the code the agent runs at its next start lives.

A ``.pth`` file or a module written into the agent's own interpreter, its site-packages or
the ``agentfsm`` package runs with the user's full rights the next time the agent starts,
outside any sandbox. When those folders lie inside a workspace (a project ``.venv``, an
editable install of agentfsm), the OS sandbox mounts them read-only and the path tools
refuse to write beneath them.
"""

from __future__ import annotations

import os
import site
import sys
from pathlib import Path

__all__ = ["agent_install_paths"]


def agent_install_paths() -> tuple[Path, ...]:
    """The folders holding the code this agent runs, resolved and without duplicates: the
    interpreter's prefixes, the site-packages folders (the user's too) and the folder of the
    imported ``agentfsm`` package."""
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    candidates += site.getsitepackages() if hasattr(site, "getsitepackages") else []
    candidates.append(site.getusersitepackages())
    candidates.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found: dict[Path, None] = {}
    for candidate in candidates:
        path = Path(os.path.realpath(candidate))
        if path != Path("/"):
            found[path] = None
    return tuple(found)
