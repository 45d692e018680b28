"""The verify gate and the verifier gate."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from agentfsm import Agent, LoopParams, UserMessage, run_conversation
from agentfsm.engine._messages import (
    AssistantMessage,
    ChatResult,
    Message,
    SystemMessage,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from agentfsm.policies import verifier, verify
from agentfsm.policies._verifier import VERIFIER_SYSTEM_PROMPT, parse_verdict
from agentfsm.policies._verify import resolve_verify_command
from agentfsm.sandbox import _bubblewrap as bubblewrap_module
from agentfsm.sandbox._process import SandboxUnavailable, Unsandboxed, run_command
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

from ..helpers import Recorder


def tools(workspace: Path) -> ScriptedTools:
    def write(path: str, text: str) -> ToolResult:
        (workspace / path).write_text(text, "utf-8")
        return ToolResult(True, f"wrote {path}", metadata={"path": path})

    return ScriptedTools(
        {"write": write, "read": lambda path: (workspace / path).read_text("utf-8")},
        specs=[
            ToolSpec("write", "Write a file.", destructive=True),
            ToolSpec("read", "Read a file.", concurrency_safe=True),
        ],
    )


CHECK = "echo checked $(cat app.txt); grep -q fixed app.txt"


async def test_verify_failure_forces_another_turn(
    tmp_path: Path, recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    chat = ScriptedChat(
        [
            tool_reply(("write", {"path": "app.txt", "text": "broken"})),
            "done",
            tool_reply(("write", {"path": "app.txt", "text": "fixed now"})),
            "done, really",
        ]
    )
    outcome = await run_conversation(
        chat,
        tools(tmp_path),
        [UserMessage("fix app.txt")],
        LoopParams(max_turns=8),
        emitter=recorder.emitter,
        policies=[verify(CHECK, workspace=tmp_path, sandbox=Unsandboxed())],
    )
    assert outcome.final == AssistantMessage("done, really")
    reminder = chat.requests[2].messages[-1].content
    assert "Verification failed" in reminder
    assert "exited with 1" in reminder
    assert "checked broken" in reminder
    assert recorder.types.count("gate") == 1
    assert recorder.view() == snapshot


async def test_verify_runs_only_when_the_run_mutated_files(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    gate = verify(f"touch {marker} && exit 1", workspace=tmp_path, sandbox=Unsandboxed())
    outcome = await run_conversation(
        ScriptedChat([tool_reply(("read", {"path": "x"})), "answer"]),
        tools(tmp_path),
        [UserMessage("q")],
        LoopParams(max_turns=3),
        policies=[gate],
    )
    assert outcome.final == AssistantMessage("answer")
    assert not marker.exists()


async def test_no_command_means_no_gate(tmp_path: Path) -> None:
    gate = verify(workspace=tmp_path)
    assert gate.resolved_command() is None
    outcome = await run_conversation(
        ScriptedChat([tool_reply(("write", {"path": "a", "text": "x"})), "done"]),
        tools(tmp_path),
        [UserMessage("q")],
        LoopParams(max_turns=3),
        policies=[gate],
    )
    assert outcome.final == AssistantMessage("done")


def test_command_resolution(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text(
        json.dumps({"scripts": {"build": "tsc", "check": "x", "test": "jest"}})
    )
    assert resolve_verify_command(tmp_path) == "npm run check"
    (tmp_path / "package.json").write_text(
        json.dumps({"scripts": {"build": "tsc", "type-check": "tsc --noEmit"}})
    )
    assert resolve_verify_command(tmp_path) == "npm run type-check"
    (tmp_path / "pnpm-lock.yaml").write_text("")
    assert resolve_verify_command(tmp_path) == "pnpm run type-check"
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"test": "jest"}}))
    assert resolve_verify_command(tmp_path) is None  # tests are never guessed
    (tmp_path / "Makefile").write_text("VAR := 1\ntypecheck: install\n\tmypy src\n")
    assert resolve_verify_command(tmp_path, "typecheck") == "make typecheck"
    assert resolve_verify_command(tmp_path, "VAR") is None
    (tmp_path / "pyproject.toml").write_text('[tool.pdm.scripts]\nlint = "ruff check ."\n')
    assert resolve_verify_command(tmp_path, "lint") == "pdm run lint"
    assert resolve_verify_command(tmp_path, "test") == "pnpm run test"
    assert resolve_verify_command(tmp_path, "nothing") is None


async def test_run_command_caps_output_and_times_out(tmp_path: Path) -> None:
    code, output = await run_command(
        f"{sys.executable} -c \"print('A' * 3000 + 'B' * 3000)\"",
        tmp_path,
        timeout=30,
        max_output=1000,
        sandbox=Unsandboxed(),
    )
    assert code == 0
    assert output.startswith("A" * 500)
    assert output.rstrip().endswith("B" * 499)
    assert "characters cut" in output
    assert len(output) < 1100
    code, output = await run_command(
        "echo started; sleep 30", tmp_path, timeout=0.3, max_output=100, sandbox=Unsandboxed()
    )
    assert code is None
    assert "started" in output


async def test_verify_gives_up_after_max_retries(tmp_path: Path) -> None:
    chat = ScriptedChat([tool_reply(("write", {"path": "a", "text": "x"})), "done", "done", "done"])
    gate = verify("exit 3", workspace=tmp_path, max_retries=2, sandbox=Unsandboxed())
    outcome = await run_conversation(
        chat, tools(tmp_path), [UserMessage("q")], LoopParams(max_turns=9), policies=[gate]
    )
    assert outcome.final == AssistantMessage("done")
    assert chat.calls == 4


async def test_verify_never_runs_its_command_unconfined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bubblewrap_module, "SYSTEM_PATH", str(tmp_path))  # no bwrap there
    marker = tmp_path / "ran"
    gate = verify(f"touch {marker}", workspace=tmp_path)
    chat = ScriptedChat([tool_reply(("write", {"path": "a", "text": "x"})), "done"])
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        await run_conversation(
            chat,
            tools(tmp_path),
            [UserMessage("q")],
            LoopParams(max_turns=3),
            policies=[gate],
        )
    assert not marker.exists()
    assert chat.calls == 0  # refused at the first turn, before the model acts


async def test_verify_uses_the_runs_sandbox(tmp_path: Path) -> None:
    class Recording(Unsandboxed):
        def __init__(self) -> None:
            self.commands: list[str] = []

        def command(self, command: str, cwd: Path) -> tuple[list[str], Mapping[str, str]]:
            self.commands.append(command)
            return super().command(command, cwd)

    sandbox = Recording()
    engine = Agent(
        ScriptedChat([tool_reply(("write", {"path": "a", "text": "x"})), "done"]),
        tools(tmp_path),
        policies=[verify("true", workspace=tmp_path)],
        sandbox=sandbox,
    )
    outcome = await engine.run("q")
    assert outcome.stopped_reason == "final"
    assert sandbox.commands == ["true"]


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("All good.\nVERDICT: PASS", "PASS"),
        ("Broken: see a.py line 3.\nVERDICT: FAIL", "FAIL"),
        ("Could not run it.\nVERDICT: PARTIAL", "PARTIAL"),
        ("**VERDICT: PASS**\n\n", "PASS"),
        ("verdict: fail", "FAIL"),
        ("VERDICT: PASSED", "PARTIAL"),
        ("VERDICT: PASS\nbut actually I am not sure", "PARTIAL"),
        ("Looks fine to me.", "PARTIAL"),
        ("", "PARTIAL"),
        ("VERDICT: PASS or FAIL", "PARTIAL"),
    ],
)
def test_parse_verdict(text: str, verdict: str) -> None:
    assert parse_verdict(text) == verdict


async def test_verifier_fail_then_pass(
    tmp_path: Path, recorder: Recorder, snapshot: SnapshotAssertion
) -> None:
    reviews: list[list[Message]] = []
    reviewer_tools: list[list[str]] = []

    def model(
        messages: Sequence[Message],
    ) -> Any:
        if messages[0] == SystemMessage(VERIFIER_SYSTEM_PROMPT):
            reviews.append(list(messages))
            if len(reviews) == 1:
                return ChatResult(
                    AssistantMessage("app.txt still says broken.\nVERDICT: FAIL"), Usage(200, 20)
                )
            return ChatResult(AssistantMessage("Fixed.\nVERDICT: PASS"), Usage(210, 5))
        return None

    main = iter(
        [
            tool_reply(("write", {"path": "app.txt", "text": "broken"})),
            AssistantMessage("done"),
            tool_reply(("write", {"path": "app.txt", "text": "ok"})),
            AssistantMessage("done now"),
        ]
    )

    class Chat:
        async def __call__(
            self,
            messages: Sequence[Message],
            tools: Sequence[ToolSpec],
            *,
            temperature: float | None = None,
            max_tokens: int | None = None,
            signal: object = None,
            on_delta: object = None,
        ) -> ChatResult:
            reviewed = model(messages)
            if reviewed is not None:
                reviewer_tools.append([t.name for t in tools])
                return reviewed  # type: ignore[no-any-return]
            return ChatResult(next(main), Usage(1000, 10))

    outcome = await run_conversation(
        Chat(),
        tools(tmp_path),
        [UserMessage("make app.txt say ok")],
        LoopParams(max_turns=8),
        emitter=recorder.emitter,
        policies=[verifier()],
    )
    assert outcome.final == AssistantMessage("done now")
    assert len(reviews) == 2
    # The reviewer only gets read-only tools, and sees the task, the answer, the changes.
    assert reviewer_tools == [["read"], ["read"]]
    first_prompt = reviews[0][-1].content
    assert "make app.txt say ok" in first_prompt
    assert "done" in first_prompt
    assert "- app.txt" in first_prompt
    # The re-check asks only about the previous reasons.
    assert "app.txt still says broken." in reviews[1][-1].content
    assert "re-check" in reviews[1][-1].content
    # The reviewer's tokens count in the run totals.
    assert outcome.usage == Usage(4 * 1000 + 200 + 210, 4 * 10 + 20 + 5)
    assert recorder.view() == snapshot


async def test_verifier_garbled_or_failing_never_passes_falsely(tmp_path: Path) -> None:
    for review in ["I think it is fine", RuntimeError("reviewer down")]:

        def model(messages: Sequence[Message], review: Any = review) -> Any:
            if messages[0] == SystemMessage(VERIFIER_SYSTEM_PROMPT):
                if isinstance(review, BaseException):
                    raise review
                return review
            return "answer"

        gate = verifier()
        chat = ScriptedChat(model)
        outcome = await run_conversation(
            chat, None, [UserMessage("q")], LoopParams(max_turns=3), policies=[gate]
        )
        # PARTIAL: not a FAIL (no extra turn), and recorded as PARTIAL, never PASS.
        assert outcome.final == AssistantMessage("answer")


async def test_read_only_tools_refuse_writes(tmp_path: Path) -> None:
    from agentfsm.policies._verifier import ReadOnlyTools

    wrapped = ReadOnlyTools(tools(tmp_path))
    assert [s.name for s in wrapped.specs()] == ["read"]
    refused = await wrapped.run(ToolCall("c", "write", {"path": "a", "text": "x"}))
    assert not refused.ok
    assert "read-only" in (refused.error or "")
    assert not (tmp_path / "a").exists()


def test_verifier_prompt_guards_against_new_objections() -> None:
    prompt = VERIFIER_SYSTEM_PROMPT
    assert "NOT grounds for FAIL" in prompt
    assert "Do not invent new requirements or objections" in prompt
    assert "Do not raise the bar" in prompt
    assert prompt.rstrip().endswith("VERDICT: PARTIAL")


def test_only_a_regular_definition_file_is_read(tmp_path: Path) -> None:
    """The check command comes from a regular ``package.json``: a missing one, a symlink to
    one or a FIFO named so gives no command (and the FIFO never blocks the read)."""
    scripts = json.dumps({"scripts": {"check": "tsc --noEmit"}})
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "package.json").write_text(scripts, "utf-8")
    assert resolve_verify_command(tmp_path / "real") == "npm run check"
    assert resolve_verify_command(tmp_path) is None  # no package.json
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "package.json").symlink_to(tmp_path / "real" / "package.json")
    assert resolve_verify_command(tmp_path / "linked") is None
    (tmp_path / "dangling").mkdir()
    (tmp_path / "dangling" / "package.json").symlink_to(tmp_path / "nowhere.json")
    assert resolve_verify_command(tmp_path / "dangling") is None
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "package.json")
    assert resolve_verify_command(tmp_path / "fifo") is None


async def test_the_verify_gate_hooks_are_coroutines_checking_the_first_turns_command(
    tmp_path: Path,
) -> None:
    """``check_turn`` and ``check_final`` are plain async functions: the first turn reads the
    command and notes it, later turns and a final answer of a run that changed no file give
    ``None``, and a changed definition is refused against the command read at the first
    turn."""
    import inspect

    from agentfsm.engine._context import RunContext
    from agentfsm.engine._policy import Notice, Retry

    assert inspect.iscoroutinefunction(verify.check_turn)
    assert inspect.iscoroutinefunction(verify.check_final)
    assert inspect.iscoroutinefunction(verifier.check_final)
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"check": "true"}}), "utf-8")
    gate = verify(workspace=tmp_path, sandbox=Unsandboxed())
    ctx = RunContext(params=LoopParams(max_turns=3), history=[])
    ctx.turn = 1
    note = await gate.check_turn(ctx)
    assert isinstance(note, Notice)
    assert note.event.reason == "verify command: npm run check (defined in package.json)"
    ctx.turn = 2
    assert await gate.check_turn(ctx) is None
    assert await gate.check_final(ctx) is None  # nothing changed: nothing to check
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"check": "rm -rf ."}}))
    ctx.mutations = 1
    refused = await gate.check_final(ctx)
    assert isinstance(refused, Retry)
    assert "package.json changed during this run" in refused.reminder

    reviewer = verifier()
    assert (
        await reviewer.check_final(RunContext(params=LoopParams(max_turns=3), history=[])) is None
    )
