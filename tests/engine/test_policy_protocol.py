"""The policy protocol: what the type checker and the runtime both refuse, and how hooks run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentfsm import (
    Agent,
    LoopParams,
    PolicyError,
    PolicyVerdictError,
    Remind,
    Retry,
    RunContext,
    Stop,
    ToolOutcome,
    UserMessage,
    run_conversation,
)
from agentfsm.engine._events import ErrorEvent, GateEvent
from agentfsm.engine._policy import HOOK_NAMES, PolicySet, check_policies
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from ..helpers import Recorder


class Typo:
    def check_trun(self, ctx: RunContext) -> Stop | None:
        return Stop("never")


class SaysTrue:
    def check_turn(self, ctx: RunContext) -> bool:
        return True


class StopsAtFinal:
    def check_final(self, ctx: RunContext) -> Stop:
        return Stop("wrong verdict")


class Raises:
    name = "boom-policy"

    def on_llm_end(self, ctx: RunContext) -> None:
        raise ValueError("kaboom")


async def _run(policies: list[Any], chat: ScriptedChat, recorder: Recorder | None = None) -> Any:
    return await run_conversation(
        chat,
        ScriptedTools({"t": lambda: "ok"}),
        [UserMessage("go")],
        LoopParams(max_turns=4),
        emitter=recorder.emitter if recorder else None,
        policies=policies,
    )


@pytest.mark.parametrize(
    "bad",
    [["oops"], [42], [object()], [Typo()], "not a list"],
    ids=["str", "int", "object", "one-letter-off", "string-as-sequence"],
)
async def test_an_object_that_is_no_policy_is_a_type_error_at_construction(bad: Any) -> None:
    with pytest.raises(TypeError):
        Agent(ScriptedChat(["x"]), policies=bad)
    chat = ScriptedChat(["x"])
    with pytest.raises(TypeError):
        await _run(bad if isinstance(bad, list) else [bad], chat)
    assert chat.requests == []  # refused before any call


def test_a_near_miss_names_the_hook_it_meant() -> None:
    with pytest.raises(TypeError, match="'check_trun' is not a hook; did you mean 'check_turn'"):
        check_policies([Typo()])
    for hook in HOOK_NAMES:  # every hook, one letter off in each way, is caught
        for typo in (hook[:-1], hook + "s", hook[1] + hook[0] + hook[2:]):
            if typo in HOOK_NAMES:
                continue
            policy = type("P", (), {typo: lambda self, ctx: None, "on_turn_end": lambda s, c: None})
            with pytest.raises(TypeError, match=hook):
                check_policies([policy()])


async def test_a_wrong_verdict_is_a_type_error_naming_policy_and_hook() -> None:
    recorder = Recorder()
    with pytest.raises(PolicyVerdictError, match=r"policy SaysTrue returned True .*check_turn"):
        await _run([SaysTrue()], ScriptedChat(["x"]), recorder)
    assert isinstance(recorder.events[-1], ErrorEvent)
    assert isinstance(recorder.events[-1].error, TypeError)

    recorder = Recorder()
    with pytest.raises(
        TypeError, match=r"StopsAtFinal returned Stop.*check_final.*None, Retry or Notice"
    ):
        await _run([StopsAtFinal()], ScriptedChat(["x"]), recorder)
    assert recorder.types[-1] == "error"


async def test_a_policy_that_raises_ends_the_run_with_an_error_event_naming_it() -> None:
    recorder = Recorder()
    with pytest.raises(PolicyError, match="policy boom-policy failed in on_llm_end") as info:
        await _run([Raises()], ScriptedChat(["x"]), recorder)
    assert isinstance(info.value.__cause__, ValueError)
    assert info.value.policy == "boom-policy"
    assert info.value.hook == "on_llm_end"
    last = recorder.events[-1]
    assert isinstance(last, ErrorEvent)
    assert last.error is info.value


async def test_a_raising_tool_observer_still_closes_every_call_of_the_turn() -> None:
    class Observer:
        def on_tool_result(self, ctx: RunContext, outcome: ToolOutcome) -> None:
            raise RuntimeError("observer broke")

    recorder = Recorder()
    chat = ScriptedChat([tool_reply(("t", {}), ("t", {}), ("t", {}))])
    with pytest.raises(PolicyError, match="Observer failed in on_tool_result"):
        await _run([Observer()], chat, recorder)
    ends = [e for e in recorder.events if e.type == "tool_call_end"]
    assert len(ends) == 3  # the two not yet answered are closed as cancelled
    assert [e.cancelled for e in ends] == [False, True, True]
    assert recorder.types[-1] == "error"


async def test_every_hook_may_be_sync_or_async() -> None:
    seen: list[str] = []

    class Sync:
        def check_turn(self, ctx: RunContext) -> None:
            seen.append("sync check_turn")

        def check_final(self, ctx: RunContext) -> Retry | None:
            seen.append("sync check_final")
            return Retry("cite a source") if ctx.gate_retries == 0 else None

        def on_tool_result(self, ctx: RunContext, outcome: ToolOutcome) -> Remind:
            return Remind("sync reminder")

    class Async:
        async def check_turn(self, ctx: RunContext) -> None:
            seen.append("async check_turn")

        async def shape_request(self, ctx: RunContext, messages: Any) -> Any:
            return messages

        async def shape_reply(self, ctx: RunContext, result: Any) -> None:
            return None

        async def on_llm_end(self, ctx: RunContext) -> Remind:
            return Remind("async reminder")

        async def on_turn_end(self, ctx: RunContext) -> None:
            return None

        async def shape_outcome(self, ctx: RunContext, outcome: Any) -> None:
            seen.append("async shape_outcome")

    recorder = Recorder()
    chat = ScriptedChat([tool_reply(("t", {})), "no source", "with source"])
    outcome = await _run([Sync(), Async()], chat, recorder)
    assert outcome.stopped_reason == "final"
    assert outcome.final.content == "with source"
    gates = [e for e in recorder.events if isinstance(e, GateEvent)]
    assert [(g.policy, g.reminder) for g in gates] == [("Sync", "cite a source")]
    assert seen.count("sync check_final") == 2
    assert seen[-1] == "async shape_outcome"
    reminders = [e.text for e in recorder.events if e.type == "reminder"]
    assert "sync reminder" in reminders
    assert "async reminder" in reminders


async def test_name_defaults_to_the_class_name() -> None:
    class StopAtOnce:
        def check_turn(self, ctx: RunContext) -> Stop:
            return Stop("enough")

    outcome = await _run([StopAtOnce()], ScriptedChat(["x"]))
    assert outcome.stop is not None
    assert outcome.stop.policy == "StopAtOnce"
    assert "0x" not in outcome.stop.policy


async def test_per_policy_state_never_collides_between_two_instances() -> None:
    class CountTurns:
        def __init__(self, stop_after: int) -> None:
            self.stop_after = stop_after

        def check_turn(self, ctx: RunContext) -> Stop | None:
            count: list[int] = ctx.state(self, lambda: [0])
            count[0] += 1
            durable: dict[str, int] = ctx.durable_state(self, dict)
            durable["turns"] = count[0]
            return Stop(f"after {count[0]}") if count[0] > self.stop_after else None

    a, b = CountTurns(2), CountTurns(10)
    chat = ScriptedChat([tool_reply(("t", {}))] * 5)
    runner_policies = PolicySet([a, b])
    assert runner_policies.keys == {id(a): "CountTurns", id(b): "CountTurns#2"}
    outcome = await _run([a, b], chat)
    assert outcome.stop is not None
    assert (outcome.stop.policy, outcome.stop.reason) == ("CountTurns", "after 3")


def test_ctx_state_is_the_one_scratch_store() -> None:
    assert not hasattr(RunContext, "run_state")


def test_the_type_checker_refuses_what_is_no_policy(tmp_path: Path) -> None:
    snippet = tmp_path / "bad_policies.py"
    snippet.write_text(
        "from agentfsm import Agent, LoopParams, RunContext, run_conversation\n"
        "from agentfsm.testing import ScriptedChat\n"
        "class Typo:\n"
        "    def check_trun(self, ctx: RunContext) -> None: ...\n"
        "class SaysTrue:\n"
        "    def check_turn(self, ctx: RunContext) -> bool: return True\n"
        "Agent(ScriptedChat(['x']), policies=['oops', 42])\n"
        "Agent(ScriptedChat(['x']), policies=[Typo()])\n"
        "Agent(ScriptedChat(['x']), policies=[SaysTrue()])\n",
        "utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(snippet)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert {int(line.split(":")[1]) for line in errors} == {7, 8, 9}, done.stdout
