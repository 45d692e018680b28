"""Test doubles for agents built on agentfsm, and the scripted model of
``agentfsm fake-server`` (``scenario_handler``)."""

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
from ._responses_replies import responses_body, responses_events, responses_reply
from ._scenarios import ScriptTurn, load_script, scenario_handler
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
    "ScriptTurn",
    "ScriptedChat",
    "ScriptedTools",
    "Streamed",
    "load_script",
    "responses_body",
    "responses_events",
    "responses_reply",
    "scenario_handler",
    "tool_reply",
]
