"""Policy mistakes are caught when the agent is built, with the call that was meant."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from agentfsm import Agent, AgentEmitter
from agentfsm.policies import (
    require,
    stop_when,
    text_matches,
    tokens_over,
    tool_called,
    verify,
    wrap_up,
)
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply


def build(*policies: Any) -> Agent:
    return Agent(ScriptedChat(["done"]), ScriptedTools({}), policies=list(policies))


@pytest.mark.parametrize(
    ("given", "meant"),
    [(wrap_up, "wrap_up()"), (verify, "verify()"), (stop_when, "stop_when(...)")],
)
def test_a_policy_class_instead_of_an_instance(given: type, meant: str) -> None:
    with pytest.raises(TypeError) as raised:
        build(given)
    assert f"did you mean {meant}?" in str(raised.value)


def test_a_condition_given_as_a_policy_names_stop_when() -> None:
    with pytest.raises(TypeError, match=r"did you mean stop_when\(tool_called\('submit'\)\)\?"):
        build(tool_called("submit"))


def gate_of(name: str) -> Callable[[Any], object]:
    """``stop_when`` or ``require``, as a function of the condition alone."""
    if name == "stop_when":
        return stop_when
    return lambda condition: require(condition, reminder="finish")


@pytest.mark.parametrize("factory", [tool_called, tokens_over, text_matches])
@pytest.mark.parametrize("gate", ["stop_when", "require"])
def test_an_uncalled_condition_factory(factory: type, gate: str) -> None:
    make = gate_of(gate)
    with pytest.raises(TypeError, match=rf"did you mean {factory.__name__}\(\.\.\.\)\?"):
        make(factory)


@pytest.mark.parametrize("gate", ["stop_when", "require"])
def test_a_policy_given_as_a_condition(gate: str) -> None:
    make = gate_of(gate)
    for given, pattern in ((wrap_up, r"did you mean wrap_up\(\)\?"), (wrap_up(), "policies=")):
        with pytest.raises(TypeError, match=pattern):
            make(given)


def test_correct_policies_and_plain_predicates_still_build_and_run() -> None:
    agent = Agent(
        ScriptedChat([tool_reply(("submit", {})), "done"]),
        ScriptedTools({"submit": lambda: "ok"}),
        policies=[
            stop_when(tool_called("submit") | tokens_over(10**9)),
            require(lambda ctx: True, reminder="x"),
            wrap_up(),
        ],
        max_turns=5,
    )
    outcome = asyncio.run(agent.run("go"))
    assert outcome.stopped_reason == "policy"


class StaticPolicy:
    """A class used as a policy through static hooks: it works as before."""

    @staticmethod
    def check_turn(ctx: object) -> None:
        return None


def test_a_class_with_static_hooks_is_still_a_policy() -> None:
    outcome = asyncio.run(build(StaticPolicy).run("go"))
    assert outcome.stopped_reason == "final"


def test_a_misspelt_event_name_names_the_nearest() -> None:
    agent = build()
    with pytest.raises(ValueError, match=r"did you mean 'policy_stop'\?"):
        agent.events.on("policy_stopp", print)
    with pytest.raises(ValueError, match=r"did you mean 'tool_call_end'\?"):
        AgentEmitter().on_many([("tool_call_ends", print)])
    with pytest.raises(ValueError, match="no event is called 'zzz'"):
        AgentEmitter().on("zzz", print)


def test_known_event_names_and_star_still_subscribe() -> None:
    agent = build()
    seen: list[str] = []
    agent.events.on("*", lambda event: seen.append(event.type))
    finals: list[str] = []
    agent.events.on("final", lambda event: finals.append(event.message.content))
    asyncio.run(agent.run("go"))
    assert finals == ["done"]
    assert "final" in seen
    assert "turn_start" in seen
