"""Each check owns its invariant on a recorded corpus; the corpus tier only asks the checks."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from pathlib import Path

from attrs import evolve

from agentfsm.adapters.providers import OpenAIChat, RetryPolicy
from agentfsm.conformance import RecordedExchange, RecordedTarget, Verdict, run_corpus
from agentfsm.conformance import _corpus as corpus_module
from agentfsm.conformance._checks import ALL_CHECKS, by_id
from agentfsm.conformance._model import Check

WITH_INVARIANT = {
    "W1", "W2", "W3", "W4", "W5", "A1", "A2", "A3", "T1", "T2", "T3", "T5", "T6", "T8", "T11",
    "T13", "T16", "U1", "U3", "U4", "U5", "E1", "E2", "E3", "E4", "E5", "E6", "E7",
}  # fmt: skip
UNEXERCISED = "no recorded file exercises this"


def target() -> RecordedTarget:
    once = RetryPolicy(max_attempts=1)
    return RecordedTarget(lambda url: OpenAIChat("m", base_url=url, retry=once), name="project")


def small_corpus(folder: Path) -> Path:
    """A text stream with usage, a streamed tool call, and an empty 200 stream."""
    text = [
        {"model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]},
        {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}},
    ]
    call = {"index": 0, "id": "call_1", "function": {"name": "get_time", "arguments": ""}}
    tool = [
        {"model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
        {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    for name, payloads in (("text.jsonl", text), ("tool.jsonl", tool)):
        (folder / name).write_text("".join(json.dumps(p) + "\n" for p in payloads), "utf-8")
    (folder / "empty.sse").write_bytes(b"")
    return folder


def test_the_checks_that_declare_a_corpus_invariant() -> None:
    assert {c.id for c in ALL_CHECKS if c.corpus is not None} == WITH_INVARIANT


def test_corpus_py_names_no_check() -> None:
    """No check id picks logic in the corpus tier: the invariants live in the checks."""
    source = Path(corpus_module.__file__).read_text("utf-8")
    ids = {c.id for c in ALL_CHECKS}
    literals = {
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    assert not {text for text in literals if text in ids or re.fullmatch(r"[A-Z]\d+", text)}
    assert "_v(" not in source


async def test_every_invariant_is_asked_through_its_check(tmp_path: Path) -> None:
    asked: Counter[str] = Counter()

    def spied(check: Check) -> Check:
        judge = check.corpus
        if judge is None:
            return check

        def spy(exchange: RecordedExchange) -> Verdict | None:
            asked[check.id] += 1
            return judge(exchange)

        return evolve(check, corpus=spy)

    folder = small_corpus(tmp_path)
    report = await run_corpus(target(), folder, checks=[spied(c) for c in ALL_CHECKS])
    assert set(asked) == WITH_INVARIANT
    assert set(asked.values()) == {3}  # each invariant is asked about each exchange
    judged = {r.check for r in report.results if r.message != UNEXERCISED}
    assert judged <= WITH_INVARIANT
    assert {"W1", "W3", "W4", "A1", "A2", "T1", "T6", "T11", "U1"} <= judged
    assert report.results == (await run_corpus(target(), folder)).results


async def test_a_check_s_own_invariant_alone_decides_its_result(tmp_path: Path) -> None:
    folder = small_corpus(tmp_path)

    def never(exchange: RecordedExchange) -> Verdict:
        return Verdict(False, "nothing", f"{exchange.reply.status}")

    def always(_exchange: RecordedExchange) -> Verdict:
        return Verdict(True, "anything")

    a1, c1 = evolve(by_id("A1"), corpus=never), evolve(by_id("C1"), corpus=always)
    report = await run_corpus(target(), folder, checks=[a1, c1, by_id("T8")])
    got = {r.check: (r.outcome, r.message) for r in report.results}
    assert got["A1"][0] == "fail"
    assert got["A1"][1].startswith("fails on 3 of 3 recorded files (")
    assert got["C1"] == ("pass", "holds on 3 recorded files")  # a check without one, given one
    assert got["T8"] == ("skip", UNEXERCISED)  # no parallel calls in this corpus
