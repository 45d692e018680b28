"""One glob translator: path globs (the glob tool, .gitignore) and rule patterns."""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path
from typing import Any

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

import agentfsm
from agentfsm.adapters.tools._globs import rule_matches, segment_regex
from agentfsm.adapters.tools._search import GlobPattern
from agentfsm.agent._preamble import GitIgnore

SRC = Path(agentfsm.__file__).parent


def _compiled(regex: str) -> Any:
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(regex.encode("utf-8", "surrogatepass"), options)
    except re2.error:
        return None


@settings(max_examples=400, deadline=None)
@given(
    st.text(alphabet="ab-]![*?z0é\u2028", max_size=8),
    st.lists(st.text(alphabet="ab-]![*?z0é\u2028A^", max_size=6), min_size=1, max_size=8),
)
def test_a_path_glob_part_matches_as_fnmatch_does_within_a_folder_name(
    pattern: str, names: list[str]
) -> None:
    """Within one folder name (no ``/``, no ``^`` negation, no ``\\``) the translation
    agrees with :func:`fnmatch.fnmatchcase`; a reversed range is refused, not dropped."""
    regex = _compiled(segment_regex(pattern))
    if regex is None:
        return
    for name in names:
        got = regex.fullmatch(name.encode("utf-8")) is not None
        assert got == fnmatch.fnmatchcase(name, pattern), (pattern, name)


def test_a_negated_class_that_starts_with_a_dash_excludes_only_its_members() -> None:
    glob = GlobPattern("[!-a]x")
    assert glob.match(("0x",))
    assert glob.match(("Zx",))
    assert not glob.match(("-x",))
    assert not glob.match(("ax",))
    assert not glob.match(("/x",))


def test_path_globs_stay_in_their_folder_and_rule_patterns_do_not() -> None:
    assert GlobPattern("*.py").match(("a.py",))
    assert not GlobPattern("*.py").match(("src", "a.py"))
    assert GlobPattern("**/*.py").match(("src", "a.py"))
    assert rule_matches("src/a.py", "*.py")
    assert rule_matches(".git/hooks/pre-commit", ".git/**")
    assert rule_matches(".git/config", ".git/*")
    assert not rule_matches("src/.git", ".git/*")


def test_gitignore_rules_read_backslash_as_an_escape() -> None:
    ignore = GitIgnore("\\*.log\n[!-a]\nb\\[1]\n")
    assert ignore.decide("*.log", is_dir=False) is True
    assert ignore.decide("x.log", is_dir=False) is None
    assert ignore.decide("Z", is_dir=False) is True
    assert ignore.decide("a", is_dir=False) is None
    assert ignore.decide("b[1]", is_dir=False) is True


def test_no_other_module_translates_or_matches_globs() -> None:
    found = []
    for path in SRC.rglob("*.py"):
        if path.name == "_globs.py":
            continue
        text = path.read_text("utf-8")
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "fnmatch" for a in node.names):
                found.append(f"{path.name}: import fnmatch")
            if isinstance(node, ast.ImportFrom) and node.module == "fnmatch":
                found.append(f"{path.name}: from fnmatch")
            if isinstance(node, ast.Constant) and node.value in ("[^/]*", "[^/]"):
                found.append(f"{path.name}: {node.value}")
    assert found == []


def test_a_lone_surrogate_outside_a_class_is_refused_as_a_value_error() -> None:
    with pytest.raises(ValueError, match="surrogates"):
        GlobPattern("a\ud800*")
