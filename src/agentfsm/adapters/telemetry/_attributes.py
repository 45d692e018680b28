"""Attribute names: the GenAI conventions' constants, and agentfsm's own (``agentfsm.*``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import (
    GenAiOperationNameValues,
    GenAiProviderNameValues,
)

from agentfsm.adapters.providers import ProviderError
from agentfsm.engine import AbortError

__all__ = [
    "ANTHROPIC",
    "CHAT",
    "EXECUTE_TOOL",
    "INVOKE_AGENT",
    "OPENAI",
    "POLICY_NAME",
    "POLICY_REASON",
    "STOPPED_REASON",
    "TOOL_CALLS",
    "TOOL_CANCELLED",
    "TOOL_OK",
    "TOOL_TRUNCATED",
    "TURN",
    "TURNS",
    "AttributeValue",
    "error_type",
]

AttributeValue = str | bool | int | float | Sequence[str]
"""A span attribute value as this package records them."""

CHAT = GenAiOperationNameValues.CHAT.value
EXECUTE_TOOL = GenAiOperationNameValues.EXECUTE_TOOL.value
INVOKE_AGENT = GenAiOperationNameValues.INVOKE_AGENT.value
OPENAI = GenAiProviderNameValues.OPENAI.value
ANTHROPIC = GenAiProviderNameValues.ANTHROPIC.value

STOPPED_REASON = "agentfsm.stopped_reason"
"""Why the run ended: ``final``, ``budget``, ``policy`` or ``aborted``."""
TURNS = "agentfsm.turns"
"""LLM calls the run made."""
TOOL_CALLS = "agentfsm.tool_calls"
"""Tool calls the run made."""
TURN = "agentfsm.turn"
"""The turn an event or call belongs to."""
TOOL_OK = "agentfsm.tool.ok"
TOOL_TRUNCATED = "agentfsm.tool.truncated"
"""The output was cut down for the model (the full text went to people only)."""
TOOL_CANCELLED = "agentfsm.tool.cancelled"
POLICY_NAME = "agentfsm.policy.name"
POLICY_REASON = "agentfsm.policy.reason"


def error_type(error: BaseException) -> str:
    """``error.type``: a provider error's kind (``rate_limit``, ``auth`` …), else the
    exception's class name."""
    if isinstance(error, ProviderError):
        return str(error.kind)
    if isinstance(error, (asyncio.CancelledError, AbortError)):
        return "cancelled"
    return type(error).__qualname__
