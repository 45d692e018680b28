"""The kit itself: wire checks, reports, the CLI, record and replay, the pytest plugin."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agentfsm.adapters.providers import (
    AnthropicChat,
    OpenAIChat,
    ProviderError,
    ReplayTransport,
    RetryPolicy,
    Timeouts,
    load_wire_fixture,
)
from agentfsm.cli import main
from agentfsm.conformance import (
    Capabilities,
    LiveTarget,
    RecordedTarget,
    Report,
    matrix_markdown,
    report_markdown,
    run_check,
    run_checks,
)
from agentfsm.conformance._checks import ALL_CHECKS, by_id
from agentfsm.conformance._frames import DONE, chunk
from agentfsm.engine._messages import AssistantMessage, ChatResult, Message, ToolSpec, UserMessage
from agentfsm.testing import FakeProviderServer, Reply

FAST = Timeouts(connect=2, first_byte=5, idle=5, terminal_grace=0.3)
RETRY = RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.05, jitter=0)


def good(wire: str) -> RecordedTarget:
    if wire == "anthropic":
        return RecordedTarget(
            lambda url: AnthropicChat("m", base_url=url, retry=RETRY, timeouts=FAST), "anthropic"
        )
    return RecordedTarget(lambda url: OpenAIChat("m", base_url=url, retry=RETRY, timeouts=FAST))


def test_there_are_at_least_forty_checks_in_six_groups() -> None:
    assert len(ALL_CHECKS) >= 40
    assert {c.group for c in ALL_CHECKS} == {
        "wire",
        "answers",
        "tools",
        "usage",
        "errors",
        "control",
    }
    for check in ALL_CHECKS:
        assert check.sends, check.id
        assert check.asserts, check.id
        assert check.modes, check.id
        assert all(Capabilities().has(n) or hasattr(Capabilities(), n) for n in check.needs), (
            check.id
        )


class SwallowsErrors:
    """Broken: reports whatever text arrived before an error as a success."""

    def __init__(self, url: str) -> None:
        self.inner = OpenAIChat("m", base_url=url, retry=RetryPolicy(max_attempts=1), timeouts=FAST)

    async def __call__(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], **kw: Any
    ) -> ChatResult:
        try:
            return await self.inner(messages, tools, **kw)
        except ProviderError:
            return ChatResult(AssistantMessage(""))


class Strict:
    """Broken: insists on canonical framing and gives up on anything else."""

    def __init__(self, url: str) -> None:
        self.inner = OpenAIChat(
            "m",
            base_url=url,
            retry=RetryPolicy(max_attempts=1),
            timeouts=Timeouts(connect=2, first_byte=5, idle=30, terminal_grace=30),
        )

    async def __call__(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], **kw: Any
    ) -> ChatResult:
        result = await self.inner(messages, tools, **kw)
        if result.usage is None:
            raise RuntimeError("no usage")
        return ChatResult(AssistantMessage(result.message.content.replace("pong", "")), None)


@pytest.mark.parametrize("wire", ["openai-chat", "anthropic"])
@pytest.mark.parametrize("check_id", ["W1", "W2", "W3", "W4", "W5"])
async def test_wire_checks_pass_on_the_project_adapters(check_id: str, wire: str) -> None:
    result = await run_check(by_id(check_id), good(wire))
    assert result.outcome in ("pass", "pass-normalized"), result


@pytest.mark.parametrize(
    ("check_id", "broken"),
    [
        ("W1", Strict),
        ("W2", Strict),
        ("W3", Strict),
        ("W4", SwallowsErrors),
        ("W5", SwallowsErrors),
    ],
)
async def test_wire_checks_fail_on_broken_adapters(check_id: str, broken: type) -> None:
    result = await run_check(by_id(check_id), RecordedTarget(broken))
    assert result.outcome == "fail", result
    assert result.message.startswith("expected") or result.message.startswith("unexpected")


async def test_outcomes_skip_and_xfail() -> None:
    target = RecordedTarget(SwallowsErrors, xfail={"W4": "our gateway hides stream errors (known)"})
    xfailed = await run_check(by_id("W4"), target)
    assert xfailed.outcome == "xfail"
    assert "our gateway" in xfailed.message
    no_stream = RecordedTarget(SwallowsErrors, capabilities=Capabilities(streaming=False))
    skipped = await run_check(by_id("W1"), no_stream)
    assert (skipped.outcome, skipped.message) == (
        "skip",
        "capability absent: streaming (run it with --capability streaming; in code: "
        "Capabilities(streaming=True))",
    )


async def test_failure_messages_name_expected_got_and_quirk() -> None:
    result = await run_check(by_id("W4"), RecordedTarget(SwallowsErrors))
    assert "expected an error, never a success; got a success" in result.message
    assert "known quirk: Q26, Q28" in result.message


async def test_full_recorded_run_and_reports(tmp_path: Path) -> None:
    report = await run_checks(good("openai-chat"))
    counts = report.counts()
    assert counts.get("fail", 0) == 0, [r for r in report.results if r.outcome == "fail"]
    assert counts.get("pass-normalized", 0) >= 5
    markdown = report_markdown(report)
    assert markdown.startswith("# Conformance: adapter")
    assert "| W1 | `sse.field_tolerance` | ⚠ pass-normalized |" in markdown
    data = report.as_dict()
    again = Report.from_dict(json.loads(json.dumps(data)))
    assert again.results == report.results
    matrix = matrix_markdown([report, again])
    assert matrix.splitlines()[0] == "| check | adapter | adapter |"


def test_cli_conformance_against_a_scripted_endpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeProviderServer() as server:

        def answer(request: Any) -> Reply:
            body = request.json()
            if body.get("stream"):
                return Reply.sse(
                    [
                        chunk({"content": "pong"}),
                        chunk({}, finish="stop"),
                        chunk(
                            choices=False,
                            usage={"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
                        ),
                        DONE,
                    ]
                )
            return Reply.json(
                {
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "pong"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
                    "model": "fake",
                }
            )

        server.handler = answer
        out, md, rec = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "wire"
        code = main(
            [
                "conformance",
                "--base-url",
                f"{server.base_url}/v1",
                "--model",
                "fake",
                "--only",
                "answers",
                "--out",
                str(out),
                "--markdown",
                str(md),
                "--record",
                str(rec),
                "--name",
                "fake-server",
            ]
        )
    report = json.loads(out.read_text("utf-8"))
    assert report["target"] == "fake-server"
    assert {r["group"] for r in report["results"]} == {"answers"}
    assert code == (1 if any(r["outcome"] == "fail" for r in report["results"]) else 0)
    assert md.read_text("utf-8").startswith("# Conformance: fake-server")
    recorded = sorted(rec.glob("*.json"))
    assert recorded
    # Record -> replay: a saved exchange serves the adapter again.
    fixture = load_wire_fixture(recorded[0])
    assert fixture.responses[0].status == 200
    assert main(["conformance", "matrix", str(out), str(out)]) == 0
    assert "| check | fake-server | fake-server |" in capsys.readouterr().out
    assert main(["conformance", "matrix", str(tmp_path / "missing.json")]) == 2
    assert main(["conformance", "--model", "x"]) == 2  # --base-url is required


async def test_recordings_replay_through_the_adapter(tmp_path: Path) -> None:
    import httpx

    with FakeProviderServer() as server:
        server.handler = lambda request: Reply.sse(
            [chunk({"content": "recorded"}), chunk({}, finish="stop"), DONE]
        )
        target = LiveTarget(
            f"{server.base_url}/v1", "m", record_dir=tmp_path, api_key="sk-test-SECRET-0123456789"
        )
        await run_checks(target, [by_id("A2")])
    files = sorted(tmp_path.glob("*.json"))
    assert files
    text = files[0].read_text("utf-8")
    assert "sk-test-SECRET" not in text
    fixture = load_wire_fixture(files[0])
    async with httpx.AsyncClient(transport=ReplayTransport(fixture.responses)) as client:
        result = await OpenAIChat("m", base_url="http://replay/v1", http_client=client)(
            [UserMessage("x")], []
        )
    assert result.message.content == "recorded"


def test_plugin_example_from_the_docs(tmp_path: Path) -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
    import re

    (example,) = [
        b
        for b in re.findall(r"```python\n(.*?)```", docs.read_text("utf-8"), re.S)
        if "ProviderConformance" in b
    ]
    (tmp_path / "test_my_provider.py").write_text(example, "utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(tmp_path / "test_my_provider.py"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    summary = done.stdout.strip().splitlines()[-1]
    assert "passed" in summary, summary
    assert "failed" not in summary, summary
    assert int(summary.split(" passed")[0].split()[-1]) >= 30


def test_overriding_a_check_without_a_reason_fails(tmp_path: Path) -> None:
    (tmp_path / "test_bad.py").write_text(
        "from agentfsm.adapters.providers import OpenAIChat\n"
        "from agentfsm.conformance import ProviderConformance\n\n"
        "class TestBad(ProviderConformance):\n"
        "    xfail = {'T3': ''}\n"
        "    def adapter(self, base_url):\n"
        "        return OpenAIChat('m', base_url=base_url)\n"
        "    def test_conformance(self, conformance_check, conformance_mode):\n"
        "        pass\n",
        "utf-8",
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "no_silent",
            str(tmp_path / "test_bad.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert "do not override test_conformance" in done.stdout


def test_cli_corpus_replays_recordings(tmp_path: Path) -> None:
    """--record, then `conformance corpus` on that folder: a live failure becomes a replay."""
    with FakeProviderServer() as server:
        server.handler = lambda request: Reply.sse(
            [chunk({"content": "recorded"}), chunk({}, finish="stop"), DONE]
        )
        target = LiveTarget(f"{server.base_url}/v1", "m", record_dir=tmp_path / "wire")
        asyncio.run(run_checks(target, [by_id("A1"), by_id("A2")]))
    out = tmp_path / "corpus.json"
    assert main(["conformance", "corpus", str(tmp_path / "wire"), "--out", str(out)]) == 0
    report = json.loads(out.read_text("utf-8"))
    passed = {r["check"] for r in report["results"] if r["outcome"] == "pass"}
    assert {"W1", "A1", "A2"} <= passed
    assert main(["conformance", "corpus", str(tmp_path / "nowhere")]) == 2
    # A recorded empty 200 stream must come out of the adapter as an error (W4).
    (tmp_path / "wire" / "empty.sse").write_bytes(b"")
    assert main(["conformance", "corpus", str(tmp_path / "wire"), "--out", str(out)]) == 0
    report = json.loads(out.read_text("utf-8"))
    w4 = next(r for r in report["results"] if r["check"] == "W4")
    assert w4["outcome"] == "pass"
    assert w4["message"] == "holds on 1 recorded file"


def test_plugin_replays_a_corpus_through_the_users_adapter(tmp_path: Path) -> None:
    wire = tmp_path / "recordings"
    wire.mkdir()
    (wire / "empty.sse").write_bytes(b"")  # an empty 200 stream: must become an error
    (wire / "hello.sse").write_text(
        chunk({"role": "assistant", "content": "Hello"}) + chunk({}, finish="stop") + DONE,
        "utf-8",
    )
    (tmp_path / "test_corpus_provider.py").write_text(
        "from agentfsm.adapters.providers import OpenAIChat, RetryPolicy\n"
        "from agentfsm.conformance import ProviderConformance\n\n"
        "class TestWithCorpus(ProviderConformance):\n"
        f"    corpus = {str(wire)!r}\n"
        "    def adapter(self, base_url):\n"
        "        return OpenAIChat('m', base_url=base_url, retry=RetryPolicy(max_attempts=1))\n",
        "utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-k", "corpus-"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    for check in ("W1", "W4", "A1", "A2"):
        assert re.search(rf"corpus-{check}-\S+\] PASSED", done.stdout), (check, done.stdout[-3000:])
    assert re.search(r"corpus-T2-\S+\] SKIPPED", done.stdout)
