"""``EventRecorder``: the shipped event recorder keeps a run's events, typed."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path
from typing import Any

from agentfsm import AgentEmitter, LoopParams, UserMessage, run_conversation
from agentfsm.engine._events import FinalEvent, ToolCallEndEvent, TurnStartEvent
from agentfsm.testing import EventRecorder, ScriptedChat, ScriptedTools, tool_reply
from agentfsm.testing import _recorder as recorder_module

from ..helpers import event_type_literals


async def run(emitter: AgentEmitter) -> None:
    await run_conversation(
        ScriptedChat([tool_reply(("echo", {"text": "hi"})), "done"]),
        ScriptedTools({"echo": lambda text: text}),
        [UserMessage("go")],
        LoopParams(max_turns=3),
        emitter=emitter,
    )


async def test_attach_records_every_event_in_order() -> None:
    emitter = AgentEmitter()
    recorder = EventRecorder.attach(emitter)
    await run(emitter)
    assert recorder.types == [
        "turn_start",
        "llm_start",
        "llm_end",
        "tool_call_start",
        "tool_call_end",
        "turn_start",
        "llm_start",
        "llm_end",
        "final",
        "turn_end",
    ]
    assert [e.type for e in recorder.events] == recorder.types


async def test_an_instance_is_a_handler() -> None:
    emitter = AgentEmitter()
    recorder = EventRecorder()
    emitter.on("*", recorder)
    finals = EventRecorder()
    emitter.on("final", finals)
    await run(emitter)
    assert recorder.types[0] == "turn_start"
    assert finals.types == ["final"]


async def test_of_type_filters_by_name_or_class_with_the_event_type() -> None:
    emitter = AgentEmitter()
    recorder = EventRecorder.attach(emitter)
    await run(emitter)
    (end,) = recorder.of_type("tool_call_end")
    assert isinstance(end, ToolCallEndEvent)
    assert end.result.output == "hi"  # typed: mypy knows ``end`` is a ToolCallEndEvent
    assert recorder.of_type(ToolCallEndEvent) == [end]
    assert [e.turn for e in recorder.of_type("turn_start")] == [1, 2]
    assert recorder.of_type(TurnStartEvent) == recorder.of_type("turn_start")
    (final,) = recorder.of_type(FinalEvent)
    assert final.message.content == "done"
    assert recorder.of_type("no_such_event") == []


async def test_clear_forgets_and_detach_unsubscribes() -> None:
    emitter = AgentEmitter()
    recorder = EventRecorder.attach(emitter)
    other = EventRecorder.attach(emitter)
    await run(emitter)
    recorder.clear()
    assert recorder.events == []
    emitter.emit(TurnStartEvent(turn=9))
    assert recorder.of_type("turn_start") == [TurnStartEvent(turn=9)]
    recorder.detach()
    recorder.detach()  # harmless
    emitter.emit(TurnStartEvent(turn=10))
    assert recorder.types == ["turn_start"]
    assert other.types[-1] == "turn_start"
    assert len(emitter) == 1


def test_of_type_has_a_typed_overload_for_every_event() -> None:
    tree = ast.parse(Path(recorder_module.__file__).read_text("utf-8"))
    typed: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "of_type":
            annotation = node.args.args[1].annotation
            if (
                isinstance(annotation, ast.Subscript)
                and ast.unparse(annotation.value) == "Literal"
                and node.returns is not None
            ):
                literal = ast.literal_eval(annotation.slice)
                typed[literal] = ast.unparse(node.returns)
    expected = event_type_literals()
    assert len(expected) >= 20
    assert typed == {kind: f"list[{cls}]" for kind, cls in expected.items()}


async def test_the_docstring_example_runs() -> None:
    doc = inspect.getdoc(EventRecorder) or ""
    example = textwrap.dedent(doc.split("::\n", 1)[1])
    imports, body = example.split("\n\n", 1)
    source = imports + "\n\nasync def example():\n" + textwrap.indent(body, "    ")
    namespace: dict[str, Any] = {}
    exec(compile(source, "EventRecorder docstring", "exec"), namespace)
    await namespace["example"]()
