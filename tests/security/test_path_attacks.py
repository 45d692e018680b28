"""The path tools attacked by a hostile model: every way out of the root we know of.

A workspace sits next to an ``outside`` folder whose files hold ``SECRET`` canaries. An
attack got through when a canary (or the name of an outside file) shows up in what the tool
returned, when a file outside the workspace changed or appeared, when a denied or protected
file was shown or changed, or when the call hung. The workspace itself holds every kind of
trap: symlinks out (absolute, relative, chained, through ``/proc``), a hard link to an
outside file, a FIFO, a sparse 3 GiB file and the agent's own settings.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from agentfsm import ToolCall, ToolResult
from agentfsm.adapters.tools import Permissions, ToolBox, workspace_tools
from agentfsm.agent import WorkspacePreamble

from .tally import AttackTally

CANARY = "SECRET-OUTSIDE-CONTENT"
HARD = "SECRET-HARDLINK-CONTENT"
SETTINGS = {"permissions": {"deny": ["shell(echo SETTINGS-CANARY)"]}}
GIB3 = 3 << 30


class World:
    """The workspace ``ws`` and the ``outside`` folder next to it."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.root = tmp / "ws"
        self.outside = tmp / "outside"
        self.secret = self.outside / "XFILE-SECRET.txt"
        self.outdir = self.outside / "XDIR-SECRET"
        self.hard_target = self.outside / "XHARD-SECRET.txt"

    def state(self) -> dict[str, bytes]:
        """Every entry outside the workspace, with its content (or link target)."""
        found: dict[str, bytes] = {}
        for folder, dirs, files in os.walk(self.tmp):
            if Path(folder) == self.tmp:
                dirs[:] = [d for d in dirs if d != "ws"]
            for name in files + dirs:
                path = Path(folder) / name
                if path.is_symlink():
                    found[str(path)] = os.readlink(path).encode()
                elif path.is_file():
                    found[str(path)] = path.read_bytes()
                else:
                    found[str(path)] = b"<dir>"
        return found


@pytest.fixture
def world(tmp_path: Path) -> World:
    w = World(tmp_path)
    w.outdir.mkdir(parents=True)
    w.secret.write_text(CANARY, "utf-8")
    (w.outdir / "XNAME-SECRET.txt").write_text(CANARY, "utf-8")
    w.hard_target.write_text(HARD, "utf-8")
    root = w.root
    (root / "src" / "deep").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 1\n", "utf-8")
    (root / "README.md").write_text("# demo\n", "utf-8")
    (root / ".agentfsm").mkdir()
    (root / ".agentfsm" / "settings.json").write_text(json.dumps(SETTINGS), "utf-8")
    links = {
        "out_file": str(w.secret),
        "out_dir": str(w.outdir),
        "rel_out": "../outside",
        "rel_file": "../outside/XFILE-SECRET.txt",
        "chain1": "chain2",
        "chain2": "src/../chain3",
        "chain3": "src/deep/../../../outside",
        "deep_chain": "src/../src/../../outside/XFILE-SECRET.txt",
        "proc": "/proc/self/root",
        "procfile": f"/proc/self/root{w.secret}",
        "cwd": "/proc/self/cwd",
        "src/up": "../..",
        "loop_a": "loop_b",
        "loop_b": "loop_a",
    }
    for name, target in links.items():
        (root / name).symlink_to(target)
    os.link(w.hard_target, root / "hard.txt")
    os.link(w.hard_target, root / "src" / "deep" / "hard2.txt")
    (root / "hlink").symlink_to("hard.txt")
    return w


def escape_paths(w: World) -> list[str]:
    secret = str(w.secret)
    return [
        "../outside/XFILE-SECRET.txt",
        "src/../../outside/XFILE-SECRET.txt",
        "../" * 40 + secret.lstrip("/"),
        "src/deep/../../../" + "../" * 10 + secret.lstrip("/"),
        secret,
        str(w.outdir),
        f"{w.root}/../outside/XFILE-SECRET.txt",
        f"{w.root}/src/up/outside/XFILE-SECRET.txt",
        "~",
        "~/XFILE-SECRET.txt",
        "~root/.bashrc",
        "~nobody",
        "out_file",
        "out_dir",
        "out_dir/XNAME-SECRET.txt",
        "rel_out/XFILE-SECRET.txt",
        "rel_out",
        "rel_file",
        "chain1/XFILE-SECRET.txt",
        "chain1",
        "deep_chain",
        f"proc{secret}",
        f"proc{w.outside}",
        "procfile",
        f"/proc/self/root{secret}",
        f"/proc/self/root{w.outside}",
        f"/proc/{os.getpid()}/root{secret}",
        "/proc/self/cwd",
        "/proc/self/environ",
        "cwd",
        "src/up/outside/XFILE-SECRET.txt",
        "src/up",
        "src/app.py\x00/../../outside/XFILE-SECRET.txt",
        "\x00",
        "\u2024\u2024/outside/XFILE-SECRET.txt",
        "\u2025/outside/XFILE-SECRET.txt",
        "..\u2215outside\u2215XFILE-SECRET.txt",
        "\uff0e\uff0e/outside/XFILE-SECRET.txt",
        "\uff0e\uff0e\uff0foutside\uff0fXFILE-SECRET.txt",
        ".\u200b./outside/XFILE-SECRET.txt",
        "../outside/",
        "../outside/.",
        "out_dir/",
        "out_dir/.",
        "out_dir/..",
        "rel_out//XFILE-SECRET.txt/",
        "..//outside///XFILE-SECRET.txt",
        "./../outside/./XFILE-SECRET.txt",
        "src/deep/../../..",
        "..",
        "loop_a",
        "loop_a/x",
    ]


def stripped(text: str, values: list[str]) -> str:
    """``text`` without the attack's own arguments (errors echo the path)."""
    for value in values:
        if value:
            text = text.replace(value, "").replace(repr(value)[1:-1], "")
    return text


async def attempt(
    attacks: AttackTally,
    kind: str,
    w: World,
    box: ToolBox,
    name: str,
    echoed: tuple[str, ...] = ("path", "glob"),
    markers: tuple[str, ...] = ("SECRET",),
    **arguments: Any,
) -> ToolResult:
    """Run one call and record whether it got through."""
    before = w.state()
    try:
        result = await asyncio.wait_for(box.run(ToolCall("c", name, dict(arguments))), 30)
    except TimeoutError:
        attacks.record(kind, True, f"{name}({arguments!r}) hung")
        return ToolResult(False, "", "hung")
    text = f"{result.output}\n{result.error or ''}"
    shown = stripped(text, [str(arguments[k]) for k in echoed if k in arguments])
    leaked = [m for m in markers if m in shown]
    changed = w.state() != before
    attacks.record(kind, bool(leaked) or changed, f"{name}({arguments!r}) {leaked} {changed}")
    return result


async def test_fixed_path_attacks_on_every_path_tool(world: World, attacks: AttackTally) -> None:
    box = workspace_tools(world.root)
    kind = "path tools: fixed attacks"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {}),
        ("list_dir", {}),
        ("glob", {"pattern": "*"}),
        ("glob", {"pattern": "**/*"}),
        ("grep", {"pattern": "OUTSIDE|HARDLINK"}),
        ("write_file", {"content": "PWNED"}),
        ("edit_file", {"old": "OUTSIDE", "new": "PWNED"}),
    ]
    for path in escape_paths(world):
        for name, extra in calls:
            await attempt(attacks, kind, world, box, name, path=path, **extra)
    assert world.secret.read_text("utf-8") == CANARY


GLOB_ATTACKS = [
    "../*",
    "../**",
    "../outside/*",
    "**/../..",
    "**/../../*",
    "*/../../outside/*",
    "src/../../*",
    "./../*",
    "..",
    "/etc/*",
    "/*",
    "~/*",
    "~root/*",
    "\uff0e\uff0e/*",
    "\u2024\u2024/*",
    "out_dir/*",
    "out_dir/**",
    "rel_out/*",
    "rel_out/**",
    "chain1/**",
    "proc/**",
    "proc/tmp/*",
    "cwd/*",
    "src/up/**",
    "src/up/outside/*",
    "**",
    "**/*",
    "*/*/*",
    "**/XNAME-SECRET*",
    "**/*SECRET*",
]


async def test_glob_and_grep_patterns_never_climb_out(world: World, attacks: AttackTally) -> None:
    box = workspace_tools(world.root)
    kind = "path tools: fixed attacks"
    for pattern in GLOB_ATTACKS:
        await attempt(attacks, kind, world, box, "glob", echoed=("pattern",), pattern=pattern)
        await attempt(
            attacks, kind, world, box, "grep", pattern="OUTSIDE|HARDLINK", path=".", glob=pattern
        )
    for refused in ("../*", "**/../..", "/etc/*", "~/*"):
        result = await attempt(attacks, kind, world, box, "glob", ("pattern",), pattern=refused)
        assert not result.ok
    result = await attempt(
        attacks, kind, world, box, "grep", pattern="x", path=".", glob="../../../../**"
    )
    assert not result.ok
    assert "inside the workspace" in (result.error or "")


async def test_a_hard_link_to_an_outside_file(world: World, attacks: AttackTally) -> None:
    box = workspace_tools(world.root)
    kind = "path tools: hardlink"
    for path in ("hard.txt", "src/deep/hard2.txt", "hlink", str(world.root / "hard.txt")):
        result = await attempt(attacks, kind, world, box, "read_file", path=path)
        assert not result.ok
        assert "hard link" in (result.error or "")
        changes: list[tuple[str, dict[str, Any]]] = [
            ("write_file", {"content": "PWNED"}),
            ("edit_file", {"old": "HARDLINK", "new": "PWNED"}),
        ]
        for name, extra in changes:
            result = await attempt(attacks, kind, world, box, name, path=path, **extra)
            assert not result.ok
        await attempt(attacks, kind, world, box, "grep", pattern="HARDLINK", path=path)
    for glob in ("**/*", "hard*", "**/hard2.txt"):
        result = await attempt(
            attacks, kind, world, box, "grep", pattern="HARDLINK", path=".", glob=glob
        )
        assert result.ok
        assert "skipped: hard links or special files" in result.output
    assert world.hard_target.read_text("utf-8") == HARD


DENY = ["read_file(secret/**)", "grep(secret/**)", "glob(secret/**)"]


async def test_grep_and_glob_skip_denied_files(world: World, attacks: AttackTally) -> None:
    secret = world.root / "secret"
    (secret / "sub").mkdir(parents=True)
    (secret / "key.txt").write_text("DENIED-CONTENT-1\n", "utf-8")
    (secret / "sub" / "NAME-DENIED.txt").write_text("DENIED-CONTENT-2\n", "utf-8")
    (world.root / "alias").symlink_to("secret/key.txt")
    (world.root / "aliasdir").symlink_to("secret")
    (world.root / "src" / "open.txt").write_text("DENIED? no, fine\n", "utf-8")
    kind = "grep/glob over denied files"
    markers = ("DENIED-CONTENT", "key.txt", "NAME-DENIED", "SECRET")
    for deny in (DENY, [*DENY, "list_dir(secret/**)"]):
        box = workspace_tools(world.root, permissions=Permissions.of(deny=deny))
        notes = 0
        calls: list[tuple[str, dict[str, Any]]] = [
            ("grep", {"pattern": "DENIED", "path": "."}),
            ("grep", {"pattern": "DENIED", "path": "secret"}),
            ("grep", {"pattern": "DENIED", "path": "secret/sub"}),
            ("grep", {"pattern": "DENIED", "path": "secret/key.txt"}),
            ("grep", {"pattern": "DENIED", "path": "alias"}),
            ("grep", {"pattern": "DENIED", "path": "aliasdir"}),
            ("grep", {"pattern": ".", "path": ".", "glob": "secret/**"}),
            ("grep", {"pattern": ".", "path": ".", "glob": "**/*.txt"}),
            ("grep", {"pattern": "CONTENT", "path": "src/.."}),
            ("glob", {"pattern": "**/*"}),
            ("glob", {"pattern": "**"}),
            ("glob", {"pattern": "secret/*"}),
            ("glob", {"pattern": "secret/**"}),
            ("glob", {"pattern": "*", "path": "secret"}),
            ("glob", {"pattern": "**/*.txt", "path": "aliasdir"}),
            ("read_file", {"path": "secret/key.txt"}),
            ("read_file", {"path": "alias"}),
            ("read_file", {"path": "aliasdir/key.txt"}),
        ]
        if "list_dir(secret/**)" in deny:
            calls += [("list_dir", {"path": "secret"}), ("list_dir", {"path": "aliasdir"})]
        for name, arguments in calls:
            echoed = ("path", "glob", "pattern") if name == "glob" else ("path", "glob")
            result = await attempt(attacks, kind, world, box, name, echoed, markers, **arguments)
            notes += "skipped by permission rules" in result.output
        assert notes >= 8
        found = await box.run(ToolCall("c", "grep", {"pattern": "fine", "path": "."}))
        assert "src/open.txt:1:" in found.output


async def test_special_files_and_huge_inputs(world: World, attacks: AttackTally) -> None:
    root = world.root
    kind = "special files and huge inputs"
    os.mkfifo(root / "pipe")
    (root / "pipelink").symlink_to("pipe")
    with (root / "huge.bin").open("wb") as file:
        file.truncate(GIB3)
    with (root / "huge.txt").open("wb") as file:
        file.write(b"line one\nline two\n")
        file.truncate(GIB3)
    (root / "redos.txt").write_text("a" * 100_000 + "b\n", "utf-8")
    (root / "names").mkdir()
    (root / "names" / ("a" * 200)).write_text("x", "utf-8")
    box = workspace_tools(root)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": "pipe"}),
        ("read_file", {"path": "pipelink"}),
        ("edit_file", {"path": "pipe", "old": "a", "new": "b"}),
        ("write_file", {"path": "pipe", "content": "x"}),
        ("grep", {"pattern": "x", "path": "pipe"}),
        ("grep", {"pattern": "x", "path": "pipelink"}),
        ("grep", {"pattern": "line", "path": "."}),
        ("list_dir", {"path": "."}),
        ("glob", {"pattern": "**/*"}),
        ("read_file", {"path": "huge.bin"}),
        ("read_file", {"path": "huge.txt"}),
        ("read_file", {"path": "huge.txt", "offset": 1_000_000_000}),
        ("edit_file", {"path": "huge.txt", "old": "line one", "new": "x"}),
        ("grep", {"pattern": "line", "path": "huge.txt"}),
        ("grep", {"pattern": "line", "path": "huge.bin"}),
        ("grep", {"pattern": "(a+)+$", "path": "redos.txt"}),
        ("grep", {"pattern": "(a|aa)+$", "path": "redos.txt"}),
        ("grep", {"pattern": "(.*a){12}$", "path": "redos.txt"}),
        ("grep", {"pattern": "(a+)+$", "path": "."}),
        ("glob", {"pattern": "*a*a*a*a*a*a*a*a*a*a*a*a*b", "path": "names"}),
        ("glob", {"pattern": "**/**/**/**/**/**/**/**/*b"}),
    ]
    for name, arguments in calls:
        started = time.monotonic()
        await attempt(attacks, kind, world, box, name, **arguments)
        slow = time.monotonic() - started > 10
        attacks.record(kind, slow, f"{name}({arguments!r}) took too long")
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    attacks.record(kind, grew > 1 << 20, f"memory grew by {grew} KB")  # ru_maxrss is in KB
    assert (root / "pipe").is_fifo()
    assert (root / "huge.txt").stat().st_size == GIB3
    backref = await box.run(ToolCall("c", "grep", {"pattern": r"(a)\1", "path": "."}))
    assert not backref.ok
    assert "RE2" in (backref.error or "")


async def test_the_agents_own_folder(world: World, attacks: AttackTally) -> None:
    root = world.root
    (root / "cfg").symlink_to(".agentfsm/settings.json")
    (root / "cfgdir").symlink_to(".agentfsm")
    (root / "src" / "cfg2").symlink_to("../cfgdir/settings.json")
    kind = "agent's own folder"
    settings = root / ".agentfsm" / "settings.json"
    before = settings.read_bytes()
    box = workspace_tools(root)
    paths = [
        ".agentfsm/settings.json",
        "./.agentfsm/settings.json",
        "src/../.agentfsm/settings.json",
        ".agentfsm//settings.json",
        ".agentfsm/./settings.json",
        str(settings),
        "cfg",
        "cfgdir/settings.json",
        "src/cfg2",
        ".agentfsm",
        "cfgdir",
        ".agentfsm/new.json",
        "cfgdir/new.json",
    ]
    markers = ("SETTINGS-CANARY", "SECRET")
    for path in paths:
        for name, extra in (
            ("read_file", {}),
            ("list_dir", {}),
            ("glob", {"pattern": "*"}),
            ("grep", {"pattern": "CANARY"}),
            ("write_file", {"content": "{}"}),
            ("edit_file", {"old": "deny", "new": "allow"}),
        ):
            result = await attempt(
                attacks, kind, world, box, name, ("path",), markers, path=path, **extra
            )
            changed = settings.read_bytes() != before or len(os.listdir(settings.parent)) != 1
            listed = "settings.json" in result.output or "new.json" in result.output
            attacks.record(kind, changed or listed, f"{name} {path} changed or listed the folder")
    for name, arguments in (
        ("list_dir", {"path": "."}),
        ("glob", {"pattern": "**/*"}),
        ("glob", {"pattern": ".agentfsm/*"}),
        ("glob", {"pattern": ".*/*"}),
        ("glob", {"pattern": "**/settings.json"}),
        ("grep", {"pattern": "CANARY", "path": "."}),
        ("grep", {"pattern": "CANARY", "path": ".", "glob": ".agentfsm/*"}),
    ):
        echoed = ("pattern", "glob") if name == "glob" else ("glob",)
        result = await attempt(attacks, kind, world, box, name, echoed, markers, **arguments)
        listed = any(m in result.output for m in (".agentfsm", "settings.json"))
        attacks.record(kind, listed, f"{name}({arguments!r}) lists the folder")
    refused = await box.run(ToolCall("c", "read_file", {"path": "cfg"}))
    assert refused.error == (
        "'.agentfsm/settings.json' is the agent's own configuration; it is not accessible to tools"
    )


def _setup_git(world: World, case: str) -> None:
    """A fresh ``.git`` in the workspace, set up as the attack ``case`` says."""
    git = world.root / ".git"
    if git.is_symlink():
        git.unlink()
    elif git.exists():
        shutil.rmtree(git)
    (git / "refs" / "heads").mkdir(parents=True)
    outside_git = world.outside / "repo"
    if not outside_git.exists():
        (outside_git / "refs" / "heads").mkdir(parents=True)
        (outside_git / "HEAD").write_text("SECRET0123456789abcdef\n", "utf-8")
        (outside_git / "refs" / "heads" / "main").write_text("SECRET-REF\n", "utf-8")
    head = git / "HEAD"
    if case == "HEAD symlink out":
        head.symlink_to(outside_git / "HEAD")
    elif case == "HEAD relative symlink out":
        head.symlink_to("../../outside/repo/HEAD")
    elif case == "HEAD is a FIFO":
        os.mkfifo(head)
    elif case == "HEAD is a hard link":
        os.link(world.hard_target, head)
    elif case == "ref with ..":
        head.write_text("ref: refs/../../../outside/repo/refs/heads/main\n", "utf-8")
    elif case == "absolute ref":
        head.write_text(f"ref: {outside_git}/refs/heads/main\n", "utf-8")
    else:
        head.write_text("ref: refs/heads/main\n", "utf-8")
    if case == "ref symlink out":
        (git / "refs" / "heads" / "main").symlink_to(outside_git / "refs" / "heads" / "main")
    elif case == "huge packed-refs":
        with (git / "packed-refs").open("wb") as file:
            file.truncate(GIB3)
    elif case == "git folder symlink out":
        shutil.rmtree(git)
        git.symlink_to(outside_git)


GIT_CASES = [
    "HEAD symlink out",
    "HEAD relative symlink out",
    "HEAD is a FIFO",
    "HEAD is a hard link",
    "ref with ..",
    "absolute ref",
    "ref symlink out",
    "huge packed-refs",
    "git folder symlink out",
]


async def test_the_session_context_reads_only_beneath_its_root(
    world: World, attacks: AttackTally
) -> None:
    kind = "session context"
    for case in GIT_CASES:
        _setup_git(world, case)
        started = time.monotonic()
        try:
            text = await asyncio.wait_for(
                asyncio.to_thread(WorkspacePreamble(world.root).render), 30
            )
        except TimeoutError:
            attacks.record(kind, True, f"{case}: hung")
            continue
        slow = time.monotonic() - started > 10
        attacks.record(kind, "SECRET" in text or slow, case)
    _setup_git(world, "plain")
    text = WorkspacePreamble(world.root, max_depth=5).render()
    for marker in ("SECRET", ".agentfsm", "settings.json"):
        attacks.record(kind, marker in text, f"the tree shows {marker}")
    assert "git HEAD: (no commits on main)" in text
    assert "  src/\n    deep/" in text
