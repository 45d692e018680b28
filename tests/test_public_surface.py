"""The public surface is small: implementation modules are private, and each public package
re-exports a curated ``__all__`` (httpx's layout). Old names keep working through
``agentfsm._deprecated`` only, each with a warning."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from agentfsm import AgentfsmDeprecationWarning
from agentfsm._deprecated import INTERNAL, MOVED_MODULES, RENAMED

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
            with warnings.catch_warnings():
                warnings.simplefilter("error", AgentfsmDeprecationWarning)
                assert getattr(module, name) is not None, f"{package}.{name}"
        internal = set(INTERNAL.get(package, {}))
        assert not internal & set(names), package


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


def test_renamed_names_warn_and_resolve() -> None:
    for old, new in RENAMED.items():
        package, _, name = old.rpartition(".")
        new_package, _, new_name = new.rpartition(".")
        with pytest.warns(AgentfsmDeprecationWarning, match=new.replace(".", r"\.")):
            value = getattr(importlib.import_module(package), name)
        assert value is getattr(importlib.import_module(new_package), new_name), old
    from agentfsm.agent import Agent

    with pytest.warns(AgentfsmDeprecationWarning):
        from agentfsm import Engine
    assert Engine is Agent
    print(f"\n{len(RENAMED)} renamed names resolve")


def test_internal_names_warn_and_resolve() -> None:
    count = 0
    for package, names in INTERNAL.items():
        module = importlib.import_module(package)
        for name, private in names.items():
            if name in vars(module):  # offered to the other packages through the door
                continue
            with pytest.warns(AgentfsmDeprecationWarning, match="internal"):
                value = getattr(module, name)
            assert value is getattr(importlib.import_module(private), name)
            count += 1
    from agentfsm.policies._limits import max_turns

    with pytest.warns(AgentfsmDeprecationWarning):
        from agentfsm.policies import max_turns as old
    assert old is max_turns
    with pytest.warns(AgentfsmDeprecationWarning, match="max_turns"):
        policy = max_turns(3)
    assert policy.turn_budget == 3
    print(f"\n{count} names no longer exported still resolve")


def test_old_module_paths_import_the_private_module_with_a_warning() -> None:
    old_paths = ["agentfsm.engine.machine", "agentfsm.adapters.providers.openai_chat"]
    old_paths += ["agentfsm.conformance.checks.wire", "agentfsm.policies.limits"]
    old_paths += list(MOVED_MODULES)
    for old in old_paths:
        sys.modules.pop(old, None)
        with pytest.warns(AgentfsmDeprecationWarning, match="private now"):
            module = importlib.import_module(old)
        assert module.__name__ != old, old  # the private module itself, not a copy
        assert sys.modules[old] is module
    sys.modules.pop("agentfsm.engine.machine")
    with pytest.warns(AgentfsmDeprecationWarning):
        old_module = importlib.import_module("agentfsm.engine.machine")
    from agentfsm.engine import AgentLoopMachine

    assert old_module.AgentLoopMachine is AgentLoopMachine
    sys.modules.pop("agentfsm.runtime")
    with pytest.warns(AgentfsmDeprecationWarning):
        runtime = importlib.import_module("agentfsm.runtime")
    with pytest.warns(AgentfsmDeprecationWarning):
        assert runtime.Engine is importlib.import_module("agentfsm").Agent
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("agentfsm.engine.no_such_module")


def test_old_module_paths_work_in_a_fresh_interpreter() -> None:
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "try:\n"
        "    from agentfsm.engine.runner import LoopRunner\n"
        "except DeprecationWarning as w: print('warned:', w)\n"
        "warnings.simplefilter('ignore')\n"
        "from agentfsm.engine.runner import LoopRunner\n"
        "print(LoopRunner.__module__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "warned: the module agentfsm.engine.runner is deprecated" in out
    assert out.rstrip().endswith("agentfsm.engine._runner")
