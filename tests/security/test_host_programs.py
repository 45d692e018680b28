"""What the agent itself starts outside the sandbox runs nothing the model wrote.

The model writes the workspace; the agent starts a few programs on the host: ``bwrap``
(and ``prlimit``) for every command, and the embedded model's server
(``python -m llama_cpp.server``). A user often runs the agent from the workspace with the
project's virtual environment activated, so ``PATH`` and the working folder hold folders
the model writes. Each attack plants a program or a package there with the path tools (a
first run), then starts what a next run starts; it got through when the planted code ran
(a marker file outside the workspace appeared).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from agentfsm import ToolCall
from agentfsm.adapters.providers._local import LocalModel, LocalModelUnavailable
from agentfsm.adapters.tools import ToolBox, workspace_tools
from agentfsm.sandbox import BubblewrapSandbox, detect_sandbox

from .tally import AttackTally

pytestmark = pytest.mark.usefixtures("bubblewrap")


async def plant(box: ToolBox, path: str, content: str, *, executable: bool = False) -> None:
    """The model writes ``path`` (and makes it executable) through its tools."""
    done = await box.run(ToolCall("w", "write_file", {"path": path, "content": content}))
    assert done.error is None, done.error
    if executable:
        done = await box.run(ToolCall("c", "shell", {"command": f"chmod +x {path}"}))
        assert done.error is None, done.error


async def test_a_bwrap_the_model_puts_on_path_never_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attacks: AttackTally
) -> None:
    """The project's ``.venv/bin`` (and ``node_modules/.bin``) first on ``PATH``: a
    ``bwrap`` and a ``prlimit`` planted there by one run are not what the next run starts."""
    root, marker = tmp_path / "project", tmp_path / "planted-ran"
    root.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    first = workspace_tools(root, sandbox=BubblewrapSandbox(root, toolchains=False))
    # Answers --version as a new bubblewrap would, then runs the command unsandboxed.
    fake = (
        f'#!/bin/sh\necho ran >> {marker}\n[ "$1" = --version ] && echo "bubblewrap 9.0"\nexit 0\n'
    )
    folders = [".venv/bin", "node_modules/.bin"]
    for folder in folders:
        for program in ("bwrap", "prlimit"):
            await plant(first, f"{folder}/{program}", fake, executable=True)
    assert os.access(root / ".venv" / "bin" / "bwrap", os.X_OK)
    path = os.pathsep.join([*(str(root / f) for f in folders), os.environ.get("PATH", "")])
    monkeypatch.setenv("PATH", path)
    for build in (
        lambda: detect_sandbox(root),
        lambda: BubblewrapSandbox(root),
        lambda: workspace_tools(root),  # the best sandbox found here
    ):
        build()
        attacks.record("host program planted by the model", marker.exists(), "build")
    box = workspace_tools(root)
    for command in ("true", "echo hi"):
        done = await box.run(ToolCall("c", "shell", {"command": f"{command} && echo ran"}))
        attacks.record("host program planted by the model", marker.exists(), command)
        assert "ran" in done.output, done.error
    sandbox = detect_sandbox(root)
    assert isinstance(sandbox, BubblewrapSandbox)
    assert not Path(sandbox.bwrap).is_relative_to(root)
    assert sandbox.prlimit is None or not Path(sandbox.prlimit).is_relative_to(root)


async def test_the_local_model_server_imports_nothing_from_the_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attacks: AttackTally
) -> None:
    """``python -m llama_cpp.server`` started from the workspace: a ``llama_cpp`` package
    the model wrote there is not imported; the installed one runs (a stand-in here, which
    leaves a marker of its own and exits)."""
    root, marker, real = tmp_path / "project", tmp_path / "planted-ran", tmp_path / "site"
    root.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    installed = tmp_path / "installed-ran"
    for name, text in (
        ("llama_cpp/__init__.py", ""),
        ("llama_cpp/server/__init__.py", ""),
        ("llama_cpp/server/__main__.py", f"open({str(installed)!r}, 'w').write('x')\n"),
    ):
        (real / name).parent.mkdir(parents=True, exist_ok=True)
        (real / name).write_text(text, "utf-8")
    monkeypatch.syspath_prepend(str(real))
    monkeypatch.setenv("PYTHONPATH", str(real))
    box = workspace_tools(root, sandbox=BubblewrapSandbox(root, toolchains=False))
    planted = f"open({str(marker)!r}, 'w').write('x')\n"
    for name in ("llama_cpp/__init__.py", "llama_cpp/server/__init__.py"):
        await plant(box, name, planted)
    await plant(box, "llama_cpp/server/__main__.py", planted)
    monkeypatch.chdir(root)
    model = LocalModel(model_path=tmp_path / "none.gguf", startup_timeout=60)
    with pytest.raises(LocalModelUnavailable, match="exited"):
        async with model:
            pass
    await asyncio.sleep(0)
    attacks.record("host program planted by the model", marker.exists(), "llama_cpp in cwd")
    assert installed.exists()  # the installed server was the one started
