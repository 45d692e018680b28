"""The front door: :class:`Agent`, its lifecycle hooks and the frozen session preamble."""

from ._agent import DEFAULT_MAX_TURNS, Agent
from ._hooks import Hooks, PromptSubmit, RunStop, SessionStart
from ._preamble import PreambleProvider, WorkspacePreamble, is_preamble_message, preamble_message

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
