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

PTH_FILES = 200
PTH_BYTES = 65_536
"""At most this many ``.pth`` files of a site-packages folder are read, each this far."""


def agent_install_paths() -> tuple[Path, ...]:
    """The folders holding the code this agent runs, resolved and without duplicates: the
    interpreter's prefixes, the site-packages folders (the user's too), the folders their
    ``.pth`` files and ``PYTHONPATH`` put on ``sys.path`` (an editable install's ``src``:
    a ``sitecustomize.py`` there runs at every start) and the folder of the imported
    ``agentfsm`` package."""
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    sites = site.getsitepackages() if hasattr(site, "getsitepackages") else []
    sites.append(site.getusersitepackages())
    candidates += [*sites, *(entry for folder in sites for entry in _pth_entries(folder))]
    candidates += os.environ.get("PYTHONPATH", "").split(os.pathsep)
    candidates.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    found: dict[Path, None] = {}
    for candidate in candidates:
        path = Path(os.path.realpath(candidate))
        if os.path.isabs(candidate) and path != Path("/"):
            found[path] = None
    return tuple(found)


def _pth_entries(folder: str) -> list[str]:
    """The folders the ``.pth`` files of ``folder`` add to ``sys.path`` (the agent's own
    files: the model cannot write them)."""
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".pth"))[:PTH_FILES]
    except OSError:
        return []
    entries = []
    for name in names:
        try:
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as file:
                lines = file.read(PTH_BYTES).splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.strip()
            if line and not line.startswith(("#", "import ", "import\t")):
                entries.append(os.path.join(folder, line))
    return entries
