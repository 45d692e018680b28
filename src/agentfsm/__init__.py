"""agentfsm: an LLM agent loop as an explicit, declared state machine with pluggable policies.

The names below are the public API: the front door (:class:`Agent`, :func:`run_conversation`),
the messages, :data:`AgentEvent` (the union of the events, whose classes are in
:mod:`agentfsm.engine`), the policy hooks and their verdicts, :func:`render_diagram` and
:func:`render_run` (a recorded run's HTML picture).
Adapters, policies and test doubles live in :mod:`agentfsm.adapters`,
:mod:`agentfsm.policies` and :mod:`agentfsm.testing`.

``import agentfsm`` loads none of them: each name is imported from its module the first time
it is used (PEP 562), so the command line and a program that needs one part start fast.
"""

from ._version import __version__ as __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (PEP 781)
if TYPE_CHECKING:
    from .agent import Agent, Hooks, PreambleProvider, WorkspacePreamble
    from .cli import render_diagram, render_run
    from .engine import (
        AbortController,
        AbortError,
        AbortSignal,
        AgentEmitter,
        AgentEvent,
        AgentLoopMachine,
        AssistantMessage,
        ChatDelta,
        ChatFn,
        ChatResult,
        Compressor,
        FinalGate,
        LlmObserver,
        LoopOutcome,
        LoopParams,
        Message,
        Notice,
        OutcomeShaper,
        Policy,
        PolicyError,
        PolicyVerdictError,
        Remind,
        ReplyShaper,
        RequestShaper,
        Retry,
        RunContext,
        Stop,
        StopInfo,
        SystemMessage,
        ToolCall,
        ToolMessage,
        ToolObserver,
        ToolOutcome,
        ToolResult,
        ToolRunner,
        ToolSpec,
        TurnGate,
        TurnObserver,
        Usage,
        UserMessage,
        Warn,
        converter,
        format_tool_result_content,
        run_conversation,
        seed_system_prompt,
    )
del TYPE_CHECKING

__all__ = [
    "AbortController",
    "AbortError",
    "AbortSignal",
    "Agent",
    "AgentEmitter",
    "AgentEvent",
    "AgentLoopMachine",
    "AssistantMessage",
    "ChatDelta",
    "ChatFn",
    "ChatResult",
    "Compressor",
    "FinalGate",
    "Hooks",
    "LlmObserver",
    "LoopOutcome",
    "LoopParams",
    "Message",
    "Notice",
    "OutcomeShaper",
    "Policy",
    "PolicyError",
    "PolicyVerdictError",
    "PreambleProvider",
    "Remind",
    "ReplyShaper",
    "RequestShaper",
    "Retry",
    "RunContext",
    "Stop",
    "StopInfo",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "ToolObserver",
    "ToolOutcome",
    "ToolResult",
    "ToolRunner",
    "ToolSpec",
    "TurnGate",
    "TurnObserver",
    "Usage",
    "UserMessage",
    "Warn",
    "WorkspacePreamble",
    "converter",
    "format_tool_result_content",
    "render_diagram",
    "render_run",
    "run_conversation",
    "seed_system_prompt",
]

# Each public name's module, imported when the name is first used.
_LAZY = dict.fromkeys(__all__, "agentfsm.engine")
_LAZY.update(
    dict.fromkeys(("Agent", "Hooks", "PreambleProvider", "WorkspacePreamble"), "agentfsm.agent")
)
_LAZY.update(dict.fromkeys(("render_diagram", "render_run"), "agentfsm.cli"))


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is not None:
        from importlib import import_module

        value = getattr(import_module(module), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
