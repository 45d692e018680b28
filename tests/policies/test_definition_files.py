"""What the verify gate fingerprints: the files a check's build tool reads."""

from __future__ import annotations

import json
import os
from pathlib import Path

from agentfsm import AgentEmitter, LoopParams, UserMessage, run_conversation
from agentfsm.engine._messages import ToolResult, ToolSpec
from agentfsm.policies import verify
from agentfsm.policies._definition_files import UNREADABLE, command_files, command_tools
from agentfsm.policies._verify import VerifyDefinition, resolve_verify_definition
from agentfsm.sandbox._process import Unsandboxed
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply


def _files(root: Path, command: str) -> dict[str, str | None]:
    files, unpinned = command_files(root, command)
    assert unpinned == ()
    return dict(files)


def test_the_tools_a_command_line_starts() -> None:
    assert command_tools("ruff check . && make -C sub check") == [
        ("make", "", ["-C", "sub", "check"])
    ]
    assert command_tools("CI=1 env time npm run check | tee log; cd web && /usr/bin/pnpm test") == [
        ("node", "", ["run", "check"]),
        ("node", "web", ["test"]),
    ]
    assert command_tools("cd $HOME && poe check\nhatch run x") == [
        ("poe", None, ["check"]),
        ("hatch", None, ["run", "x"]),
    ]
    assert command_tools("pytest -q; echo make") == []
    assert command_tools("echo 'unclosed && make") == [("make", "", [])]  # word by word


def test_make_reads_every_make_file_name_and_its_includes(tmp_path: Path) -> None:
    (tmp_path / "Makefile").write_text(
        "SRCS := $(wildcard src/*.c)\n"
        "DIR = mk\n"
        "-include local.mk \\\n  $(SRCS:.c=.d)\n"
        "include $(DIR)/a.mk  # the rules\n"
        "sinclude $(patsubst %.c,%.dep,$(SRCS))\n"
        "check:\n\t$(MAKE) -C sub check\n",
        "utf-8",
    )
    (tmp_path / "mk").mkdir()
    (tmp_path / "mk" / "a.mk").write_text("include mk/b.mk\n", "utf-8")
    (tmp_path / "mk" / "b.mk").write_text("", "utf-8")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "x.c").write_text("", "utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "makefile").write_text("include ../common.mk\n", "utf-8")
    files = _files(tmp_path, "make check")
    assert sorted(files) == [
        "GNUmakefile",
        "Makefile",
        "common.mk",  # sub/../common.mk: includes are read from make's folder
        "local.mk",
        "makefile",
        "mk/a.mk",
        "mk/b.mk",
        "src/x.d",
        "src/x.dep",
        "sub/GNUmakefile",
        "sub/Makefile",
        "sub/makefile",
    ]
    absent = {k for k, v in files.items() if v is None}
    assert absent == {
        "GNUmakefile",
        "makefile",
        "local.mk",
        "common.mk",
        "src/x.d",
        "src/x.dep",
        "sub/GNUmakefile",
        "sub/Makefile",
    }


def test_a_symlink_or_a_fifo_is_unreadable_not_absent(tmp_path: Path) -> None:
    (tmp_path / "real.mk").write_text("check:\n\ttrue\n", "utf-8")
    (tmp_path / "GNUmakefile").symlink_to("real.mk")
    os.mkfifo(tmp_path / "makefile")
    files, unpinned = command_files(tmp_path, "make check")
    states = dict(files)
    assert states["GNUmakefile"] == states["makefile"] == UNREADABLE
    assert states["Makefile"] is None
    assert unpinned == ("GNUmakefile (not a regular file)",)  # make would read it


def test_what_cannot_be_expanded_is_unpinned(tmp_path: Path) -> None:
    (tmp_path / "Makefile").write_text(
        "-include $(shell ls *.mk)\ninclude $(UNDEFINED)\nV != echo x.mk\ninclude $(V)\n"
        "check:\n\tfor d in a b; do $(MAKE) -C $$d; done\n",
        "utf-8",
    )
    _, unpinned = command_files(tmp_path, "make check")
    assert unpinned == (
        "-include $(shell ls *.mk) (in Makefile)",
        "include $(UNDEFINED) (in Makefile)",
        "include $(V) (in Makefile)",
        "$(MAKE) -C $$d (in Makefile)",
    )


def test_an_include_loop_ends(tmp_path: Path) -> None:
    (tmp_path / "Makefile").write_text("include a.mk\n", "utf-8")
    (tmp_path / "a.mk").write_text("include Makefile a.mk\n", "utf-8")
    assert sorted(_files(tmp_path, "make")) == ["GNUmakefile", "Makefile", "a.mk", "makefile"]


def test_node_and_python_definitions(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"check": "tsc"}}), "utf-8")
    (tmp_path / ".yarnrc.yml").write_text("yarnPath: .yarn/releases/yarn.cjs\n", "utf-8")
    node = _files(tmp_path, "yarn run check")
    assert {".npmrc", ".yarnrc.yml", ".yarn/releases/yarn.cjs", "pnpm-lock.yaml"} <= set(node)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.poe]\ninclude = "tasks.toml"\nenvfile = ".env"\n[tool.poe.tasks]\ncheck = "x"\n',
        "utf-8",
    )
    python = _files(tmp_path, "poe check")
    assert sorted(python) == [
        ".env",
        "poe_tasks.json",
        "poe_tasks.toml",
        "poe_tasks.yaml",
        "pyproject.toml",
        "tasks.toml",
    ]


def test_changes_outside_the_definition_do_not_count(tmp_path: Path) -> None:
    package = {"name": "x", "scripts": {"check": "tsc"}, "dependencies": {}}
    (tmp_path / "package.json").write_text(json.dumps(package), "utf-8")
    (tmp_path / "yarn.lock").write_text("a", "utf-8")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.pdm.scripts]\nc = "y"\n')
    before = command_files(tmp_path, "yarn run check; pdm run c")
    package["dependencies"] = {"left-pad": "1"}
    (tmp_path / "package.json").write_text(json.dumps(package), "utf-8")
    (tmp_path / "yarn.lock").write_text(
        "b", "utf-8"
    )  # installing changes it: only its presence counts
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["attrs"]\n[tool.pdm.scripts]\nc = "y"\n'
    )
    assert command_files(tmp_path, "yarn run check; pdm run c") == before


def test_a_gnumakefile_shadows_the_makefile(tmp_path: Path) -> None:
    (tmp_path / "Makefile").write_text("check:\n\ttrue\n", "utf-8")
    found = resolve_verify_definition(tmp_path, "check")
    assert found is not None
    assert found.source == "Makefile"
    assert dict(found.files)["GNUmakefile"] is None
    assert found.unpinned == ()
    (tmp_path / "GNUmakefile").write_text("other:\n\ttrue\n", "utf-8")
    assert resolve_verify_definition(tmp_path, "check") is None  # make reads GNUmakefile now
    (tmp_path / "GNUmakefile").write_text("check:\n\ttrue\n", "utf-8")
    found = resolve_verify_definition(tmp_path, "check")
    assert found is not None
    assert (found.command, found.source) == ("make check", "GNUmakefile")


def test_an_explicit_command_without_a_build_tool_reads_nothing(tmp_path: Path) -> None:
    gate = verify("pytest -q", workspace=tmp_path)
    assert gate.definition() == VerifyDefinition("pytest -q")


async def test_an_unrelated_edit_still_runs_the_check(tmp_path: Path) -> None:
    """A pinned definition that did not change: the check runs (and an added dependency
    is not a change)."""
    marker = tmp_path / "checked"
    package = {"scripts": {"check": f"touch {marker}"}, "dependencies": {}}
    (tmp_path / "package.json").write_text(json.dumps(package), "utf-8")

    def add_dependency() -> ToolResult:
        package["dependencies"] = {"left-pad": "1"}
        (tmp_path / "package.json").write_text(json.dumps(package), "utf-8")
        return ToolResult(True, "added", metadata={"path": "package.json"})

    notes: list[object] = []
    emitter = AgentEmitter()
    emitter.on("policy_note", notes.append)
    outcome = await run_conversation(
        ScriptedChat([tool_reply(("add", {})), "done"]),
        ScriptedTools({"add": add_dependency}, specs=[ToolSpec("add", "Add.", destructive=True)]),
        [UserMessage("add left-pad")],
        LoopParams(max_turns=4),
        policies=[verify(workspace=tmp_path, sandbox=Unsandboxed())],
        emitter=emitter,
    )
    assert outcome.stopped_reason == "final"
    assert marker.exists()
    assert len(notes) == 1
