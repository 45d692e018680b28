"""The curated public API: names are a contract."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import types
from pathlib import Path

import agentfsm

CONTRACT = {
    "SystemMessage",
    "UserMessage",
    "AssistantMessage",
    "ToolMessage",
    "Message",
    "ToolCall",
    "ToolSpec",
    "ToolResult",
    "Usage",
    "ChatResult",
    "LoopParams",
    "LoopOutcome",
    "AgentEmitter",
    "AbortController",
    "run_conversation",
}
SRC = Path(agentfsm.__file__).parent


def test_all_is_sorted_and_complete() -> None:
    assert agentfsm.__all__ == sorted(agentfsm.__all__)
    assert len(set(agentfsm.__all__)) == len(agentfsm.__all__)
    for name in agentfsm.__all__:
        assert getattr(agentfsm, name) is not None, name
    assert set(agentfsm.__all__) >= CONTRACT
    public = {
        name
        for name, value in vars(agentfsm).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(agentfsm.__all__)


def test_every_module_declares_all_and_exports_exist() -> None:
    for info in pkgutil.walk_packages([str(SRC)], prefix="agentfsm."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        assert hasattr(module, "__all__"), info.name
        for name in module.__all__:
            assert hasattr(module, name), f"{info.name}.{name}"


def test_engine_imports_neither_policies_nor_adapters() -> None:
    for path in (SRC / "engine").rglob("*.py"):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                assert not module.startswith(("agentfsm.policies", "agentfsm.adapters")), path
                if node.level > 0:
                    assert not module.startswith(("policies", "adapters")), path
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith(("agentfsm.policies", "agentfsm.adapters"))


def test_modules_stay_small() -> None:
    for path in SRC.rglob("*.py"):
        lines = len(path.read_text("utf-8").splitlines())
        assert lines < 600, f"{path} has {lines} lines: split it"


LAYERS = {
    "sandbox": {"sandbox"},
    "engine": {"sandbox", "engine"},
    "policies": {"sandbox", "engine", "policies"},
    "adapters": {"sandbox", "engine", "adapters"},
    "agent": {"sandbox", "engine", "adapters", "agent"},
    "testing": {"sandbox", "engine", "adapters", "agent", "testing"},
    "conformance": {"sandbox", "engine", "adapters", "testing", "conformance"},
}
"""What each part may import; ``cli`` sits on top of all.
``sandbox`` (the OS sandbox and the process runner) is a leaf: it imports no other part."""


def _imported_parts(path: Path) -> set[str]:
    package = path.relative_to(SRC).parts
    parts: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - node.level])
                names.append(".".join(["agentfsm", *base, *(node.module or "").split(".")]))
            else:
                names.append(node.module or "")
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        for name in names:
            pieces = name.strip(".").split(".")
            if pieces[0] == "agentfsm" and len(pieces) > 1 and pieces[1]:
                parts.add(pieces[1])
    return parts


def test_each_part_imports_only_the_layers_below_it() -> None:
    checked = 0
    for part, allowed in LAYERS.items():
        for path in (SRC / part).rglob("*.py"):
            extra = _imported_parts(path) - allowed
            assert not extra, f"{path.relative_to(SRC)} imports {sorted(extra)}"
            checked += 1
    assert checked > 100


def test_every_part_has_a_layer() -> None:
    parts = {path.name for path in SRC.iterdir() if (path / "__init__.py").is_file()}
    assert parts - {"cli"} == set(LAYERS)


def test_the_sandbox_package_is_a_leaf() -> None:
    """The OS sandbox imports no other part, so every layer may use it (and none of its
    modules is left behind in ``engine``)."""
    paths = list((SRC / "sandbox").rglob("*.py"))
    assert len(paths) >= 6
    for path in paths:
        assert _imported_parts(path) <= {"sandbox"}, path
    for gone in ("sandbox", "process", "seccomp", "limits", "install_paths"):
        assert not (SRC / "engine" / f"_{gone}.py").exists(), gone


def _packages() -> list[str]:
    names = ["agentfsm"]
    for info in pkgutil.walk_packages([str(SRC)], prefix="agentfsm."):
        if info.ispkg:
            names.append(info.name)
    return names


def test_every_package_all_lists_exactly_its_public_names() -> None:
    """httpx's rule (tests/test_exported_members.py), for every package: ``__all__`` is
    sorted and names every public, non-module attribute of the package, and nothing else."""
    for name in _packages():
        package = importlib.import_module(name)
        exported = [
            e for e in package.__all__ if not isinstance(getattr(package, e), types.ModuleType)
        ]
        assert package.__all__ == sorted(package.__all__), f"{name}.__all__ is not sorted"
        public = {
            attr
            for attr, value in vars(package).items()
            if not attr.startswith("_") and not isinstance(value, types.ModuleType)
        }
        # Names a package loads lazily (its module __getattr__) are listed too.
        lazy = {e for e in exported if e not in vars(package) and "__getattr__" in vars(package)}
        public |= lazy
        assert set(exported) == public, f"{name}: {sorted(set(exported) ^ public)}"


def test_the_names_a_newcomer_looks_for_are_at_the_top() -> None:
    for name in (
        "Agent",
        "Policy",
        "PolicyError",
        "Stop",
        "Warn",
        "Remind",
        "Retry",
        "ToolOutcome",
        "ChatDelta",
        "render_diagram",
        "render_run",
        "TurnGate",
        "FinalGate",
        "Compressor",
        "RequestShaper",
        "ReplyShaper",
        "LlmObserver",
        "ToolObserver",
        "TurnObserver",
        "OutcomeShaper",
        "WorkspacePreamble",
    ):
        assert name in agentfsm.__all__, name


def test_the_architecture_page_matches_the_tree() -> None:
    """docs/architecture.md's package table lists every part with the parts it may import
    (the layers above), and nothing that is not in the tree."""
    page = (SRC.parents[1] / "docs" / "architecture.md").read_text("utf-8")
    rows = re.findall(r"^\| `agentfsm\.(\w+)`\s*\|[^|]*\|([^|]*)\|", page, re.MULTILINE)
    listed = {part: set(re.findall(r"`(\w+)`", imports)) for part, imports in rows}
    parts = {path.name for path in SRC.iterdir() if (path / "__init__.py").is_file()}
    assert set(listed) == parts
    for part, imports in listed.items():
        if part != "cli":
            assert imports == LAYERS[part] - {part}, part
    print(f"architecture page: {len(listed)} packages checked against the tree")
