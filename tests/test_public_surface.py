"""The public surface is small: implementation modules are private, and each public package
re-exports a curated ``__all__`` (httpx's layout). There is one name for each thing: no old
name, keyword or module path is kept beside it."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "agentfsm"

PUBLIC_PACKAGES = [
    "agentfsm",
    "agentfsm.engine",
    "agentfsm.policies",
    "agentfsm.adapters.providers",
    "agentfsm.adapters.tools",
    "agentfsm.adapters.sessions",
    "agentfsm.adapters.durable",
    "agentfsm.adapters.telemetry",
    "agentfsm.testing",
    "agentfsm.conformance",
]
"""The packages the issue names; ``agent``, ``sandbox`` and ``cli`` follow the same rule."""


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append((".".join(parts), path))
    return found


def _is_public(dotted: str) -> bool:
    return not any(part.startswith("_") for part in dotted.split("."))


def _defined_names(path: Path) -> list[str]:
    """Public names a module defines itself (classes, functions, assignments)."""
    names: list[str] = []
    for node in ast.parse(path.read_text("utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [n for n in names if not n.startswith("_") and n != "TYPE_CHECKING"]


def test_public_names_are_defined_only_in_package_inits() -> None:
    modules = _modules()
    public = [(name, path) for name, path in modules if _is_public(name)]
    offenders = []
    for name, path in public:
        if path.name in ("__init__.py", "__main__.py"):
            continue
        defined = [n for n in _defined_names(path) if n != "__all__"]
        if defined:
            offenders.append(f"{name}: {', '.join(defined)}")
    exported = {}
    for package in [*PUBLIC_PACKAGES, "agentfsm.agent", "agentfsm.sandbox", "agentfsm.cli"]:
        exported[package] = len(importlib.import_module(package).__all__)
    print(
        f"\n{len(modules)} modules, {len(public)} public "
        f"({sum(1 for _, p in public if p.name == '__init__.py')} package __init__s); "
        f"{sum(exported.values())} names in public __all__s: "
        + ", ".join(f"{k} {v}" for k, v in exported.items())
    )
    assert offenders == [], "public modules other than package __init__s define names"


def test_every_public_package_exports_a_curated_all() -> None:
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        names = module.__all__
        assert names == sorted(names, key=str) or package == "agentfsm", package
        for name in names:
            assert not name.startswith("_"), f"{package}.{name}"
            assert getattr(module, name) is not None, f"{package}.{name}"


def test_implementation_modules_are_private() -> None:
    public_files = [
        path.relative_to(SRC).as_posix()
        for name, path in _modules()
        if _is_public(name) and path.name not in ("__init__.py", "__main__.py")
    ]
    # presets: a namespace re-exporting two functions; testing.serve: `python -m` runs it
    assert public_files == ["policies/presets.py", "testing/serve.py"]


def test_the_runtime_package_is_gone() -> None:
    assert not (SRC / "runtime").exists()


OLD_NAMES = {
    "agentfsm": ["Engine", "WorkspaceContext", "AgentfsmDeprecationWarning"],
    "agentfsm.agent": [
        "Engine",
        "ContextProvider",
        "WorkspaceContext",
        "context_message",
        "is_context_message",
    ],
    "agentfsm.engine": ["Compactor", "LoopRunner", "PolicySet", "build_run", "StepperKind"],
    "agentfsm.policies": ["max_turns", "prune_marker", "parse_text_tool_calls"],
    "agentfsm.conformance": ["AdapterTarget", "EndpointTarget"],
    "agentfsm.adapters.sessions": ["iter_session_records", "state_home"],
    "agentfsm.sandbox": ["scrubbed_environ", "PROTECTED_DIR"],
}
"""Names that were renamed or are internal: none is reachable from a public package."""

OLD_MODULE_PATHS = [
    "agentfsm.runtime",
    "agentfsm.engine.machine",
    "agentfsm.engine.runner",
    "agentfsm.engine.compaction",
    "agentfsm.engine.policy",
    "agentfsm.engine.sandbox",
    "agentfsm.engine.process",
    "agentfsm.adapters.tools.sandbox",
    "agentfsm.adapters.providers.openai_chat",
    "agentfsm.conformance.context",
    "agentfsm.conformance.checks.wire",
    "agentfsm.policies.limits",
]


def test_old_names_are_gone() -> None:
    count = 0
    for package, names in OLD_NAMES.items():
        module = importlib.import_module(package)
        for name in names:
            assert name not in module.__all__
            if name in vars(module):  # offered to the other packages through the door only
                continue
            with pytest.raises(AttributeError):
                getattr(module, name)
            with pytest.raises(ImportError):
                exec(f"from {package} import {name}", {})
            count += 1
    print(f"\n{count} old names checked: none resolves")


def test_old_module_paths_do_not_import() -> None:
    for old in OLD_MODULE_PATHS:
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)
    finders = [type(f).__module__ for f in sys.meta_path]
    assert not [f for f in finders if f.startswith("agentfsm")], finders


def test_old_keywords_and_attributes_are_gone() -> None:
    from agentfsm import Agent, RunContext
    from agentfsm.engine._policy import PolicySet
    from agentfsm.policies import presets
    from agentfsm.testing import ScriptedChat

    class Fixed:
        def render(self) -> str:
            return "facts"

    with pytest.raises(TypeError, match="context"):
        Agent(ScriptedChat(["ok"]), context=Fixed())  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="turns"):
        presets.minimal(turns=7)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="turns"):
        presets.coding_agent(turns=7)  # type: ignore[call-arg]
    assert not hasattr(PolicySet(), "compactors")
    assert not hasattr(RunContext, "run_state")


def test_nothing_warns_of_deprecation_in_a_fresh_interpreter() -> None:
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "import agentfsm\n"
        "for name in agentfsm.__all__: getattr(agentfsm, name)\n"
        "print(sorted(m for m in __import__('sys').modules if 'deprecat' in m))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.strip() == "[]"


def test_each_public_name_has_one_home_below_the_top_level() -> None:
    """``agentfsm`` gathers the names a newcomer looks for; below it, a name is exported by
    one package only (the sandbox's names by ``agentfsm.sandbox``, not also by the tools)."""
    homes: dict[str, list[str]] = {}
    for package in [*PUBLIC_PACKAGES[1:], "agentfsm.agent", "agentfsm.sandbox", "agentfsm.cli"]:
        for name in importlib.import_module(package).__all__:
            homes.setdefault(name, []).append(package)
    assert {name: where for name, where in homes.items() if len(where) > 1} == {}
    tools = importlib.import_module("agentfsm.adapters.tools")
    for name in ("BubblewrapSandbox", "detect_sandbox", "Unsandboxed", "ResourceLimits"):
        assert name not in tools.__all__
        assert name in importlib.import_module("agentfsm.sandbox").__all__
    print(f"\n{len(homes)} public names below the top level, each with one home")
