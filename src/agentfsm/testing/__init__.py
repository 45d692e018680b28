"""Test doubles for agents built on agentfsm."""

from .fake_server import (
    Drop,
    FakeProviderServer,
    Filler,
    Frame,
    Pause,
    RecordedRequest,
    Repeat,
    Reply,
    ReplyHandler,
)
from .recorder import EventRecorder
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
    "Drop",
    "EventRecorder",
    "FakeProviderServer",
    "Filler",
    "Frame",
    "Pause",
    "RecordedRequest",
    "Repeat",
    "Reply",
    "ReplyHandler",
    "ScriptExhausted",
    "ScriptItem",
    "ScriptedChat",
    "ScriptedTools",
    "tool_reply",
]
