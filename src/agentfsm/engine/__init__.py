"""The engine: the declared machine, its runner and the types they share.

Imports nothing from :mod:`agentfsm.policies` or :mod:`agentfsm.adapters`.
"""

from agentfsm._deprecated import package_getattr as _package_getattr

from ._abort import AbortController, AbortSignal
from ._compression import (
    CompressionResult,
)
from ._context import RunContext, ToolOutcome
from ._errors import (
    AbortError,
    ContextOverflowUnresolved,
    PolicyError,
    PolicyVerdictError,
)
from ._events import (
    AgentEmitter,
    AgentEvent,
    BudgetExhaustedEvent,
    CompressEndEvent,
    CompressStartEvent,
    ErrorEvent,
    EventType,
    FinalEvent,
    GateEvent,
    LlmEndEvent,
    LlmStartEvent,
    PolicyNoteEvent,
    PolicyStopEvent,
    PolicyWarnEvent,
    ReminderEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from ._history import (
    format_tool_result_content,
    seed_system_prompt,
)
from ._loop import run_conversation
from ._machine import AgentLoopMachine
from ._messages import (
    AssistantMessage,
    ChatResult,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    Usage,
    UserMessage,
)
from ._params import LoopOutcome, LoopParams, StopInfo, StoppedReason
from ._policy import (
    Compressor,
    FinalGate,
    FinalVerdict,
    LlmObserver,
    Notice,
    OutcomeShaper,
    Policy,
    Remind,
    ReplyShaper,
    RequestShaper,
    Retry,
    Stop,
    ToolObserver,
    TurnBudget,
    TurnGate,
    TurnObserver,
    TurnVerdict,
    Warn,
)
from ._protocols import ChatDelta, ChatFn, DeltaHandler, SupportsAbort, ToolRunner
from ._serialization import converter
from ._steps import StepRunner, current_step_runner, run_step

__all__ = [
    "AbortController",
    "AbortError",
    "AbortSignal",
    "AgentEmitter",
    "AgentEvent",
    "AgentLoopMachine",
    "AssistantMessage",
    "BudgetExhaustedEvent",
    "ChatDelta",
    "ChatFn",
    "ChatResult",
    "CompressEndEvent",
    "CompressStartEvent",
    "CompressionResult",
    "Compressor",
    "ContextOverflowUnresolved",
    "DeltaHandler",
    "ErrorEvent",
    "EventType",
    "FinalEvent",
    "FinalGate",
    "FinalVerdict",
    "GateEvent",
    "LlmEndEvent",
    "LlmObserver",
    "LlmStartEvent",
    "LoopOutcome",
    "LoopParams",
    "Message",
    "Notice",
    "OutcomeShaper",
    "Policy",
    "PolicyError",
    "PolicyNoteEvent",
    "PolicyStopEvent",
    "PolicyVerdictError",
    "PolicyWarnEvent",
    "Remind",
    "ReminderEvent",
    "ReplyShaper",
    "RequestShaper",
    "Retry",
    "RunContext",
    "StepRunner",
    "Stop",
    "StopInfo",
    "StoppedReason",
    "SupportsAbort",
    "SystemMessage",
    "TextDeltaEvent",
    "ThinkingDeltaEvent",
    "ToolCall",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
    "ToolMessage",
    "ToolObserver",
    "ToolOutcome",
    "ToolResult",
    "ToolRunner",
    "ToolSpec",
    "TurnBudget",
    "TurnEndEvent",
    "TurnGate",
    "TurnObserver",
    "TurnStartEvent",
    "TurnVerdict",
    "Usage",
    "UserMessage",
    "Warn",
    "converter",
    "current_step_runner",
    "format_tool_result_content",
    "run_conversation",
    "run_step",
    "seed_system_prompt",
]


__getattr__ = _package_getattr(__name__)
