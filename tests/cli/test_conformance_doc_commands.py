"""Every ``agentfsm conformance`` command the docs show parses as its command does: the
options, their values and how many each takes are the CLI's, not the page's."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from agentfsm.cli import _conformance_cmd

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```(?:sh|bash|console|shell)\n(.*?)^```", re.M | re.S)
_SPAN = re.compile(r"`(agentfsm conformance [^`]+)`")
_PARSERS = {"": _conformance_cmd._run_parser, "probe": _conformance_cmd._probe_parser}


def shown() -> list[tuple[str, str]]:
    """(page, command line) of each command the docs show, in fenced blocks and whole
    inline (with its ``--base-url``), continuation lines joined, comments dropped."""
    out = []
    for page in PAGES:
        text = page.read_text("utf-8")
        lines = [
            line
            for block in _FENCE.findall(text)
            for line in block.replace("\\\n", " ").splitlines()
        ]
        lines += [" ".join(s.split()) for s in _SPAN.findall(text) if "--base-url" in s]
        for line in lines:
            command = line.split(" #", 1)[0].split("&", 1)[0].strip()
            if command.startswith("agentfsm conformance") and "…" not in command:
                out.append((page.name, command))
    return out


def _args(command: str) -> tuple[str, list[str]]:
    words = shlex.split(command)[2:]
    sub = words[0] if words and not words[0].startswith("-") else ""
    return sub, words[1:] if sub else words


def test_the_docs_show_live_runs_and_probes() -> None:
    subs = {_args(c)[0] for _, c in shown()}
    assert {"", "probe"} <= subs
    print(f"\nconformance command lines in the docs: {len(shown())}")


@pytest.mark.parametrize(("page", "command"), shown())
def test_a_command_the_docs_show_parses(page: str, command: str) -> None:
    sub, words = _args(command)
    if sub not in _PARSERS:
        return  # corpus, matrix, replay-vcr: positional folders and files
    words = [w.replace("PORT", "8080") for w in words]
    try:
        _PARSERS[sub]().parse_args(words)
    except SystemExit as stop:
        pytest.fail(f"{page}: {command!r} does not parse (exit {stop.code})")
