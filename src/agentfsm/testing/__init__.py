"""Test doubles for agents built on agentfsm."""

from ._responses_replies import responses_body, responses_events, responses_reply
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
    "responses_body",
    "responses_events",
    "responses_reply",
    "tool_reply",
]
