"""docs/cli.md lists every command of the parser, and every action of those that have some."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from agentfsm.cli._parser import build_parser

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_lines() -> list[str]:
    """Every command and action the parser knows, as a user types it."""
    lines = []
    for name, sub in subcommands(build_parser()).items():
        lines.append(f"agentfsm {name}")
        lines += [f"agentfsm {name} {action}" for action in subcommands(sub)]
    return lines


def test_the_page_lists_every_command() -> None:
    page = PAGE.read_text("utf-8")
    commands = command_lines()
    missing = [c for c in commands if not re.search(rf"`?{re.escape(c)}(?![\w-])", page)]
    assert not missing, f"docs/cli.md does not show {missing}"
    assert "agentfsm fake-server" in commands
    print(f"docs/cli.md: {len(commands)} commands and actions listed")
