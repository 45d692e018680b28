"""The session preamble's git HEAD line against a workspace the model prepared.

The preamble is rendered at the start of each session, after the model of an earlier one
could plant anything in the workspace: a ``.git/HEAD``, a ref or ``packed-refs`` that is
a symlink to the agent's settings, to a session file kept inside the workspace or to a
file the ``read_file`` rules deny, or a ``HEAD`` naming a ref that climbs out of
``.git``. An attack got through when a byte of such a file shows in the preamble.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentfsm.adapters.tools import Permissions
from agentfsm.agent import WorkspacePreamble

from .tally import AttackTally

SETTINGS_MARK = "SECRETQ"
SETTINGS = {"permissions": {"deny": [SETTINGS_MARK, "read_file(keys/**)"]}}
SESSION_HEX = "c0ffee" * 6 + "abcd"
KEY_HEX = "facade" * 6 + "1234"
MARKERS = (SETTINGS_MARK, SESSION_HEX[:8], KEY_HEX[:8], "c0ffee", "facade")
SHA = "0123456789abcdef" * 2 + "01234567"


def _workspace(root: Path) -> None:
    """The trusted files: settings (protected), a session folder inside the workspace
    (excluded, as the CLI does), a read-denied key, and a plain repository."""
    (root / ".agentfsm").mkdir(parents=True)
    # Compact JSON: its first 40 characters hold the marker.
    (root / ".agentfsm" / "settings.json").write_text(json.dumps(SETTINGS, separators=(",", ":")))
    (root / ".agentfsm" / "x").write_text(f"{SESSION_HEX}\n")
    (root / "sessions").mkdir()
    (root / "sessions" / "s.jsonl").write_text(f"{SESSION_HEX}\n")
    (root / "sessions" / "HEAD").write_text(f"{SESSION_HEX}\n")
    (root / "keys").mkdir()
    (root / "keys" / "token").write_text(f"{KEY_HEX} refs/heads/main\n")
    (root / "keys" / "packed").write_text(f"{KEY_HEX} refs/heads/main\n")


def _git(root: Path, head: str = "ref: refs/heads/main\n") -> Path:
    git = root / ".git"
    if git.is_symlink():
        git.unlink()
    elif git.exists():
        shutil.rmtree(git)
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text(head)
    return git


def _plant(root: Path, case: str) -> None:
    """The model's preparation for ``case``."""
    git = _git(root)
    head, main = git / "HEAD", git / "refs" / "heads" / "main"
    links = {
        "HEAD -> settings": (head, "../.agentfsm/settings.json"),
        "HEAD -> session file": (head, "../sessions/s.jsonl"),
        "HEAD -> read-denied file": (head, "../keys/token"),
        "ref -> settings": (main, "../../../.agentfsm/settings.json"),
        "ref -> protected hex": (main, "../../../.agentfsm/x"),
        "ref -> session file": (main, "../../../sessions/s.jsonl"),
        "ref -> read-denied file": (main, "../../../keys/token"),
        "packed-refs -> read-denied file": (git / "packed-refs", "../keys/packed"),
        "packed-refs -> session file": (git / "packed-refs", "../sessions/s.jsonl"),
    }
    heads = {
        "HEAD names a path": "ref: ../../.agentfsm/settings.json\n",
        "HEAD ref climbs to .agentfsm": "ref: refs/heads/../../../.agentfsm/x\n",
        "HEAD ref climbs to a denied file": "ref: refs/heads/../../../keys/token\n",
        "HEAD ref through a hidden folder": "ref: refs/.hidden/../../../sessions/s.jsonl\n",
    }
    if case in links:
        path, target = links[case]
        path.unlink(missing_ok=True)
        path.symlink_to(target)
    elif case in heads:
        head.write_text(heads[case])
    elif case == "refs folder -> read-denied folder":
        shutil.rmtree(git / "refs")
        (git / "refs").symlink_to("../keys")
        head.write_text("ref: refs/token\n")
    elif case == ".git -> session folder":
        shutil.rmtree(git)
        git.symlink_to("sessions")
    elif case == "detached HEAD -> session file":
        head.unlink()
        head.symlink_to("../sessions/HEAD")
    else:
        raise AssertionError(case)


CASES = [
    "HEAD -> settings",
    "HEAD -> session file",
    "HEAD -> read-denied file",
    "ref -> settings",
    "ref -> protected hex",
    "ref -> session file",
    "ref -> read-denied file",
    "packed-refs -> read-denied file",
    "packed-refs -> session file",
    "HEAD names a path",
    "HEAD ref climbs to .agentfsm",
    "HEAD ref climbs to a denied file",
    "HEAD ref through a hidden folder",
    "refs folder -> read-denied folder",
    ".git -> session folder",
    "detached HEAD -> session file",
]


def test_planted_git_files_show_nothing_protected(tmp_path: Path, attacks: AttackTally) -> None:
    kind = "preamble git"
    _workspace(tmp_path)
    lines = []
    for case in CASES:
        _plant(tmp_path, case)
        text = WorkspacePreamble(tmp_path, exclude=["sessions"]).render()
        line = next(x for x in text.splitlines() if x.startswith("git HEAD: "))
        leaked = [m for m in MARKERS if m in text]
        attacks.record(kind, bool(leaked), f"{case}: {line} {leaked}")
        lines.append(line)
    assert all(line.startswith("git HEAD: unknown") for line in lines), lines


def test_the_read_file_rules_apply_to_the_git_reads(tmp_path: Path, attacks: AttackTally) -> None:
    kind = "preamble git"
    git = _git(tmp_path)
    (git / "refs" / "heads" / "main").write_text(f"{SHA}\n")
    shown = WorkspacePreamble(tmp_path).git_head()
    assert shown == f"{SHA[:12]} (main)"
    for deny in (["read_file(.git/**)"], ["read_file(.git/refs/*/main)"], ["read_file(*HEAD)"]):
        preamble = WorkspacePreamble(tmp_path, permissions=Permissions.of(deny=deny))
        head = preamble.git_head()
        attacks.record(kind, SHA[:8] in preamble.render(), f"read_file({deny}) showed {head}")
        assert head.startswith("unknown")
    allowed = WorkspacePreamble(tmp_path, permissions=Permissions.of(allow=["read_file(src/**)"]))
    assert allowed.git_head() == "unknown"
    # Rules from the workspace's settings apply too.
    (tmp_path / ".agentfsm").mkdir()
    (tmp_path / ".agentfsm" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["read_file(.git/**)"]}})
    )
    head = WorkspacePreamble(tmp_path).git_head()
    attacks.record(kind, SHA[:8] in head, f"settings deny: {head}")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"HEAD": "ref: refs/heads/main\n", "refs/heads/main": f"{SHA}\n"}, f"{SHA[:12]} (main)"),
        (
            {"HEAD": "ref: refs/heads/feat/x\n", "packed-refs": f"# pack\n{SHA} refs/heads/feat/x"},
            f"{SHA[:12]} (feat/x)",
        ),
        ({"HEAD": f"{SHA}\n"}, SHA),
        ({"HEAD": f"{SHA}{SHA[:24]}\n"}, f"{SHA}{SHA[:24]}"),
        ({"HEAD": "ref: refs/heads/main\n"}, "(no commits on main)"),
        ({"HEAD": "ref: refs/heads/main\n", "refs/heads/main": "not a sha\n"}, "unknown (main)"),
        ({"HEAD": "garbage SECRET\n"}, "unknown"),
        ({"HEAD": "ref: refs/heads/main\u2028x\n"}, "unknown"),
        ({}, "not a git repository"),
    ],
)
def test_what_the_git_line_shows(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    if files:
        _git(tmp_path)
    for name, content in files.items():
        path = tmp_path / ".git" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, "utf-8")
    assert WorkspacePreamble(tmp_path).git_head() == expected
