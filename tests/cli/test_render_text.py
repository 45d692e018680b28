"""The renderers print whatever text a run produces: lone surrogates (what Python makes of a
non-UTF-8 file name) and U+2028 in model replies, tool calls and tool output."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from agentfsm.adapters.sessions import default_session_dir
from agentfsm.cli import main
from agentfsm.cli._render import HumanRenderer, JsonRenderer, QuietRenderer, last_words
from agentfsm.engine._events import TextDeltaEvent, ToolCallEndEvent, ToolCallStartEvent
from agentfsm.engine._messages import AssistantMessage, ToolCall, ToolResult, UserMessage
from agentfsm.engine._params import LoopOutcome
from agentfsm.engine._serialization import structure_event
from agentfsm.testing import ScriptedChat, tool_reply

from .conftest import sandbox_options

SANDBOX = sandbox_options()
ODD = "caf\udcff \u2028 é"


def run(workspace: Path, *extra: str) -> int:
    chat = ScriptedChat([tool_reply(("read_file", {"path": ODD}), content=ODD), f"done {ODD}"])
    return main(
        ["run", "go", "--workspace", str(workspace), *SANDBOX, *extra],
        chat=chat,
    )


def test_json_lines_are_valid_and_complete(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(workspace, "--json") == 0
    lines = capsys.readouterr().out.split("\n")
    assert lines[-1] == ""
    assert json.loads(lines[-2])["type"] == "run_end"
    events = [structure_event(json.loads(line)) for line in lines[:-2]]
    kinds = [e.type for e in events if not e.type.endswith("_delta")]
    assert kinds.count("llm_end") == 2
    assert kinds[-2:] == ["final", "turn_end"]
    final = next(e for e in events if e.type == "final")
    assert final.message.content == f"done {ODD}"


@pytest.mark.parametrize("mode", [[], ["--quiet"]])
def test_human_and_quiet_output_print(
    workspace: Path, capsys: pytest.CaptureFixture[str], mode: list[str]
) -> None:
    assert run(workspace, *mode) == 0
    out = capsys.readouterr().out
    assert "done caf\\udcff \u2028 é" in out


def test_json_renderer_falls_back_to_ascii_escapes() -> None:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="ascii", write_through=True)
    renderer = JsonRenderer(out)
    call = ToolCall("c1", "t", {"path": ODD})
    renderer.on_event(ToolCallEndEvent(turn=1, call=call, result=ToolResult(True, ODD)))
    line = raw.getvalue().decode("ascii")
    event = structure_event(json.loads(line))
    assert event.result.output == ODD  # type: ignore[union-attr]


def test_human_renderer_escapes_what_the_stream_cannot_take(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="ascii", write_through=True)
    monkeypatch.setattr("sys.stdout", out)
    renderer = HumanRenderer(console=None)
    outcome = LoopOutcome([UserMessage("go")], AssistantMessage(ODD), None, 1, "final")
    renderer.on_event(TextDeltaEvent(turn=1, text=ODD))
    renderer.on_event(ToolCallStartEvent(turn=1, call=ToolCall("c1", ODD, {"path": ODD})))
    renderer.summary(outcome)
    QuietRenderer().summary(outcome)
    text = raw.getvalue().decode("ascii")
    assert text.count("caf\\udcff \\u2028 \\xe9") == 4  # the delta, the call twice, the final


def test_last_words_of_a_capped_run() -> None:
    outcome = LoopOutcome(
        [UserMessage("go"), AssistantMessage("working"), AssistantMessage("", ())],
        None,
        None,
        2,
        "budget",
    )
    assert last_words(outcome) == "working"
    assert last_words(LoopOutcome([], None, None, 0, "budget")) is None


def test_a_capped_run_shows_its_last_words(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reply = tool_reply(("list_dir", {}), content="Still going: two files left.")
    code = main(
        ["run", "go", "--workspace", str(workspace), *SANDBOX, "--max-turns", "2"],
        chat=ScriptedChat([reply] * 3),
    )
    assert code == 3
    out = capsys.readouterr().out
    summary = out[out.rindex("list_dir") :]
    assert "Still going: two files left." in summary
    assert "budget" in summary


def test_sessions_show_and_trace_print_a_session_with_surrogates(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(workspace, "--quiet") == 0
    capsys.readouterr()
    session_dir = str(default_session_dir(workspace))
    assert main(["sessions", "show", "latest", "--session-dir", session_dir]) == 0
    assert "[assistant] done caf\\udcff \u2028 é" in capsys.readouterr().out
    assert main(["trace", "latest", "--session-dir", session_dir]) == 0
    assert "tool calls: read_file x1" in capsys.readouterr().out
