#!/usr/bin/env python3
"""Regenerate the README's picture of a run (``make diagrams`` runs this).

    python scripts/run_picture.py [OUT.png] [--html OUT.html]

A scripted run (a small coding task: reads, a failing test command, an edit, a warning and
a reminder, a final answer refused once by a gate) is recorded into a temporary session
folder, pictured with :func:`agentfsm.render_run` and photographed by headless Chromium
(``chromium --headless=new --screenshot``). Without Chromium it says so and exits 0, so
``make diagrams`` works where no browser is installed; the committed PNG stays as it is.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentfsm import (
    Agent,
    AssistantMessage,
    ChatResult,
    Remind,
    Retry,
    ToolCall,
    ToolResult,
    Usage,
    Warn,
    render_run,
)
from agentfsm.testing import ScriptedChat, ScriptedTools

SIZE = (1400, 860)


class TestsFirst:
    """Refuses the first final answer: the tests have not run since the edit."""

    refused = False

    def check_final(self, ctx: Any) -> Retry | None:
        if self.refused:
            return None
        self.refused = True
        return Retry("run the tests before you finish")


class Pace:
    """Warns once on turn 4 that the run reads more than it edits."""

    def check_turn(self, ctx: Any) -> Any:
        if ctx.turn == 4:
            return [Warn("four reads, no edit yet", code="read_loop"), Remind("edit the file")]
        return None


def _reply(text: str, *calls: tuple[str, dict[str, Any]], tokens: int = 900) -> ChatResult:
    tool_calls = tuple(
        ToolCall(f"c{tokens}{i}", name, args) for i, (name, args) in enumerate(calls)
    )
    return ChatResult(AssistantMessage(text, tool_calls), Usage(tokens, 60))


async def record(folder: Path) -> Path:
    chat = ScriptedChat(
        [
            _reply(
                "Let me look at the failing test.", ("read_file", {"path": "tests/test_calc.py"})
            ),
            _reply("", ("run_shell", {"command": "pytest -q"}), tokens=1400),
            _reply(
                "",
                ("read_file", {"path": "calc.py"}),
                ("grep", {"pattern": "def add"}),
                tokens=2100,
            ),
            _reply("Fixing the sign.", ("edit_file", {"path": "calc.py"}), tokens=2600),
            _reply("Fixed: add() returned a - b.", tokens=2900),
            _reply("", ("run_shell", {"command": "pytest -q"}), tokens=3100),
            _reply("Fixed add(); the 12 tests pass.", tokens=3300),
        ]
    )
    runs = {"n": 0}

    def shell(command: str) -> ToolResult:
        runs["n"] += 1
        if runs["n"] == 1:
            return ToolResult(False, "F.. 1 failed: test_add <script>alert(1)</script>", "exit 1")
        return ToolResult(True, "12 passed")

    tools = ScriptedTools(
        {
            "read_file": lambda path: f"# {path}\ndef add(a, b):\n    return a - b\n",
            "grep": lambda pattern: "calc.py:1:def add(a, b):",
            "edit_file": lambda path: "1 edit",
            "run_shell": shell,
        }
    )
    agent = Agent(chat, tools, policies=[TestsFirst(), Pace()], session_dir=folder)
    outcome = await agent.run("The test test_add fails. Fix calc.py.")
    return Path(str(outcome.session_path))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", nargs="?", default="docs/images/run.png")
    parser.add_argument("--html", help="also keep the HTML page there")
    args = parser.parse_args(argv)
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("run picture: skipped (no chromium here; Debian: apt-get install chromium)")
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        session = asyncio.run(record(folder / "sessions"))
        # A fixed name: the picture shows the session's id, so a timestamped one would make
        # every regeneration a different image.
        session = session.rename(session.with_name("example-session.jsonl"))
        page = Path(args.html) if args.html else folder / "run.html"
        render_run(session, page)
        out = Path(args.out).resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        command = [browser, "--headless=new", "--disable-gpu", "--hide-scrollbars"]
        if os.geteuid() == 0:
            command.append("--no-sandbox")  # Chromium's own sandbox refuses to run as root
        command += [
            f"--user-data-dir={folder / 'profile'}",
            f"--window-size={SIZE[0]},{SIZE[1]}",
            "--force-device-scale-factor=1",
            f"--screenshot={out}",
            page.resolve().as_uri(),
        ]
        subprocess.run(command, check=True, capture_output=True, timeout=120)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
