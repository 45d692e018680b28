"""agentfsm: an LLM agent loop as an explicit, declared state machine with pluggable policies.

The names below are the public API; everything else is reachable through the subpackages
(:mod:`agentfsm.engine`, :mod:`agentfsm.testing`).
"""

from ._deprecated import deprecated_getattr as _deprecated_getattr
from .agent import Agent, Hooks, WorkspacePreamble
from .engine import (
    AbortController,
    AbortError,
    AbortSignal,
    AgentEmitter,
    AgentEvent,
    AgentLoopMachine,
    AssistantMessage,
    ChatFn,
    ChatResult,
    FinalGate,
    LoopOutcome,
    LoopParams,
    Message,
    Retry,
    RunContext,
    Stop,
    StopInfo,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolRunner,
    ToolSpec,
    TurnGate,
    Usage,
    UserMessage,
    converter,
    format_tool_result_content,
    run_conversation,
    seed_system_prompt,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "AbortController",
    "AbortError",
    "AbortSignal",
    "Agent",
    "AgentEmitter",
    "AgentEvent",
    "AgentLoopMachine",
    "AssistantMessage",
    "ChatFn",
    "ChatResult",
    "FinalGate",
    "Hooks",
    "LoopOutcome",
    "LoopParams",
    "Message",
    "Retry",
    "RunContext",
    "Stop",
    "StopInfo",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "ToolResult",
    "ToolRunner",
    "ToolSpec",
    "TurnGate",
    "Usage",
    "UserMessage",
    "WorkspacePreamble",
    "converter",
    "format_tool_result_content",
    "run_conversation",
    "seed_system_prompt",
]

__getattr__ = _deprecated_getattr(
    __name__,
    {
        "Engine": ("agentfsm.Agent", lambda: Agent),
        "WorkspaceContext": ("agentfsm.WorkspacePreamble", lambda: WorkspacePreamble),
    },
)
