"""The curated public API: names are a contract."""

from __future__ import annotations

import ast
import importlib
import pkgutil
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
