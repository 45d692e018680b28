"""Every renamed public name keeps working for one release, with a deprecation warning."""

from __future__ import annotations

import importlib
import sys

import pytest

import agentfsm
from agentfsm import Agent, Compressor, WorkspacePreamble
from agentfsm._deprecated import AgentfsmDeprecationWarning
from agentfsm.agent import PreambleProvider, is_preamble_message, preamble_message
from agentfsm.engine._compression import compress_messages
from agentfsm.testing import ScriptedChat

RENAMED = [
    ("agentfsm", "Engine", Agent),
    ("agentfsm", "WorkspaceContext", WorkspacePreamble),
    ("agentfsm.agent", "Engine", Agent),
    ("agentfsm.agent", "ContextProvider", PreambleProvider),
    ("agentfsm.agent", "WorkspaceContext", WorkspacePreamble),
    ("agentfsm.agent", "context_message", preamble_message),
    ("agentfsm.agent", "is_context_message", is_preamble_message),
    ("agentfsm.runtime", "Engine", Agent),
    ("agentfsm.runtime", "WorkspaceContext", WorkspacePreamble),
    ("agentfsm.runtime", "is_context_message", is_preamble_message),
    ("agentfsm.engine", "Compactor", Compressor),
    ("agentfsm.engine.policy", "Compactor", Compressor),
]


@pytest.mark.parametrize(("module", "old", "new"), RENAMED, ids=[f"{m}.{o}" for m, o, _ in RENAMED])
def test_old_name_is_the_new_object_and_warns(module: str, old: str, new: object) -> None:
    with pytest.warns(AgentfsmDeprecationWarning, match=old):
        value = getattr(importlib.import_module(module), old)
    assert value is new


def test_from_import_of_the_old_name_works() -> None:
    with pytest.warns(AgentfsmDeprecationWarning, match=r"agentfsm\.Engine is deprecated"):
        from agentfsm import Engine
    assert Engine is Agent
    assert "Engine" not in agentfsm.__all__


def test_agent_context_keyword_is_the_preamble() -> None:
    class Fixed:
        def render(self) -> str:
            return "facts"

    with pytest.warns(AgentfsmDeprecationWarning, match=r"Agent\(context=\.\.\.\)"):
        agent = Agent(ScriptedChat(["ok"]), context=Fixed())
    assert isinstance(agent.preamble, Fixed)
    outcome = agent.run_sync("hi")
    assert is_preamble_message(outcome.messages[0])


def test_unknown_names_still_raise_attribute_error() -> None:
    for module in ("agentfsm", "agentfsm.agent", "agentfsm.runtime", "agentfsm.engine"):
        with pytest.raises(AttributeError):
            _ = importlib.import_module(module).NoSuchName


def test_an_old_module_path_is_the_private_module_and_warns() -> None:
    sys.modules.pop("agentfsm.engine.compaction", None)
    with pytest.warns(AgentfsmDeprecationWarning, match=r"agentfsm\.engine\.compaction"):
        module = importlib.import_module("agentfsm.engine.compaction")
    assert module.compress_messages is compress_messages
