"""Deprecated: the front door moved to :mod:`agentfsm.agent` (``Engine`` is now ``Agent``).

Every name that was here still resolves, with an ``AgentfsmDeprecationWarning``.
"""

from typing import Any as _Any

from agentfsm._deprecated import warn_renamed as _warn_renamed

__all__: list[str] = []

_RENAMED = {
    "Engine": "Agent",
    "ContextProvider": "PreambleProvider",
    "WorkspaceContext": "WorkspacePreamble",
    "context_message": "preamble_message",
    "is_context_message": "is_preamble_message",
    "DEFAULT_MAX_TURNS": "DEFAULT_MAX_TURNS",
    "Hooks": "Hooks",
    "PromptSubmit": "PromptSubmit",
    "RunStop": "RunStop",
    "SessionStart": "SessionStart",
}


def __getattr__(name: str) -> _Any:
    new = _RENAMED.get(name)
    if new is None:
        raise AttributeError(f"module 'agentfsm.runtime' has no attribute {name!r}")
    import agentfsm.agent as agent

    _warn_renamed(f"agentfsm.runtime.{name}", f"agentfsm.agent.{new}")
    return getattr(agent, new)
