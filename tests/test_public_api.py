"""The curated public API: names are a contract."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
import textwrap
import tomllib
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


def _packages() -> list[str]:
    names = ["agentfsm"]
    for info in pkgutil.walk_packages([str(SRC)], prefix="agentfsm."):
        if info.ispkg:
            names.append(info.name)
    return names


def _imported_from(package: str) -> set[str]:
    """The names modules outside ``package`` import from it (``from package import name``)."""
    names: set[str] = set()
    for path in SRC.rglob("*.py"):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        if module == f"{package}.__init__" or module.startswith(f"{package}."):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == package:
                names.update(alias.name for alias in node.names)
    return names


def _explicit_reexports(package: types.ModuleType) -> set[str]:
    """The names the package's ``__init__`` imports as themselves (``from ._m import x as x``)."""
    path = Path(str(package.__file__))
    return {
        alias.name
        for node in ast.walk(ast.parse(path.read_text("utf-8")))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    }


def test_every_package_all_lists_exactly_its_public_names() -> None:
    """httpx's rule (tests/test_exported_members.py), for every package: ``__all__`` is
    sorted and names every public, non-module attribute of the package, and nothing else,
    but for what the package's door offers the other agentfsm packages only: a name its
    ``__init__`` imports as itself (``from ._text import utf8_bytes as utf8_bytes``) and
    another package imports from it."""
    offered = 0
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
        internal = public - set(exported)
        assert set(exported) <= public, f"{name}: {sorted(set(exported) - public)}"
        unmarked = internal - _explicit_reexports(package)
        assert not unmarked, f"{name}: public names missing from __all__: {sorted(unmarked)}"
        unused = internal - _imported_from(name)
        assert not unused, f"{name}: offered to other packages, imported by none: {sorted(unused)}"
        offered += len(internal)
    print(f"\n{offered} names offered between packages only")


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


def _allowed_imports() -> dict[str, set[str]]:
    """What each part may import, read from the import-linter contracts in pyproject.toml:
    the layers below it, less what a ``forbidden`` contract takes away."""
    config = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text("utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    levels = [[p.strip().removeprefix("agentfsm.") for p in layer.split("|")] for layer in layers]
    allowed: dict[str, set[str]] = {part: set() for level in levels for part in level}
    for i, level in enumerate(levels):
        for part in level:
            allowed[part] = {below for lower in levels[i + 1 :] for below in lower}
    for contract in contracts:
        if contract["type"] == "forbidden":
            for source in contract["source_modules"]:
                for gone in contract["forbidden_modules"]:
                    allowed[source.removeprefix("agentfsm.")].discard(
                        gone.removeprefix("agentfsm.")
                    )
    return allowed


def test_the_architecture_page_matches_the_tree_and_the_contracts() -> None:
    """docs/architecture.md's package table lists every part, with the parts it may import
    as the import-linter contracts (``make lint``) hold them, and every part has a layer."""
    page = (SRC.parents[1] / "docs" / "architecture.md").read_text("utf-8")
    rows = re.findall(r"^\| `agentfsm\.(\w+)`\s*\|[^|]*\|([^|]*)\|", page, re.MULTILINE)
    listed = {part: set(re.findall(r"`(\w+)`", imports)) for part, imports in rows}
    parts = {path.name for path in SRC.iterdir() if (path / "__init__.py").is_file()}
    allowed = _allowed_imports()
    assert set(listed) == parts
    assert set(allowed) == parts
    for part, imports in listed.items():
        if part != "cli":
            assert imports == allowed[part], part
    print(f"architecture page: {len(listed)} packages checked against the tree and contracts")


def test_dir_and_help_of_every_package_show_its_public_names() -> None:
    """Packages that load their names lazily (a module ``__getattr__``) list them in
    ``dir()`` too, so ``help()`` and completion show them."""
    lazy = 0
    for name in _packages():
        package = importlib.import_module(name)
        assert set(package.__all__) <= set(dir(package)), name
        if "__getattr__" in vars(package):
            lazy += 1
            assert "__dir__" in vars(package), name
    import pydoc

    for name, shown in (
        ("agentfsm.cli", "render_diagram"),
        ("agentfsm.adapters.telemetry", "Instrumentation"),
        ("agentfsm.conformance", "ProviderConformance"),
        ("agentfsm.conformance", "ALL_CHECKS"),
    ):
        plain = pydoc.plaintext  # type: ignore[attr-defined]
        assert shown in pydoc.render_doc(importlib.import_module(name), renderer=plain)
    print(f"\n{lazy} lazily loading packages list their names in dir()")


def test_the_telemetry_names_say_which_extra_they_need() -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "import agentfsm.adapters.telemetry as t\n"
        "try:\n    t.Instrumentation\nexcept ModuleNotFoundError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "agentfsm.adapters.telemetry.Instrumentation needs the otel extra" in out


_PRIVATE_PATH = re.compile(r"agentfsm(?:\.\w+)*\._\w+")


def _docstrings(obj: object) -> list[str]:
    """The docstrings in ``obj``'s source: its own, its methods', its attributes'."""
    try:
        source = textwrap.dedent(inspect.getsource(obj))  # type: ignore[arg-type]
    except (OSError, TypeError):
        return []
    return [
        node.value.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]


def test_public_docstrings_name_no_private_module() -> None:
    """What ``help()`` shows of a public name points at public names (``agentfsm.ChatFn``,
    not the private module that defines it), or says it in words."""
    found: list[str] = []
    checked = 0
    seen: set[int] = set()
    for name in [*_packages(), "agentfsm.policies.presets"]:
        if any(part.startswith("_") for part in name.split(".")):
            continue
        package = importlib.import_module(name)
        texts = [(name, package.__doc__ or "")]
        for export in package.__all__:
            obj = getattr(package, export)
            if id(obj) in seen or not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            seen.add(id(obj))
            texts += [(f"{name}.{export}", text) for text in _docstrings(obj)]
        checked += len(texts)
        found += [f"{where}: {hit}" for where, text in texts for hit in _PRIVATE_PATH.findall(text)]
    assert found == []
    print(f"\n{checked} public docstrings name no private module")
