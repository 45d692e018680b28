"""Test doubles for agents built on agentfsm."""

from .scripted import (
    ChatRequest,
    ScriptedChat,
    ScriptedTools,
    ScriptExhausted,
    ScriptItem,
    tool_reply,
)

__all__ = [
    "ChatRequest",
    "ScriptExhausted",
    "ScriptItem",
    "ScriptedChat",
    "ScriptedTools",
    "tool_reply",
]
