"""The declared machine: topology, guards, the table runs step through, and the diagrams
made from it (python-statemachine's engine as the table's oracle: ``test_oracle.py``)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from statemachine.exceptions import TransitionNotAllowed

from agentfsm import Agent, LoopParams, UserMessage, run_conversation
from agentfsm.cli._diagram_cmd import render_diagram
from agentfsm.engine._context import RunContext
from agentfsm.engine._loop import build_run
from agentfsm.engine._machine import GUARD_NAMES, AgentLoopMachine, LoopGuards
from agentfsm.engine._runner import LoopRunner
from agentfsm.engine._stepper import CompiledStepper, compile_machine
from agentfsm.testing import ScriptedChat

DIAGRAMS = Path(__file__).resolve().parents[2] / "diagrams"


def test_states_and_final_states() -> None:
    ids = [s.id for s in AgentLoopMachine.states]
    assert ids == [
        "turn_start",
        "compress_check",
        "compress",
        "llm_start",
        "llm_end",
        "run_tools",
        "final_check",
        "retry",
        "final",
        "budget",
        "aborted",
        "stopped",
        "failed",
    ]
    assert {s.id for s in AgentLoopMachine.final_states} == {
        "final",
        "budget",
        "aborted",
        "stopped",
        "failed",
    }
    assert AgentLoopMachine.initial_state is not None
    assert AgentLoopMachine.initial_state.id == "turn_start"
    assert AgentLoopMachine.catch_errors_as_events is False


def test_transitions_are_ordered_with_named_guards() -> None:
    table = compile_machine(AgentLoopMachine)
    flat = {
        (state, event): [(t.target, t.guards) for t in transitions]
        for state, by_event in table.transitions.items()
        for event, transitions in by_event.items()
    }
    assert flat == {
        ("turn_start", "begin"): [
            ("aborted", (("abort_requested", True),)),
            ("stopped", (("policy_stop", True),)),
            ("compress_check", ()),
        ],
        ("compress_check", "check"): [
            ("compress", (("compression_needed", True),)),
            ("llm_start", ()),
        ],
        ("compress", "compressed"): [("llm_start", ())],
        ("llm_start", "replied"): [("llm_end", ())],
        ("llm_start", "raised"): [
            ("aborted", (("interrupted", True),)),
            ("compress", (("overflow_recoverable", True),)),
            ("failed", ()),
        ],
        ("llm_end", "route"): [
            ("run_tools", (("has_tool_calls", True), ("last_turn", False))),
            ("budget", (("has_tool_calls", True),)),
            ("final_check", ()),
        ],
        ("run_tools", "tools_done"): [
            ("aborted", (("interrupted", True),)),
            ("turn_start", ()),
        ],
        ("final_check", "decide"): [
            ("aborted", (("interrupted", True),)),
            ("retry", (("gate_retry", True), ("last_turn", False))),
            ("final", ()),
        ],
        ("retry", "retried"): [("turn_start", ())],
    }
    named = {name for ts in flat.values() for _, guards in ts for name, _ in guards}
    assert named == set(GUARD_NAMES)


def test_guards_have_no_side_effects() -> None:
    ctx = RunContext(params=LoopParams(max_turns=3), history=[UserMessage("x")])
    guards = LoopGuards(ctx)
    before = repr(ctx), list(ctx.history)
    for _ in range(2):
        for name in GUARD_NAMES:
            getattr(guards, name)()
    assert (repr(ctx), list(ctx.history)) == before


def test_runs_step_through_the_compiled_table_and_nothing_else() -> None:
    ctx = RunContext(params=LoopParams(max_turns=1), history=[])
    runner = LoopRunner(ScriptedChat([]), None, ctx)
    assert type(runner.stepper) is CompiledStepper
    for front in (run_conversation, Agent, LoopRunner, build_run):
        assert "stepper" not in inspect.signature(front).parameters, front


class FakeGuards:
    """Guard values chosen by the test."""

    def __init__(self, **values: bool) -> None:
        self.values = dict.fromkeys(GUARD_NAMES, False) | values

    def __getattr__(self, name: str) -> object:
        if name not in GUARD_NAMES:
            raise AttributeError(name)
        return lambda: self.values[name]


def test_undeclared_disallowed_and_late_events_are_refused() -> None:
    guards = FakeGuards()
    stepper = CompiledStepper(guards)  # type: ignore[arg-type]
    with pytest.raises(TransitionNotAllowed, match="Can't route when in turn_start"):
        stepper.send("route")
    with pytest.raises(TransitionNotAllowed):
        stepper.send("no_such_event")
    assert stepper.state == "turn_start"
    assert stepper.send("begin") == "compress_check"
    guards.values["compression_needed"] = True
    assert stepper.send("check") == "compress"
    assert stepper.send("compressed") == "llm_start"
    guards.values["interrupted"] = True
    assert stepper.send("raised") == "aborted"
    with pytest.raises(TransitionNotAllowed):
        stepper.send("begin")
    assert stepper.state == "aborted"


def test_committed_mermaid_diagram_is_current() -> None:
    committed = (DIAGRAMS / "agent_loop.mmd").read_text("utf-8")
    rendered = render_diagram("mermaid")
    assert isinstance(rendered, str)
    assert committed.rstrip("\n") == rendered.rstrip("\n"), "run `make diagrams` and commit"


def test_mermaid_is_deterministic_and_names_every_guard() -> None:
    text = render_diagram("mermaid")
    assert text == render_diagram("mermaid")
    assert isinstance(text, str)
    assert "turn_start --> aborted : begin [abort_requested]" in text
    assert "llm_end --> run_tools : route [has_tool_calls, !last_turn]" in text
    for name in GUARD_NAMES:
        assert name in text


def test_dot_source_is_stable() -> None:
    dot = render_diagram("dot")
    assert isinstance(dot, str)
    assert dot.startswith("digraph")
    assert "abort_requested" in dot
    # python-statemachine names some nodes after object ids; they are replaced by ordinals
    # so that the committed SVG does not change from one run to the next.
    assert not re.search(r"\d{6,}", dot)
    assert "__initial_0" in dot


@pytest.mark.requires_program("dot", "graphviz")
def test_svg_and_png_render() -> None:
    svg = render_diagram("svg")
    assert isinstance(svg, bytes)
    assert b"<svg" in svg
    assert b"Final check" in svg
    png = render_diagram("png")
    assert isinstance(png, bytes)
    assert png.startswith(b"\x89PNG")


def test_committed_svg_shows_every_state() -> None:
    svg = (DIAGRAMS / "agent_loop.svg").read_text("utf-8")
    for state in AgentLoopMachine.states:
        assert f">{state.name}<" in svg


def test_committed_svg_reads_at_readme_width() -> None:
    """The README embeds the SVG: laid out top to bottom, it is at most 800 px wide."""
    svg = (DIAGRAMS / "agent_loop.svg").read_text("utf-8")
    found = re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg)
    assert found is not None
    width_px = float(found.group(1)) * 96 / 72
    assert width_px <= 800
    assert float(found.group(2)) > float(found.group(1))  # taller than wide


def test_diagram_direction() -> None:
    top_down = render_diagram("mermaid")
    assert "\n    direction TB\n" in top_down
    assert top_down == render_diagram("mermaid", direction="TB")
    left_right = render_diagram("mermaid", direction="LR")
    assert "\n    direction LR\n" in left_right
    assert left_right.replace("direction LR", "direction TB") == top_down
    assert "\nrankdir=TB;\n" in render_diagram("dot")
    assert "\nrankdir=LR;\n" in render_diagram("dot", direction="LR")
    with pytest.raises(ValueError, match="expected TB or LR"):
        render_diagram("mermaid", direction="BT")  # type: ignore[call-overload]


@pytest.mark.requires_program("dot", "graphviz")
def test_svg_direction_sets_the_shape() -> None:
    def size(svg: bytes) -> tuple[float, float]:
        found = re.search(rb'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg)
        assert found is not None
        return float(found.group(1)), float(found.group(2))

    tall_width, tall_height = size(render_diagram("svg"))
    wide_width, wide_height = size(render_diagram("svg", direction="LR"))
    assert tall_width * 96 / 72 <= 800
    assert wide_width > tall_width
    assert tall_height > wide_height


def test_diagram_names_the_policies_behind_each_guard() -> None:
    from agentfsm.policies import presets, require, stop_when, text_matches, tool_called

    policies = [
        *presets.coding_agent(context_budget_tokens=100_000, spend_tokens=1_000_000),
        stop_when(tool_called("submit")),
        require(text_matches("DONE"), reminder="Say DONE."),
    ]
    text = render_diagram("mermaid", policies=policies)
    assert isinstance(text, str)
    lines = text.splitlines()
    assert (
        "    turn_start --> stopped : begin [policy_stop ← loop_health, spend_limit(1000000), "
        "stop_when(tool_called('submit'))]"
    ) in lines
    assert (
        "    compress_check --> compress : check "
        "[compression_needed ← compress(100000, threshold=0.8)]"
    ) in lines
    # The budget is the run's own max_turns: no policy feeds last_turn.
    assert "    llm_end --> run_tools : route [has_tool_calls, !last_turn]" in lines
    assert "    retry --> turn_start : retried" in lines
    assert (
        "gate_retry ← verify('auto'), verifier(max_turns=15), "
        "require(text_matches('DONE'), max_retries=3)"
    ) in text
    # Guards no policy feeds are left as they are; without policies nothing changes.
    assert "turn_start --> aborted : begin [abort_requested]" in text
    assert render_diagram("mermaid", policies=[]) == render_diagram("mermaid")
    dot = render_diagram("dot", policies=policies)
    assert isinstance(dot, str)
    assert "stop_when(tool_called(&#x27;submit&#x27;))" in dot
