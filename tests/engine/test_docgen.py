"""docs/engine.md's tables are generated from the code and kept current."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import get_args

import pytest

from agentfsm.engine._events import EventType
from agentfsm.engine._machine import GUARD_NAMES, AgentLoopMachine

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "engine.md"


def _script() -> ModuleType:
    """scripts/docgen.py as a module (a build tool, not part of the package)."""
    name = "agentfsm_scripts_docgen"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "docgen.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses resolve their annotations through it
        spec.loader.exec_module(module)
    return sys.modules[name]


docgen = _script()
main = docgen.main
STALE = "docs/engine.md is stale: run `make diagrams` and commit"


def section(name: str) -> str:
    match = re.search(
        rf"<!-- BEGIN GENERATED: {name} -->\n(.*?)<!-- END GENERATED: {name} -->",
        PAGE.read_text("utf-8"),
        re.S,
    )
    assert match is not None, f"docs/engine.md has no generated {name} section"
    return match.group(1)


def test_engine_page_is_current() -> None:
    text = PAGE.read_text("utf-8")
    assert docgen.update_markdown(text, docgen.render_sections()) == text, STALE


def test_every_state_and_transition_is_in_the_page() -> None:
    states, transitions = section("states"), section("transitions")
    for state in AgentLoopMachine.states:
        assert f"| `{state.id}` |" in states, STALE
        kind = "final" if state.final else "initial" if state.initial else ""
        assert f"| `{state.id}` | {kind} |" in states, STALE
    rows = docgen.transition_docs()
    assert len(rows) == transitions.count("\n") - 2, STALE
    for row in rows:
        assert f"| `{row.source}` | `{row.event}` |" in transitions, STALE


def test_every_guard_is_in_the_page() -> None:
    assert set(docgen.guard_names()) == set(GUARD_NAMES)
    guards = section("guards")
    for name in GUARD_NAMES:
        assert f"| `{name}` |" in guards, STALE


def test_every_event_type_is_in_the_page() -> None:
    documented = [e.type for e in docgen.event_docs()]
    assert sorted(documented) == sorted(get_args(EventType))
    events = section("events")
    for event_type in get_args(EventType):
        assert f"| `{event_type}` |" in events, STALE


def test_every_effect_method_has_a_docstring() -> None:
    for state in AgentLoopMachine.states:
        assert docgen.effect_doc(state.id), state.id


def fake_runner(undocumented: str) -> type[object]:
    """A runner class with one effect method per state, all documented but one."""

    def effect(doc: str | None) -> object:
        def method(self: object) -> None:
            return None

        method.__doc__ = doc
        return method

    methods = {
        f"_{state.id}": effect(None if state.id == undocumented else f"Do {state.id}.")
        for state in AgentLoopMachine.states
    }
    return type("Runner", (), methods)


def test_an_effect_without_a_docstring_fails_loudly() -> None:
    assert "| Do final. |" in docgen.render_states(runner=fake_runner(""))
    with pytest.raises(docgen.DocgenError, match=r"Runner\._final has no docstring"):
        docgen.render_states(runner=fake_runner("final"))


def test_a_state_without_an_effect_method_fails_loudly() -> None:
    class Runner:
        pass

    with pytest.raises(docgen.DocgenError, match="has no method _turn_start"):
        docgen.render_states(runner=Runner)


def test_guard_and_event_docstrings_are_required() -> None:
    with pytest.raises(docgen.DocgenError, match="X has no docstring"):
        docgen.first_paragraph(None, "X")
    assert docgen.first_paragraph("One\n    line.\n\n    More.", "X") == "One line."


def test_markers_are_checked() -> None:
    sections = {"a": "| x |"}
    page = "intro\n<!-- BEGIN GENERATED: a -->\nold\n<!-- END GENERATED: a -->\nend\n"
    assert docgen.update_markdown(page, sections) == page.replace("old", "| x |")
    with pytest.raises(docgen.DocgenError, match="exactly one"):
        docgen.update_markdown("no markers\n", sections)
    with pytest.raises(docgen.DocgenError, match="unmatched"):
        docgen.update_markdown("<!-- BEGIN GENERATED: a -->\nold\n", sections)
    with pytest.raises(docgen.DocgenError, match="nobody renders"):
        docgen.update_markdown(
            page + "<!-- BEGIN GENERATED: b -->\n<!-- END GENERATED: b -->\n", sections
        )


def test_docs_command_rewrites_and_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "engine.md"
    shutil.copy(PAGE, page)
    text = page.read_text("utf-8")
    stale = re.sub(
        r"(<!-- BEGIN GENERATED: events -->\n).*?(<!-- END GENERATED: events -->)",
        r"\1\2",
        text,
        flags=re.S,
    )
    page.write_text(stale, "utf-8")
    assert main(["docs", "--check", str(page)]) == 1
    assert "run `make diagrams`" in capsys.readouterr().err
    assert page.read_text("utf-8") == stale
    assert main(["docs", str(page)]) == 0
    assert page.read_text("utf-8") == docgen.update_markdown(text, docgen.render_sections())
    assert main(["docs", "--check", str(page)]) == 0


def test_source_points_to_pages_that_exist() -> None:
    root = PAGE.parents[1]
    for path in (root / "src").rglob("*.py"):
        for page in re.findall(r"\bdocs/[\w/.-]+\.md", path.read_text("utf-8")):
            assert (root / page).is_file(), f"{path.relative_to(root)} points to missing {page}"
