"""The recorded-corpus tier: the real recorded exchanges of the bundled corpus, through adapters."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from attrs import evolve

from agentfsm.adapters.providers import AnthropicChat, OpenAIChat, ProviderError, RetryPolicy
from agentfsm.conformance import (
    RecordedTarget,
    Report,
    corpus_files,
    matrix_markdown,
    report_markdown,
    run_corpus,
)
from agentfsm.conformance._bundled import bundled_corpus, corpus_index
from agentfsm.conformance._checks import ALL_CHECKS
from agentfsm.conformance._context import Wire
from agentfsm.engine._messages import AssistantMessage, ChatResult
from agentfsm.engine._protocols import ChatFn

from .wrappers import Wrapper

WIRE = bundled_corpus()  # a missing corpus fails the collection; it is never skipped

OPENAI_PASSES = {
    "W1", "W2", "W3", "W4", "W5", "A1", "A2", "A3", "T1", "T2", "T3", "T5", "T6", "T8",
    "T11", "T13", "T16", "U1", "U3", "U4", "U5", "E1", "E2", "E3", "E7",
}  # fmt: skip
ANTHROPIC_PASSES = {
    "W1", "W2", "W4", "W5", "A1", "A2", "T1", "T2", "T5", "T6", "T8", "T11", "T16", "U1",
    "U3", "U4", "E1", "E2", "E3", "E5", "E7",
}  # fmt: skip


def project_adapter(wire: Wire) -> Callable[[str], ChatFn]:
    once = RetryPolicy(max_attempts=1)
    if wire == "anthropic":
        return lambda url: AnthropicChat("recorded", base_url=url, retry=once)
    return lambda url: OpenAIChat("recorded", base_url=url, retry=once)


class Broken(Wrapper):
    """The project adapter with one deliberate defect."""

    def __init__(self, inner: ChatFn, defect: str) -> None:
        super().__init__(inner)
        self.defect = defect

    async def __call__(self, *args: Any, **options: Any) -> ChatResult:
        if self.defect == "crash":
            raise RuntimeError("boom")
        if self.defect == "drop_deltas":
            options["on_delta"] = None
        try:
            result = await super().__call__(*args, **options)
        except ProviderError:
            if self.defect == "swallow_errors":
                return ChatResult(AssistantMessage(""), finish_reason="stop")
            raise
        calls = result.message.tool_calls
        if self.defect == "stop_despite_tools" and calls:
            return evolve(result, finish_reason="stop")
        if self.defect == "duplicate_ids" and calls:
            same = tuple(evolve(call, id=calls[0].id) for call in calls)
            return evolve(result, message=evolve(result.message, tool_calls=same))
        if self.defect == "drop_usage":
            return evolve(result, usage=None)
        return result


def broken(wire: Wire, defect: str, xfail: Mapping[str, str] | None = None) -> RecordedTarget:
    build = project_adapter(wire)
    name = f"broken ({defect})"
    return RecordedTarget(
        lambda url: Broken(build(url), defect), wire, name=name, xfail=xfail or {}
    )


def outcomes(report: Report) -> dict[str, str]:
    return {r.check: r.outcome for r in report.results}


def message(report: Report, check_id: str) -> str:
    return next(r.message for r in report.results if r.check == check_id)


def test_corpus_files_split_the_supported_files_between_the_wires() -> None:
    everything = sorted(WIRE / entry["file"] for entry in corpus_index(WIRE)["exchanges"])
    openai, anthropic = corpus_files(WIRE, "openai-chat"), corpus_files(WIRE, "anthropic")
    assert corpus_files(None, "anthropic") == anthropic  # None: the bundled corpus
    assert len(everything) == 80
    assert (len(openai), len(anthropic)) == (51, 20)
    assert not set(openai) & set(anthropic)
    left_out = sorted(f"{p.parent.name}/{p.name}" for p in set(everything) - {*openai, *anthropic})
    assert len(left_out) == 9  # 8 Gemini-native files, 1 Responses-API file
    assert [p for p in left_out if not p.startswith("gemini/")] == [
        "openai/error_400_context_length_exceeded_responses__crmne-ruby_llm.json"
    ]
    assert all(p.parent.name == "anthropic" for p in anthropic)


async def test_the_project_adapters_pass_the_recorded_corpus() -> None:
    seen: list[str] = []
    openai = await run_corpus(
        RecordedTarget(project_adapter("openai-chat"), "openai-chat", name="openai-chat"),
        WIRE,
        progress=lambda result: seen.append(result.check),
    )
    anthropic = await run_corpus(
        RecordedTarget(project_adapter("anthropic"), "anthropic", name="anthropic"), WIRE
    )
    assert seen == [c.id for c in ALL_CHECKS]
    for report, passes, files in ((openai, OPENAI_PASSES, 51), (anthropic, ANTHROPIC_PASSES, 20)):
        assert report.failed == [], report_markdown(report)
        assert report.mode == "recorded"
        assert report.target.endswith(f"on recorded corpus ({files} files)")
        assert {c for c, outcome in outcomes(report).items() if outcome == "pass"} == passes
        assert set(outcomes(report).values()) == {"pass", "skip"}
        assert message(report, "W1") == f"holds on {files} recorded files"
        assert message(report, "C1") == "no recorded file exercises this"
        assert all(r.mode == "recorded" for r in report.results)
    assert (openai.wire, anthropic.wire) == ("openai-chat", "anthropic")
    assert openai.target == "openai-chat on recorded corpus (51 files)"
    # W1 applies to every file: together the two wires cover all 71 files that are neither
    # Gemini-native nor Responses-API (80 - 8 - 1).
    assert len(corpus_files(WIRE, "openai-chat") + corpus_files(WIRE, "anthropic")) == 71
    assert len(OPENAI_PASSES | ANTHROPIC_PASSES) == 26

    markdown = report_markdown(openai)
    assert markdown.startswith("# Conformance: openai-chat on recorded corpus (51 files)")
    assert "| W4 | `sse.error_in_200` | ✓ pass | holds on 2 recorded files |" in markdown
    data = json.loads(json.dumps(anthropic.as_dict()))
    assert Report.from_dict(data).results == anthropic.results
    assert (data["wire"], data["mode"]) == ("anthropic", "recorded")
    matrix = matrix_markdown([openai, anthropic])
    assert matrix.splitlines()[0].startswith(
        "| check | openai-chat on recorded corpus (51 files) |"
    )


async def test_swallowing_errors_fails_the_error_checks() -> None:
    report = await run_corpus(broken("openai-chat", "swallow_errors"), WIRE)
    got = outcomes(report)
    assert {c for c, o in got.items() if o == "fail"} == {"W4", "W5", "E1", "E2", "E3", "E7"}
    assert "groq/chat_stream_midstream_error_event_then_retry__pydantic-ai #0" in message(
        report, "W4"
    )
    assert "openai/error_401_invalid_api_key_chat__crmne-ruby_llm" in message(report, "E1")
    w5 = next(r for r in report.results if r.check == "W5")
    assert w5.message.startswith("fails on 17 of 17 recorded files (")
    assert str(w5.expected).startswith("a ProviderError with status")
    assert str(w5.got).startswith("a success (finish 'stop'")
    assert got["A1"] == got["T1"] == "pass"  # the successes are untouched

    anthropic = await run_corpus(broken("anthropic", "swallow_errors"), WIRE)
    assert "anthropic/error_529_overloaded_http__issue-anthropic-sdk-typescript-616" in (
        message(anthropic, "E5")
    )
    assert outcomes(anthropic)["E5"] == "fail"


async def test_dropping_text_deltas_fails_text_conservation() -> None:
    report = await run_corpus(broken("openai-chat", "drop_deltas"), WIRE)
    assert [r.check for r in report.failed] == ["A2"]
    text = message(report, "A2")
    assert "openai/chat_stream_text_include_usage__posit-dev-chatlas" in text
    assert "expected equal texts; got deltas ''" in text


async def test_a_stop_finish_despite_tool_calls_fails_t2() -> None:
    report = await run_corpus(broken("anthropic", "stop_despite_tools"), WIRE)
    assert [r.check for r in report.failed] == ["T2"]
    t2 = report.failed[0]
    assert "anthropic/messages_stream_tool_use_input_json_delta__simonw-llm-anthropic" in (
        t2.message
    )
    assert (t2.expected, t2.got) == ("finish 'tool_calls' (recorded ['tool_use'])", "stop")


async def test_duplicated_tool_call_ids_fail_t8() -> None:
    report = await run_corpus(broken("openai-chat", "duplicate_ids"), WIRE)
    assert [r.check for r in report.failed] == ["T8"]
    text = message(report, "T8")
    assert text.startswith("fails on 6 of 6 recorded files (")
    assert "openai/chat_stream_parallel_tool_calls_response_only__openai-openai-python" in text


async def test_dropping_usage_fails_the_usage_checks() -> None:
    report = await run_corpus(broken("anthropic", "drop_usage"), WIRE)
    assert [r.check for r in report.failed] == ["U1", "U3", "U4"]
    text = message(report, "U1")
    assert "anthropic/messages_nonstream_text__tidyverse-ellmer" in text
    assert "expected usage with non-negative integer counts; got None" in text


async def test_an_adapter_that_raises_something_else_fails_w1_and_xfail_is_honoured() -> None:
    report = await run_corpus(broken("anthropic", "crash", xfail={"W1": "known crash"}), WIRE)
    w1 = next(r for r in report.results if r.check == "W1")
    assert w1.outcome == "xfail"
    assert "unexpected RuntimeError: boom" in w1.message
    assert "anthropic/messages_stream_text__simonw-llm-anthropic" in w1.message
    assert w1.message.endswith("; xfail: known crash")
    assert report.failed == []  # nothing else can be judged without an answer

    fine = await run_corpus(
        RecordedTarget(project_adapter("anthropic"), "anthropic", xfail={"A1": "stale"}), WIRE
    )
    a1 = next(r for r in fine.results if r.check == "A1")
    assert (a1.outcome, a1.message) == (
        "pass",
        "holds on 11 recorded files; passes although marked xfail (stale)",
    )


async def test_an_empty_200_stream_must_be_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty.sse").write_bytes(b"")  # what llama-cpp-python sends (Q26)
    assert outcomes(await run_corpus(project_target("openai-chat"), tmp_path))["W4"] == "pass"
    report = await run_corpus(broken("openai-chat", "swallow_errors"), tmp_path)
    assert [r.check for r in report.failed] == ["W4"]
    assert "empty.sse" in message(report, "W4")


def project_target(wire: Wire) -> RecordedTarget:
    return RecordedTarget(project_adapter(wire), wire, name="project adapter")
