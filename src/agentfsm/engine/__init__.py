"""The engine: the declared machine, its runner and the types they share.

Imports nothing from :mod:`agentfsm.policies` or :mod:`agentfsm.adapters`. A name imported
here as itself (``x as x``) and left out of ``__all__`` is offered to the other agentfsm
packages only: it is not public API.
"""

from ._abort import AbortController, AbortSignal
from ._batching import plan_tool_batches as plan_tool_batches
from ._cancellation import unrecorded_result as unrecorded_result
from ._compression import Compression as Compression
from ._compression import (
    CompressionResult,
)
from ._context import RunContext, ToolOutcome
from ._context import current_run as current_run
from ._errors import (
    MAX_OVERFLOW_COMPACTIONS,
    AbortError,
    ContextOverflowUnresolved,
    PolicyError,
    PolicyVerdictError,
)
from ._errors import error_name as error_name
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
    RedirectEvent,
    RedirectSkippedEvent,
    ReminderEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from ._files import read_small_file as read_small_file
from ._history import TURN_BUDGET_EXHAUSTED as TURN_BUDGET_EXHAUSTED
from ._history import (
    format_tool_result_content,
    seed_system_prompt,
)
from ._history import tool_message_from_result as tool_message_from_result
from ._interrupt import active_interrupter as active_interrupter
from ._interrupt import cancel_on_abort as cancel_on_abort
from ._interrupt import interrupt as interrupt
from ._interrupt import race_abort as race_abort
from ._loop import build_run as build_run
from ._loop import check_messages as check_messages
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
from ._params import evolved as evolved
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
from ._policy import PolicySet as PolicySet
from ._policy import loop_policies as loop_policies
from ._policy_check import call_hint as call_hint
from ._policy_check import hooks_of as hooks_of
from ._policy_check import policy_name as policy_name
from ._protocols import ChatDelta, ChatFn, DeltaHandler, SupportsAbort, ToolRunner
from ._reminders import retry_message as retry_message
from ._runner import LoopRunner as LoopRunner
from ._serialization import converter
from ._serialization import dumps as dumps
from ._serialization import json_shape as json_shape
from ._serialization import structure_message as structure_message
from ._serialization import to_jsonable as to_jsonable
from ._steps import StepRunner, current_step_runner, run_step
from ._text import encodable as encodable
from ._text import printable as printable
from ._text import utf8_bytes as utf8_bytes

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
    "MAX_OVERFLOW_COMPACTIONS",
    "Message",
    "Notice",
    "OutcomeShaper",
    "Policy",
    "PolicyError",
    "PolicyNoteEvent",
    "PolicyStopEvent",
    "PolicyVerdictError",
    "PolicyWarnEvent",
    "RedirectEvent",
    "RedirectSkippedEvent",
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
