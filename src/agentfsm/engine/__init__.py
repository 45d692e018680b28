"""The engine: the declared machine, its runner and the types they share.

Imports nothing from :mod:`agentfsm.policies` or :mod:`agentfsm.adapters`.
"""

from .abort import AbortController, AbortSignal
from .compaction import (
    COMPRESSION_SYSTEM_PROMPT,
    KEEP_RECENT_TURNS,
    TRANSCRIPT_MAX_CHARS,
    CompressionResult,
    compress_messages,
    render_transcript,
    should_compress,
)
from .context import RunContext, ToolOutcome
from .errors import AGENT_LOOP_ABORTED, AbortError, RecordedError
from .events import (
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
    PolicyStopEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from .history import (
    TURN_BUDGET_EXHAUSTED,
    format_tool_result_content,
    seed_system_prompt,
    tool_message_from_result,
)
from .machine import AgentLoopMachine, LoopGuards
from .messages import (
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
from .params import LoopOutcome, LoopParams, StopInfo, StoppedReason
from .protocols import (
    ChatDelta,
    ChatFn,
    DeltaHandler,
    FinalGate,
    Retry,
    Stop,
    SupportsAbort,
    ToolRunner,
    TurnGate,
)
from .runner import LoopRunner, run_conversation
from .serialization import converter
from .stepper import StepperKind
from .tokens import estimate_message_tokens, estimate_messages_tokens, estimate_text_tokens

__all__ = [
    "AGENT_LOOP_ABORTED",
    "COMPRESSION_SYSTEM_PROMPT",
    "KEEP_RECENT_TURNS",
    "TRANSCRIPT_MAX_CHARS",
    "TURN_BUDGET_EXHAUSTED",
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
    "DeltaHandler",
    "ErrorEvent",
    "EventType",
    "FinalEvent",
    "FinalGate",
    "GateEvent",
    "LlmEndEvent",
    "LlmStartEvent",
    "LoopGuards",
    "LoopOutcome",
    "LoopParams",
    "LoopRunner",
    "Message",
    "PolicyStopEvent",
    "RecordedError",
    "Retry",
    "RunContext",
    "Stop",
    "StopInfo",
    "StoppedReason",
    "StepperKind",
    "SupportsAbort",
    "SystemMessage",
    "ToolCall",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
    "ToolMessage",
    "ToolOutcome",
    "ToolResult",
    "ToolRunner",
    "ToolSpec",
    "TurnEndEvent",
    "TurnGate",
    "TurnStartEvent",
    "Usage",
    "UserMessage",
    "compress_messages",
    "converter",
    "estimate_message_tokens",
    "estimate_messages_tokens",
    "estimate_text_tokens",
    "format_tool_result_content",
    "render_transcript",
    "run_conversation",
    "seed_system_prompt",
    "should_compress",
    "tool_message_from_result",
]
