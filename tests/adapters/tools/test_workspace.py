"""Workspace tools: confinement, permissions, editing, re-reads, shell processes."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from agentfsm import AbortController, ToolCall, ToolResult
from agentfsm.adapters.tools import Permissions, ToolBox, workspace_tools
from agentfsm.adapters.tools.builtin import sha

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
    box = workspace_tools(root)
    first = await box.run(ToolCall("r1", "read_file", {"path": "README.md"}))
    assert "TODO" in first.output
    again = await box.run(ToolCall("r2", "read_file", {"path": "README.md"}))
    assert "unchanged since you read it (call r1)" in again.output
    (root / "README.md").write_text("# changed\n", "utf-8")
    changed = await box.run(ToolCall("r3", "read_file", {"path": "README.md"}))
    assert "# changed" in changed.output
    window = await box.run(
        ToolCall("r4", "read_file", {"path": "src/app.py", "offset": 2, "limit": 1})
    )
    assert window.output == "[src/app.py: lines 2-2 of 2]\n2\t    return 1"


async def test_rereading_after_the_earlier_read_was_pruned(root: Path) -> None:
    from agentfsm import LoopParams, RunContext
    from agentfsm.engine.context import current_run

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
    box = workspace_tools(root, permissions=Permissions.of(deny=["read_file(*.md)"]))
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
