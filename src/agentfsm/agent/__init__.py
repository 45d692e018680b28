"""The front door: :class:`Agent`, its lifecycle hooks and the frozen session preamble."""

from agentfsm._deprecated import deprecated_getattr as _deprecated_getattr

from .agent import DEFAULT_MAX_TURNS, Agent
from .hooks import Hooks, PromptSubmit, RunStop, SessionStart
from .preamble import PreambleProvider, WorkspacePreamble, is_preamble_message, preamble_message

__all__ = [
    "Agent",
    "DEFAULT_MAX_TURNS",
    "Hooks",
    "PreambleProvider",
    "PromptSubmit",
    "RunStop",
    "SessionStart",
    "WorkspacePreamble",
    "is_preamble_message",
    "preamble_message",
]

__getattr__ = _deprecated_getattr(
    __name__,
    {
        "Engine": ("agentfsm.agent.Agent", lambda: Agent),
        "ContextProvider": ("agentfsm.agent.PreambleProvider", lambda: PreambleProvider),
        "WorkspaceContext": ("agentfsm.agent.WorkspacePreamble", lambda: WorkspacePreamble),
        "context_message": ("agentfsm.agent.preamble_message", lambda: preamble_message),
        "is_context_message": ("agentfsm.agent.is_preamble_message", lambda: is_preamble_message),
    },
)
