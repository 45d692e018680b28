"""Test doubles for agents built on agentfsm."""

from ._fake_server import (
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
from ._recorder import EventRecorder
from ._scripted import (
    ChatRequest,
    ScriptedChat,
    ScriptedTools,
    ScriptExhausted,
    ScriptFn,
    ScriptItem,
    Streamed,
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
    "ScriptFn",
    "ScriptItem",
    "ScriptedChat",
    "ScriptedTools",
    "Streamed",
    "tool_reply",
]
