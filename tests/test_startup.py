"""A fast start: what ``import agentfsm`` and ``agentfsm --help`` load, in a fresh interpreter.

Heavy dependencies load when first used. Each check runs a new Python process (this test
process has imported everything already) and reads ``sys.modules`` as that process exits.
No timings here: ``benchmarks/startup.py`` measures them (``make bench``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import agentfsm

SOURCE_ROOT = str(Path(agentfsm.__file__).resolve().parents[1])
HEAVY = ("bashlex", "dbos", "opentelemetry", "rich", "pydantic", "httpx")
SETTINGS_SCHEMA = "agentfsm.adapters.tools._settings_schema"
MARK = "MODULES:"

# Runs ``code``, then prints the modules loaded at exit (after everything it printed).
PROLOGUE = (
    "import atexit, json, sys\n"
    f"atexit.register(lambda: print({MARK!r} + json.dumps(sorted(sys.modules))))\n"
)


def loaded_by(code: str, tmp_path: Path) -> tuple[set[str], str]:
    """The modules a fresh interpreter has loaded after running ``code``, and its output."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([SOURCE_ROOT, os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", PROLOGUE + code],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # no ./agentfsm of the current folder in the way
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    output, _, modules = done.stdout.rpartition(MARK)
    return set(json.loads(modules)), output


def tops(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_import_agentfsm_loads_no_heavy_dependency(tmp_path: Path) -> None:
    modules, _ = loaded_by("import agentfsm", tmp_path)
    assert "agentfsm" in modules
    assert not tops(modules) & set(HEAVY), sorted(tops(modules) & set(HEAVY))
    assert SETTINGS_SCHEMA not in modules
    # Nothing of the package but itself: every public name is imported when first used.
    assert {m for m in modules if m.startswith("agentfsm")} == {
        "agentfsm",
        "agentfsm._version",
    }


def test_a_public_name_loads_its_module_on_first_use(tmp_path: Path) -> None:
    modules, output = loaded_by(
        "import agentfsm\nprint(agentfsm.Agent.__module__, agentfsm.render_diagram.__module__)",
        tmp_path,
    )
    assert output.split() == ["agentfsm.agent._agent", "agentfsm.cli._diagram_cmd"]
    assert "agentfsm.agent._agent" in modules


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"]])
def test_help_imports_no_command(argv: list[str], tmp_path: Path) -> None:
    modules, output = loaded_by(
        f"sys.argv = ['agentfsm', *{argv!r}]\n"
        "from agentfsm.cli import main\n"
        "raise SystemExit(main())",
        tmp_path,
    )
    assert "usage: agentfsm" in output
    if argv[0] == "run":
        assert "--max-turns" in output
        assert "--trust-workspace-settings" in output
    ours = {m for m in modules if m.startswith("agentfsm")}
    assert ours == {
        "agentfsm",
        "agentfsm._version",
        "agentfsm.cli",
        "agentfsm.cli._app",
        "agentfsm.cli._parser",
    }
    assert not tops(modules) & {*HEAVY, "asyncio", "attrs", "cattrs", "statemachine"}


def test_building_an_agent_loads_neither_bashlex_nor_telemetry(tmp_path: Path) -> None:
    modules, _ = loaded_by(
        "from agentfsm import Agent, run_conversation\n"
        "from agentfsm.adapters.tools import workspace_tools\n"
        "from agentfsm.testing import ScriptedChat\n"
        "Agent(ScriptedChat([]), workspace_tools('.'))",
        tmp_path,
    )
    assert "agentfsm.agent._agent" in modules
    assert not tops(modules) & {"bashlex", "dbos", "opentelemetry", "rich", "httpx"}
    assert SETTINGS_SCHEMA not in modules  # no settings file in the workspace


def test_bashlex_and_the_settings_schema_load_when_used(tmp_path: Path) -> None:
    (tmp_path / ".agentfsm").mkdir()
    (tmp_path / ".agentfsm" / "settings.json").write_text(
        '{"permissions": {"deny": ["shell(rm *)"]}}', "utf-8"
    )
    modules, output = loaded_by(
        "from agentfsm.adapters.tools._settings import load_settings\n"
        "from agentfsm.adapters.tools._shell_rules import parse_command_line\n"
        "print(load_settings('.').permissions.deny[0].pattern)\n"
        "print([c.words for c in parse_command_line('ls -l && rm -rf x').commands])",
        tmp_path,
    )
    assert "bashlex" in modules
    assert SETTINGS_SCHEMA in modules
    assert output.splitlines() == ["rm *", "[('ls', '-l'), ('rm', '-rf', 'x')]"]


def test_the_parser_builds_only_the_command_it_runs_and_parses_alike() -> None:
    from agentfsm.cli._parser import build_parser

    lines = [
        ["run", "--model", "m", "--max-turns", "3", "fix it"],
        ["sessions", "list", "--json"],
        ["sessions", "show", "latest"],
        ["trace", "latest", "--html", "x.html"],
        ["runs", "list", "--all"],
        ["batch", "tasks.jsonl"],
        ["worker"],
        ["diagram", "--format", "dot", "--policies"],
    ]
    for argv in lines:
        assert build_parser(argv).parse_args(argv) == build_parser().parse_args(argv), argv
    partial = build_parser(["run", "--help"])
    subparsers = next(a for a in partial._actions if a.dest == "command")
    choices = subparsers.choices
    assert isinstance(choices, dict)
    assert len(choices["run"]._actions) > 10
    assert [a.dest for a in choices["diagram"]._actions] == ["help"]  # not built
