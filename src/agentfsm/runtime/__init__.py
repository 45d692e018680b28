"""The front door: :class:`Engine`, its hooks and frozen session context."""

from .context import ContextProvider, WorkspaceContext, context_message, is_context_message
from .engine import DEFAULT_MAX_TURNS, Engine
from .hooks import Hooks, PromptSubmit, RunStop, SessionStart

__all__ = [
    "DEFAULT_MAX_TURNS",
    "ContextProvider",
    "Engine",
    "Hooks",
    "PromptSubmit",
    "RunStop",
    "SessionStart",
    "WorkspaceContext",
    "context_message",
    "is_context_message",
]
