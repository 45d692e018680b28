"""Deprecated: the front door moved to :mod:`agentfsm.agent` (``Engine`` is now ``Agent``).

Every name that was here still resolves, with an ``AgentfsmDeprecationWarning``.
"""

from collections.abc import Callable as _Callable

from agentfsm._deprecated import deprecated_getattr as _deprecated_getattr

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


def _loader(new: str) -> _Callable[[], object]:
    def load() -> object:
        import agentfsm.agent as agent

        return getattr(agent, new)

    return load


__getattr__ = _deprecated_getattr(
    __name__,
    {old: (f"agentfsm.agent.{new}", _loader(new)) for old, new in _RENAMED.items()},
)
