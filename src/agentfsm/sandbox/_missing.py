"""The note added to a sandboxed command that exited 127 (command not found).

A program that runs outside the sandbox but not inside it usually lives in a folder the
sandbox does not show. The note names the command the shell did not find, the ``PATH``
inside, the folders of that ``PATH`` the sandbox does not show, where the command is outside
the sandbox, and the settings line that shows a folder (``sandbox.read``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from ._hidden import homes

__all__ = ["not_found_note"]

_MISSING = (
    # dash: "/bin/sh: 1: python: not found"; bash: "bash: line 1: foo: command not found"
    re.compile(r": (?P<name>[^\s:'\"]{1,200}): (?:command )?not found[ \t]*$", re.MULTILINE),
    # bash running a missing program by its path: "x.sh: line 3: /opt/x/bin/x: No such file…"
    re.compile(r": (?P<name>/[^\s:'\"]{1,200}): No such file or directory[ \t]*$", re.MULTILINE),
    # zsh: "zsh:1: command not found: foo"
    re.compile(r"command not found: (?P<name>\S{1,200})[ \t]*$", re.MULTILINE),
    # env: "/usr/bin/env: 'python': No such file or directory"
    re.compile(
        r"env: ['\u2018]?(?P<name>[^\s'\u2019:]{1,200})['\u2019]?: No such file or directory",
        re.MULTILINE,
    ),
)
_COMMAND_NAME = re.compile(r"[\w+-][\w.+-]*")
SETTINGS_FILES = "~/.config/agentfsm/settings.json or the workspace's .agentfsm/settings.json"


def _missing_name(output: str) -> str | None:
    """The last command the output says was not found."""
    found: list[tuple[int, str]] = []
    for pattern in _MISSING:
        found += [(m.start(), m.group("name")) for m in pattern.finditer(output)]
    return max(found)[1] if found else None


def _folder_to_show(program: Path) -> str:
    """The install folder of ``program`` (resolved): the folder above its ``bin``, unless
    that is ``/``, a home folder or above one."""
    folder = Path(os.path.realpath(program)).parent
    above = folder.parent
    if folder.name != "bin" or above.parent == above:
        return str(folder)
    if any(home.is_relative_to(above) for home in homes(os.environ)):
        return str(folder)
    return str(above)


def _snippet(folder: str) -> str:
    return f'add the folder to "sandbox.read" in {SETTINGS_FILES}: ' + json.dumps(
        {"sandbox": {"read": [folder]}}
    )


def not_found_note(output: str, path: str, shows: Callable[[str], bool]) -> str | None:
    """What to say about a command that exited 127 with ``output``, for a sandbox whose
    commands get ``path`` as ``PATH`` and which shows a host path when ``shows(path)``;
    ``None`` when the output names no missing command."""
    name = _missing_name(output)
    if name is None:
        return None
    entries = list(dict.fromkeys(entry for entry in path.split(os.pathsep) if entry))
    unseen = [entry for entry in entries if os.path.isabs(entry) and not shows(entry)]
    lines = [f"`{name}` was not found inside the sandbox; its PATH is {path or '(empty)'}"]
    if unseen:
        lines.append(f"of which the sandbox does not show {', '.join(unseen)}")
    if _COMMAND_NAME.fullmatch(name) is None:
        lines.append(
            "a path that does not exist in the sandbox, or a script whose #! interpreter "
            "does not; if it lives in a folder the sandbox does not show, "
            + _snippet("/path/to/folder")
        )
        return "; ".join(lines)
    try:
        outside = shutil.which(name, path=os.environ.get("PATH", ""))
    except (OSError, ValueError):
        outside = None
    if outside is None:
        lines.append(f"`{name}` is not on the PATH outside the sandbox either")
    elif not shows(outside):
        real = os.path.realpath(outside)
        where = outside if real == outside else f"{outside} (-> {real})"
        lines.append(
            f"outside the sandbox it is {where}, in a folder the sandbox does not show; "
            "to let commands run it, " + _snippet(_folder_to_show(Path(outside)))
        )
    else:
        lines.append(
            f"outside the sandbox it is {outside}, which the sandbox shows: what it runs "
            "(an interpreter, a library) may lie in a folder the sandbox does not show; "
            + _snippet("/path/to/folder")
        )
    return "; ".join(lines)
