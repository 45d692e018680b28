"""``AgentEmitter.on`` types each handler with its event class.

mypy --strict checks this file (``make typecheck`` covers ``tests``): a handler annotated with
the event's class is accepted, and a handler for another class is refused (the ``type:
ignore`` comments below would be reported as unused if it were not). mypy does not infer a
lambda's parameter through overloads (it is ``Any``); editors based on pyright do. The tests
check at run time that handlers receive those classes, and that every event class has its
overload.
"""

from __future__ import annotations

import ast
from pathlib import Path

from agentfsm import AgentEmitter, AgentEvent, LoopParams, UserMessage, run_conversation
from agentfsm.engine import _events as events_module
from agentfsm.engine._events import (
    FinalEvent,
    LlmEndEvent,
    TextDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    TurnStartEvent,
)
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from ..helpers import event_type_literals


def refused_by_the_type_checker(emitter: AgentEmitter) -> None:
    """Never called: mypy must reject a handler registered for another event's class."""

    def on_final(event: FinalEvent) -> None: ...

    def on_any(event: AgentEvent) -> None: ...

    emitter.on("final", on_final)
    emitter.on("final", on_any)
    emitter.on("*", on_any)
    emitter.on("llm_end", on_final)  # type: ignore[arg-type]
    emitter.on("*", on_final)  # type: ignore[arg-type]
    emitter.on("no_such_event", on_final)  # type: ignore[arg-type]


async def test_handlers_receive_their_event_class() -> None:
    emitter = AgentEmitter()
    ends: list[ToolCallEndEvent] = []
    starts: list[ToolCallStartEvent] = []
    everything: list[AgentEvent] = []
    anything_by_name: list[AgentEvent] = []

    def on_tool_call_end(event: ToolCallEndEvent) -> None:
        ends.append(event)

    emitter.on("tool_call_end", on_tool_call_end)
    emitter.on("tool_call_start", starts.append)
    llm_ends: list[LlmEndEvent] = []
    emitter.on("llm_end", llm_ends.append)
    emitter.on("*", everything.append)
    kind: str = "final"
    emitter.on(kind, anything_by_name.append)

    await run_conversation(
        ScriptedChat([tool_reply(("echo", {"text": "hi"})), "done"]),
        ScriptedTools({"echo": lambda text: text}),
        [UserMessage("go")],
        LoopParams(max_turns=3),
        emitter=emitter,
    )
    (end,) = ends
    assert type(end) is ToolCallEndEvent
    assert end.result.output == "hi"
    assert [type(e) for e in starts] == [ToolCallStartEvent]
    assert [e.result.message.content for e in llm_ends] == ["", "done"]
    assert [type(e) for e in anything_by_name] == [FinalEvent]
    assert {type(e) for e in everything} >= {TurnStartEvent, LlmEndEvent, FinalEvent}


def test_a_delta_handler_gets_text() -> None:
    emitter = AgentEmitter()
    texts: list[str] = []
    emitter.on("text_delta", lambda e: texts.append(e.text))
    emitter.emit(TextDeltaEvent(turn=1, text="Hel"))
    assert texts == ["Hel"]


def on_overloads() -> list[tuple[str, str]]:
    """``(event_type annotation, handler annotation)`` of each ``AgentEmitter.on`` overload."""
    tree = ast.parse(Path(events_module.__file__).read_text("utf-8"))
    (emitter,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "AgentEmitter"]
    found = []
    for node in emitter.body:
        if (
            isinstance(node, ast.FunctionDef)
            and node.name == "on"
            and any(ast.unparse(d) == "overload" for d in node.decorator_list)
        ):
            _self, event_type, handler = node.args.args
            assert event_type.annotation is not None
            assert handler.annotation is not None
            found.append((ast.unparse(event_type.annotation), ast.unparse(handler.annotation)))
    return found


def test_every_event_class_has_an_overload_of_on() -> None:
    expected = event_type_literals()
    assert len(expected) >= 20
    overloads = on_overloads()
    for kind, cls in expected.items():
        assert (f"Literal['{kind}']", f"Callable[[{cls}], object]") in overloads, (
            f"AgentEmitter.on has no overload for {kind!r}: add one taking a {cls} handler"
        )
    assert overloads[-2:] == [
        ("Literal['*']", "Callable[[AgentEvent], object]"),
        ("str", "Callable[[AgentEvent], object]"),
    ]
    assert len(overloads) == len(expected) + 2
