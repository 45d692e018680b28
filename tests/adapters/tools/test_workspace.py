"""Workspace tools: confinement, permissions, editing, re-reads, shell processes."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
from pathlib import Path

import pytest

from agentfsm import AbortController, ToolCall, ToolResult
from agentfsm.adapters.tools import OutsideWorkspace, Permissions, ToolBox, workspace_tools
from agentfsm.adapters.tools._builtin import WorkspaceTools, sha
from agentfsm.adapters.tools._fs import MAX_SYMLINK_HOPS, PathRefused, SafeRoot
from agentfsm.adapters.tools._shell_tool import BASH, MAX_ARGUMENT, bash_command
from agentfsm.sandbox import BubblewrapSandbox, Unsandboxed

from ...security.sandboxing import require_bubblewrap


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("def main():\n    return 1\n", "utf-8")
    (workspace / "README.md").write_text("# demo\nTODO: write docs\n", "utf-8")
    (tmp_path / "secret.txt").write_text("outside", "utf-8")
    return workspace


async def call(box: ToolBox, name: str, **arguments: object) -> ToolResult:
    return await box.run(ToolCall(f"c_{name}", name, dict(arguments)))


@pytest.mark.parametrize(
    "path",
    [
        "../secret.txt",
        "src/../../secret.txt",
        "~/.bashrc",
        "/etc/passwd",
        "{outside}",
        "link/secret.txt",
        "escape.txt",
    ],
)
async def test_escapes_are_refused(root: Path, path: str) -> None:
    (root / "link").symlink_to(root.parent, target_is_directory=True)
    (root / "escape.txt").symlink_to(root.parent / "secret.txt")
    path = path.replace("{outside}", str(root.parent / "secret.txt"))
    box = workspace_tools(root)
    for tool_name, extra in (("read_file", {}), ("write_file", {"content": "x"}), ("list_dir", {})):
        result = await box.run(ToolCall("c", tool_name, {"path": path, **extra}))
        assert not result.ok, (tool_name, path)
        assert "workspace" in (result.error or "")
        assert str(root.parent) not in (result.error or "").replace(path, "")
    assert (root.parent / "secret.txt").read_text("utf-8") == "outside"


async def test_absolute_paths_inside_the_root_are_fine(root: Path) -> None:
    result = await workspace_tools(root).run(
        ToolCall("c", "read_file", {"path": str(root / "README.md")})
    )
    assert result.ok
    assert "TODO" in result.output


async def test_listing_globbing_and_grep(root: Path) -> None:
    box = workspace_tools(root)
    assert (await call(box, "list_dir")).output == "src/\nREADME.md"
    assert (await call(box, "glob", pattern="**/*.py")).output == "src/app.py"
    found = await call(box, "grep", pattern="todo", ignore_case=True)
    assert found.output == "README.md:2: TODO: write docs"
    assert not (await call(box, "glob", pattern="../*")).ok
    assert not (await call(box, "grep", pattern="(")).ok


async def test_edit_file_is_an_exact_unique_replacement(root: Path) -> None:
    box = workspace_tools(root)
    edited = await box.run(
        ToolCall("e1", "edit_file", {"path": "src/app.py", "old": "return 1", "new": "return 2"})
    )
    assert edited.ok
    before, after = "def main():\n    return 1\n", "def main():\n    return 2\n"
    assert edited.metadata == {
        "path": "src/app.py",
        "before_sha": sha(before),
        "after_sha": sha(after),
    }
    assert (root / "src" / "app.py").read_text("utf-8") == after
    missing = await box.run(
        ToolCall("e2", "edit_file", {"path": "src/app.py", "old": "return 9", "new": "x"})
    )
    assert not missing.ok
    assert "not found" in (missing.error or "")
    (root / "dup.txt").write_text("a a a", "utf-8")
    twice = await box.run(ToolCall("e3", "edit_file", {"path": "dup.txt", "old": "a", "new": "b"}))
    assert not twice.ok
    assert "appears 3 times" in (twice.error or "")
    every = await box.run(
        ToolCall(
            "e4", "edit_file", {"path": "dup.txt", "old": "a", "new": "b", "replace_all": True}
        )
    )
    assert every.ok
    assert (root / "dup.txt").read_text("utf-8") == "b b b"
    written = await box.run(
        ToolCall("w", "write_file", {"path": "new/deep/file.txt", "content": "hi"})
    )
    assert written.ok
    assert written.metadata["before_sha"] == sha("")
    assert (root / "new" / "deep" / "file.txt").read_text("utf-8") == "hi"


async def test_rereading_an_unchanged_file(root: Path) -> None:
    from agentfsm import LoopParams, RunContext
    from agentfsm.engine._context import current_run

    box = workspace_tools(root)
    outside = await box.run(ToolCall("r0", "read_file", {"path": "README.md"}))
    assert "TODO" in outside.output
    token = current_run.set(RunContext(params=LoopParams(max_turns=5), history=[]))
    try:
        first = await box.run(ToolCall("r1", "read_file", {"path": "README.md"}))
        assert "TODO" in first.output  # the read outside a run is not remembered
        again = await box.run(ToolCall("r2", "read_file", {"path": "README.md"}))
        assert "unchanged since you read it (call r1)" in again.output
        (root / "README.md").write_text("# changed\n", "utf-8")
        changed = await box.run(ToolCall("r3", "read_file", {"path": "README.md"}))
        assert "# changed" in changed.output
    finally:
        current_run.reset(token)
    window = await box.run(
        ToolCall("r4", "read_file", {"path": "src/app.py", "offset": 2, "limit": 1})
    )
    assert window.output == "[src/app.py: lines 2-2 of 2]\n2\t    return 1"


async def test_rereading_after_the_earlier_read_was_pruned(root: Path) -> None:
    from agentfsm import LoopParams, RunContext
    from agentfsm.engine._context import current_run

    box = workspace_tools(root)
    ctx = RunContext(params=LoopParams(max_turns=5), history=[])
    token = current_run.set(ctx)
    try:
        await box.run(ToolCall("r1", "read_file", {"path": "README.md"}))
        ctx.policy_state["prune_tool_results"] = {"r1:abcdef": "[tool result pruned: …]"}
        again = await box.run(ToolCall("r2", "read_file", {"path": "README.md"}))
    finally:
        current_run.reset(token)
    assert "TODO" in again.output  # the earlier content is gone from view: send it again


async def test_permissions_in_code_and_in_the_settings_file(root: Path) -> None:
    (root / ".agentfsm").mkdir()
    (root / ".agentfsm" / "settings.json").write_text(
        json.dumps(
            {
                "permissions": {
                    "deny": ["write_file(src/**)"],
                    "allow": ["shell(git *)", "shell(echo *)"],
                }
            }
        ),
        "utf-8",
    )
    # The rules, not the sandbox, are under test here: the shell runs unsandboxed on purpose.
    box = workspace_tools(
        root, permissions=Permissions.of(deny=["read_file(*.md)"]), sandbox=Unsandboxed()
    )
    denied_read = await call(box, "read_file", path="README.md")
    assert not denied_read.ok
    assert "read_file(*.md)" in (denied_read.error or "")
    denied_write = await call(box, "write_file", path="src/x.py", content="")
    assert not denied_write.ok
    assert "write_file(src/**)" in (denied_write.error or "")
    assert (await call(box, "write_file", path="docs/x.md", content="ok")).ok
    assert (await call(box, "shell", command="echo allowed")).output.strip() == "allowed"
    refused = await call(box, "shell", command="rm -rf src")
    assert not refused.ok
    assert "only allowed for shell(git *), shell(echo *)" in (refused.error or "")
    assert (root / "src" / "app.py").exists()


def _alive(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return [p for p in pids if p != os.getpid()]


async def test_shell_results_timeout_and_no_process_left(root: Path) -> None:
    require_bubblewrap(root)  # the shell runs in the OS sandbox, or not at all
    box = workspace_tools(root)
    ok = await call(box, "shell", command="echo out; echo err >&2")
    assert ok.ok
    assert ok.output == "out\nerr\n"
    failed = await call(box, "shell", command="exit 3")
    assert not failed.ok
    assert failed.error == "exit code 3"
    marker = f"agentfsm-timeout-{time.monotonic_ns()}"
    started = time.monotonic()
    timed = await call(
        box, "shell", command=f"sh -c 'sleep 30; echo {marker}' & sleep 30 # {marker}", timeout=1
    )
    assert time.monotonic() - started < 5
    assert not timed.ok
    assert "timed out" in (timed.error or "")
    await asyncio.sleep(0.2)
    assert _alive(marker) == []


async def test_shell_abort_kills_the_process_group(root: Path) -> None:
    require_bubblewrap(root)  # the shell runs in the OS sandbox, or not at all
    box = workspace_tools(root)
    marker = f"agentfsm-abort-{time.monotonic_ns()}"
    controller = AbortController()
    task = asyncio.create_task(
        box.run(
            ToolCall(
                "s", "shell", {"command": f"sh -c 'sleep 30; echo {marker}' & sleep 30 # {marker}"}
            ),
            signal=controller.signal,
        )
    )
    for _ in range(50):
        if len(_alive(marker)) >= 2:  # the shell and its background child
            break
        await asyncio.sleep(0.05)
    assert _alive(marker)
    controller.abort()
    result = await asyncio.wait_for(task, 3)
    assert not result.ok
    await asyncio.sleep(0.2)
    assert _alive(marker) == []


# -- descriptors, caps and searches ------------------------------------------------------


def test_symlinks_inside_the_root_are_followed(root: Path) -> None:
    (root / "docs").symlink_to("src")
    (root / "chain").symlink_to("docs/../docs/app.py")
    tools = WorkspaceTools(root)
    assert "return 1" in tools.read_file("chain").output
    written = tools.write_file("docs/new.py", "x = 1\n")
    assert written.metadata["path"] == "src/new.py"
    assert (root / "src" / "new.py").read_text("utf-8") == "x = 1\n"
    edited = tools.edit_file("chain", "return 1", "return 2")
    assert edited.metadata["path"] == "src/app.py"
    assert (root / "chain").is_symlink()
    assert "return 2" in (root / "src" / "app.py").read_text("utf-8")


def test_writes_keep_the_mode_and_take_any_text(root: Path) -> None:
    tools = WorkspaceTools(root)
    script = root / "run.sh"
    script.write_text("echo a\n", "utf-8")
    script.chmod(0o755)
    assert tools.edit_file("run.sh", "echo a", "echo b").ok
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    odd = "lone \udcff surrogate"
    result = tools.write_file("odd.txt", odd)
    assert result.ok
    assert result.metadata["after_sha"] == sha(odd)
    assert not any(p.name.startswith(".tmp-write-") for p in root.iterdir())
    (root / "latin1.txt").write_bytes(b"caf\xe9\n")
    refused = tools.edit_file("latin1.txt", "caf", "cafe")
    assert refused.error == "latin1.txt is not UTF-8 text; edit_file only changes text files"
    assert not tools.write_file("src/", "x").ok
    assert "not a valid file name" in (tools.write_file("a\ud800", "x").error or "")


def test_reads_are_capped(root: Path) -> None:
    tools = WorkspaceTools(root)
    tools.max_read_bytes = 100
    (root / "big.txt").write_text("line\n" * 100, "utf-8")
    shown = tools.read_file("big.txt").output
    assert shown.startswith("[big.txt is 500 bytes; only its first 100 bytes were read]\n")
    assert shown.endswith("20\tline")
    assert tools.edit_file("big.txt", "line", "x").error == (
        "big.txt is larger than 100 bytes; edit_file does not change files that large"
    )


def test_list_dir_marks_only_real_folders_and_is_capped(root: Path) -> None:
    (root / "link").symlink_to("src")
    tools = WorkspaceTools(root)
    assert tools.list_dir().output == "src/\nREADME.md\nlink"
    many = root / "many"
    many.mkdir()
    for i in range(1005):
        (many / f"f{i:04}").touch()
    shown = tools.list_dir("many").output.splitlines()
    assert len(shown) == 1001
    assert shown[-1] == "[first 1,000 entries only]"


def test_glob_patterns(root: Path) -> None:
    (root / "src" / "pkg").mkdir()
    (root / "src" / "pkg" / "mod.py").touch()
    (root / "src" / "pkg" / ".hidden.py").touch()
    (root / "node_modules").mkdir()
    (root / "node_modules" / "dep.py").touch()
    (root / "linked").symlink_to("src")
    tools = WorkspaceTools(root)
    assert tools.glob("*.py").output == "(no match)"
    assert tools.glob("**/*.py").output == "src/app.py\nsrc/pkg/.hidden.py\nsrc/pkg/mod.py"
    assert tools.glob("src/*").output == "src/app.py\nsrc/pkg"
    assert tools.glob("src/**").output == (
        "src/app.py\nsrc/pkg\nsrc/pkg/.hidden.py\nsrc/pkg/mod.py"
    )
    assert tools.glob("src/[ap]*").output == "src/app.py\nsrc/pkg"
    assert tools.glob("src/[!a]*").output == "src/pkg"
    assert tools.glob("READ?E.md").output == "README.md"
    assert tools.glob("*.py", path="src/pkg").output == "src/pkg/.hidden.py\nsrc/pkg/mod.py"
    assert tools.glob("linked/*").output == "(no match)"  # symlinked folders: not descended
    assert tools.glob("*").output == "README.md\nlinked\nsrc"
    assert tools.glob("src/[/]*").output == "(no match)"


def test_grep_notes_caps_and_deadline(root: Path) -> None:
    os.mkfifo(root / "pipe")
    (root / "long.txt").write_text("x" * 50 + "\nTODO later\n", "utf-8")
    tools = WorkspaceTools(root)
    assert tools.grep("todo", ignore_case=True).output == (
        "README.md:2: TODO: write docs\nlong.txt:2: TODO later\n"
        "[1 file skipped: hard links or special files]"
    )
    tools.max_grep_file_bytes = 10
    capped = tools.grep("TODO", path="long.txt").output
    assert capped == "(no match)\n[1 file searched only up to byte 10]"
    tools.max_grep_file_bytes = 10_000_000
    tools.search_seconds = 0
    assert "[search stopped after 0 s; results are partial]" in tools.grep("TODO").output
    tools.search_seconds = 10
    tools.max_scan = 2
    assert "[search stopped after visiting 2 entries" in tools.glob("**/*").output
    denied = WorkspaceTools(root, Permissions.of(deny=["read_file(*.md)", "grep(long.txt)"]))
    assert denied.grep("TODO").output == (
        "(no match)\n[2 paths skipped by permission rules]\n"
        "[1 file skipped: hard links or special files]"
    )
    looking_back = tools.grep(r"(?<=TODO) later")
    assert not looking_back.ok
    assert "RE2 syntax" in (looking_back.error or "")


def test_safe_root_resolution(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "file").write_text("x", "utf-8")
    previous = "file"
    for i in range(MAX_SYMLINK_HOPS + 1):
        (tmp_path / f"l{i}").symlink_to(previous)
        previous = f"l{i}"
    with SafeRoot(tmp_path) as root:
        with root.resolve("a/new/../x/y", missing_ok=True) as resolved:
            assert (resolved.parts, resolved.pending, resolved.name) == (
                ("a", "x", "y"),
                ("x",),
                "y",
            )
        with root.resolve(f"{tmp_path}/a/..") as resolved:
            assert (resolved.rel, resolved.name) == (".", None)
        with root.resolve(f"l{MAX_SYMLINK_HOPS - 1}") as resolved:
            assert resolved.rel == "file"
        with pytest.raises(PathRefused, match="too many levels of symbolic links"):
            root.resolve(f"l{MAX_SYMLINK_HOPS}")
        with pytest.raises(FileNotFoundError):
            root.resolve("missing/x")
        with pytest.raises(NotADirectoryError):
            root.resolve("file/x")
        for spelling in (".agentfsm/x", ".AgentFSM/x", "\uff0eagentfsm/x", ".agentfsm"):
            assert root.is_protected(tuple(spelling.split("/"))), spelling
        assert not root.is_protected(("agentfsm",))
        assert root.read_bytes("file", 10) == b"x"
    (tmp_path.parent / f"{tmp_path.name}-alias").symlink_to(tmp_path)
    alias = tmp_path.parent / f"{tmp_path.name}-alias"
    with SafeRoot(alias, protected=(f"{alias}/a", "/elsewhere")) as root:
        assert root.read_bytes(f"{alias}/file", 10) == b"x"
        assert root.read_bytes(f"{tmp_path}/file", 10) == b"x"
        assert root.protected == (("a",),)
        with pytest.raises(OutsideWorkspace, match="is outside the workspace"):
            root.resolve(f"{tmp_path.parent}/file")


def test_safe_root_read_only_paths(tmp_path: Path) -> None:
    inside = tmp_path / "env" / "lib"
    given = [str(inside), "pkg/mod", "/elsewhere/lib", f"{tmp_path.parent}/other", "a/../b"]
    with SafeRoot(tmp_path, readonly=given) as root:
        assert root.readonly == (("env", "lib"), ("pkg", "mod"))
        for spelled in ("env/lib", "env/lib/x.pth", "ENV/Lib/x", "pkg/mod"):
            assert root.is_readonly(spelled.split("/")), spelled
        for spelled in ("env", "env/lib2", "pkg", "b", ""):
            assert not root.is_readonly([p for p in spelled.split("/") if p]), spelled
    # The root itself read-only: everything is.
    with SafeRoot(tmp_path, readonly=[str(tmp_path)]) as root:
        assert root.is_readonly(("any", "thing"))
        with (
            root.resolve("new.txt", missing_ok=True) as resolved,
            pytest.raises(PathRefused, match="part of the agent's own installation"),
        ):
            root.check_writable(resolved)
    with SafeRoot(tmp_path) as root:
        assert not root.is_readonly(("any",))


async def test_the_shell_runs_lines_with_the_bash_the_rules_parse(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``&>`` and ``$'…'`` mean to the running shell what the rules read (dash would run
    ``ls &`` and write an empty file); without bash, a line under shell rules is refused."""
    require_bubblewrap(root)
    box = workspace_tools(root, permissions=Permissions.of(deny=["shell(rm *)"]))
    both = await call(box, "shell", command="ls missing-file &> out.txt; cat out.txt")
    assert "missing-file" in both.output
    shell = await call(box, "shell", command='echo "$BASH"')
    assert shell.output.strip().endswith("/bash")
    from agentfsm.adapters.tools import _shell_tool

    monkeypatch.setattr(_shell_tool, "BASH", None)
    refused = await call(box, "shell", command="ls")
    assert not refused.ok
    assert "bash is not installed" in (refused.error or "")
    unruled = await call(workspace_tools(root), "shell", command="echo plain sh")
    assert unruled.ok
    assert unruled.output == "plain sh\n"


async def test_a_shell_line_with_a_lone_surrogate_fails_with_a_reason(root: Path) -> None:
    """A model can send ``\\ud800`` in its JSON; no shell can be given it: the call fails
    with a one-line reason (rules or not), and U+2028 is plain text to bash."""
    require_bubblewrap(root)
    for permissions in (Permissions(), Permissions.of(deny=["shell(rm *)"])):
        box = workspace_tools(root, permissions=permissions)
        for line in ("echo \ud800x", "ls '\udc80'"):
            refused = await call(box, "shell", command=line)
            assert not refused.ok
            assert "lone surrogate (U+D" in (refused.error or "")
        separator = await call(box, "shell", command="echo a\u2028b")
        assert separator.output == "a\u2028b\n"


async def test_a_shell_line_too_long_for_the_kernel_fails_with_a_reason(root: Path) -> None:
    """A line past what ``execve`` takes in one argument fails with a one-line reason, not
    an ``OSError``; one just under it runs."""
    require_bubblewrap(root)
    box = workspace_tools(root, permissions=Permissions.of(deny=["shell(rm *)"]))
    refused = await call(box, "shell", command="echo " + "x" * 140_000)
    assert not refused.ok
    assert "too long to run" in (refused.error or "")
    quoted = await call(box, "shell", command="echo " + "'" * 30_000)  # each quote grows fivefold
    assert not quoted.ok
    assert "too long to run" in (quoted.error or "")
    # Just short enough as a line, too long with the sandbox's limits set before it: the
    # same reason (it used to be an OSError).
    edge = await call(workspace_tools(root), "shell", command="echo " + "z" * 130_990)
    assert not edge.ok
    assert "too long to run" in (edge.error or ""), edge.error
    long_line = "printf %s " + "y" * 100_000 + " | wc -c"
    ruled = await call(box, "shell", command=long_line)  # longer than the rules read
    assert not ruled.ok
    assert "100018 characters long, longer than the rules read" in (ruled.error or "")
    ran = await call(workspace_tools(root), "shell", command=long_line)
    assert ran.ok, ran.error
    assert ran.output.strip() == "100000"
    # At the bound, the line and the limits the sandbox's sh sets before it fill the
    # kernel's one argument exactly and run; one byte more is refused with the reason.
    assert BASH is not None
    prefix = BubblewrapSandbox(root)._shell("")[-1]
    fits = MAX_ARGUMENT - 1 - len(prefix) - len(bash_command("printf %s  | wc -c", BASH))
    for count, runs in ((fits, True), (fits + 1, False)):
        done = await call(
            workspace_tools(root), "shell", command=f"printf %s {'z' * count} | wc -c"
        )
        assert done.ok is runs, done.error
        said = done.output.strip() if runs else done.error or ""
        assert said == str(count) if runs else "too long to run" in said
