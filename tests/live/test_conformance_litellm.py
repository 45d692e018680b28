"""The slow tier: the conformance kit through a real LiteLLM proxy, on both of its wires.

The LiteLLM proxy (``litellm[proxy]`` 1.108.7, its own virtualenv: ``make litellm-venv``)
routes to the embedded llama-cpp-python server; the kit runs through the CLI as a user runs
it, on the OpenAI wire and on the Anthropic wire. Each verdict asserted here was checked by
hand against the raw bytes, and the decisive raw facts are measured again in the same run
(``RawFacts``), so a verdict and the bytes it stands on are asserted side by side.

Set ``AGENTFSM_LITELLM_REPORTS=DIR`` to keep the two reports (json and markdown) in DIR.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live.litellm_proxy import LITELLM_BIN, LITELLM_VENV, LiteLLMProxy, litellm_proxy

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
QUIRKS_DOC = ROOT / "docs" / "conformance.md"
WIRES = ("openai-chat", "anthropic")
NAMES = {
    "openai-chat": "LiteLLM 1.108.7 → llama-cpp-python 0.3.36 + SmolLM2-135M-Instruct (OpenAI wire)",
    "anthropic": "LiteLLM 1.108.7 → llama-cpp-python 0.3.36 + SmolLM2-135M-Instruct (Anthropic wire)",
}
KEY_ENV = "AGENTFSM_LITELLM_TEST_KEY"
# A1's prompt in the kit; the raw measurement below sends the same text.
PONG = "Reply with the single word PONG."
WEATHER = "What is the weather in Paris? Use the get_weather tool."
SYSTEM = "You are a helpful assistant that calls functions."
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER_TOOL = "Get the current weather for a city."
OPENAI_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "description": WEATHER_TOOL, "parameters": SCHEMA},
}
ANTHROPIC_TOOL = {"name": "get_weather", "description": WEATHER_TOOL, "input_schema": SCHEMA}


@dataclass
class RawFacts:
    """What the proxy and the server do, measured with plain HTTP in the same run."""

    a1_string_tokens: int = 0
    a1_block_tokens: int = 0
    a1_direct_list_tokens: int = 0
    t15_tokens: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    t16_direct_body: bytes = b"-"
    t16_openai_frames: list[dict[str, Any]] = field(default_factory=list)
    t16_anthropic_events: list[dict[str, Any]] = field(default_factory=list)
    e1_wrong_key: dict[str, tuple[int, str]] = field(default_factory=dict)
    tool_use_ids: list[str] = field(default_factory=list)
    tool_result_tokens: tuple[int, int] = (0, 0)
    usage_unstreamed: int = 0
    usage_streamed: int | None = None
    api_base_header: str | None = None
    backend_url: str = ""


@dataclass
class WireRun:
    returncode: int
    seconds: float
    report: dict[str, Any]
    markdown: str
    record: Path
    stderr: str
    corpus_returncode: int = -1
    corpus_output: str = ""
    probe_returncode: int = -1
    probe_output: str = ""

    def result(self, check: str) -> dict[str, Any]:
        for result in self.report["results"]:
            if result["check"] == check:
                return dict(result)
        raise AssertionError(f"no {check} in the report")


@dataclass
class LiteLLMRun:
    raw: RawFacts
    wires: dict[str, WireRun]
    master_key: str


def _require_tools() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("needs the local extra (llama-cpp-python): make test-live installs it")
    if not LITELLM_BIN.exists():
        message = f"no LiteLLM virtualenv at {LITELLM_VENV}: make litellm-venv builds it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def _sse_data(body: bytes) -> list[dict[str, Any]]:
    frames = []
    for line in body.decode("utf-8", errors="replace").splitlines():
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            frames.append(json.loads(line[5:]))
    return frames


async def _measure(client: httpx.AsyncClient, proxy: LiteLLMProxy, direct: str) -> RawFacts:
    raw = RawFacts(backend_url=direct)
    auth = {"authorization": f"Bearer {proxy.master_key}"}
    messages_headers = {"x-api-key": proxy.master_key, "anthropic-version": "2023-06-01"}
    chat, messages = f"{proxy.base_url}/v1/chat/completions", f"{proxy.base_url}/v1/messages"
    model = "smollm2-135m-instruct"

    async def post(url: str, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
        return await client.post(url, json={"model": model, **body}, headers=headers)

    # A1: a text block against a string, over the Messages route and directly.
    short = {"max_tokens": 4, "temperature": 0}
    answer = await post(
        messages, {"messages": [{"role": "user", "content": PONG}], **short}, messages_headers
    )
    raw.a1_string_tokens = answer.json()["usage"]["input_tokens"]
    block = [{"type": "text", "text": PONG}]
    answer = await post(
        messages, {"messages": [{"role": "user", "content": block}], **short}, messages_headers
    )
    raw.a1_block_tokens = answer.json()["usage"]["input_tokens"]
    answer = await post(
        f"{direct}/chat/completions",
        {"messages": [{"role": "user", "content": block}], **short},
        {},
    )
    raw.a1_direct_list_tokens = answer.json()["usage"]["prompt_tokens"]

    # T15: prompt tokens without tools, with tools, with tools and tool_choice auto.
    oa_messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": WEATHER}]
    variants: dict[str, tuple[str, dict[str, str], dict[str, Any], Any, Any, str]] = {
        "openai-chat": (
            chat,
            auth,
            {"messages": oa_messages},
            OPENAI_TOOL,
            "auto",
            "prompt_tokens",
        ),
        "anthropic": (
            messages,
            messages_headers,
            {"system": SYSTEM, "messages": oa_messages[1:]},
            ANTHROPIC_TOOL,
            {"type": "auto"},
            "input_tokens",
        ),
    }
    for wire, (url, headers, base, tool, choice, counter) in variants.items():
        counts = []
        extras: tuple[dict[str, Any], ...] = (
            {},
            {"tools": [tool]},
            {"tools": [tool], "tool_choice": choice},
        )
        for extra in extras:
            answer = await post(url, {**base, **extra, **short}, headers)
            counts.append(int(answer.json()["usage"][counter]))
        raw.t15_tokens[wire] = (counts[0], counts[1], counts[2])

    # T16: a streamed automatic tool choice, directly and through both wires.
    streamed = {"stream": True, "max_tokens": 32, "temperature": 0}
    user = [{"role": "user", "content": WEATHER}]
    oa_t16 = {"messages": user, "tools": [OPENAI_TOOL], "tool_choice": "auto", **streamed}
    answer = await post(f"{direct}/chat/completions", oa_t16, {})
    raw.t16_direct_body = answer.content
    answer = await post(chat, oa_t16, auth)
    raw.t16_openai_frames = _sse_data(answer.content)
    raw.api_base_header = answer.headers.get("x-litellm-model-api-base")
    an_t16 = {
        "messages": user,
        "tools": [ANTHROPIC_TOOL],
        "tool_choice": {"type": "auto"},
        **streamed,
    }
    raw.t16_anthropic_events = _sse_data((await post(messages, an_t16, messages_headers)).content)

    # E1: a wrong key on each wire.
    for wire, url, headers in (
        ("openai-chat", chat, {"authorization": "Bearer sk-wrong"}),
        ("anthropic", messages, {"x-api-key": "sk-wrong", "anthropic-version": "2023-06-01"}),
    ):
        answer = await post(
            url, {"messages": [{"role": "user", "content": PONG}], **short}, headers
        )
        raw.e1_wrong_key[wire] = (answer.status_code, answer.text)

    # A streamed forced tool call on the Messages wire: the tool_use blocks.
    forced = {"type": "tool", "name": "get_weather"}
    body = {"messages": user, "tools": [ANTHROPIC_TOOL], "tool_choice": forced, **streamed}
    events = _sse_data((await post(messages, body, messages_headers)).content)
    raw.tool_use_ids = [
        e["content_block"]["id"]
        for e in events
        if e.get("type") == "content_block_start" and e["content_block"]["type"] == "tool_use"
    ]

    # A tool result, short and long, after the call (the history the agent loop sends).
    function = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    call = {"id": "call_1", "type": "function", "function": function}
    counts = []
    for result in ("sunny", "sunny and warm " * 40):
        history = [
            {"role": "user", "content": WEATHER},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": result},
        ]
        body = {"messages": history, "tools": [OPENAI_TOOL], "tool_choice": "auto", **short}
        counts.append(int((await post(chat, body, auth)).json()["usage"]["prompt_tokens"]))
    raw.tool_result_tokens = (counts[0], counts[1])

    # U6: the prompt tokens of one request, unstreamed and streamed with include_usage.
    body = {"messages": [{"role": "user", "content": PONG}], "max_tokens": 16, "temperature": 0}
    raw.usage_unstreamed = (await post(chat, body, auth)).json()["usage"]["prompt_tokens"]
    options = {"stream": True, "stream_options": {"include_usage": True}}
    frames = _sse_data((await post(chat, {**body, **options}, auth)).content)
    usages = [f["usage"] for f in frames if f.get("usage")]
    raw.usage_streamed = usages[-1]["prompt_tokens"] if usages else None
    return raw


async def _kit(proxy: LiteLLMProxy, wire: str, work: Path, env: dict[str, str]) -> WireRun:
    out, markdown, record = work / f"{wire}.json", work / f"{wire}.md", work / f"{wire}-wire"
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentfsm",
        "conformance",
        "--base-url",
        f"{proxy.base_url}/v1",
        "--model",
        "smollm2-135m-instruct",
        "--wire",
        wire,
        "--api-key-env",
        KEY_ENV,
        "--name",
        NAMES[wire],
        "--capability",
        "tool_choice",
        "--capability",
        "stream_usage",
        "--capability",
        "context_window=8192",
        "--record",
        str(record),
        "--out",
        str(out),
        "--markdown",
        str(markdown),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=900)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    seconds = time.monotonic() - started
    assert out.exists(), stderr.decode(errors="replace")[-3000:]
    run = WireRun(
        returncode=int(process.returncode or 0),
        seconds=seconds,
        report=json.loads(out.read_text("utf-8")),
        markdown=markdown.read_text("utf-8"),
        record=record,
        stderr=stderr.decode(errors="replace"),
    )
    # The recordings replay without naming their wire.
    corpus = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentfsm",
        "conformance",
        "corpus",
        str(record),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    output, _ = await asyncio.wait_for(corpus.communicate(), timeout=300)
    run.corpus_returncode = int(corpus.returncode or 0)
    run.corpus_output = output.decode(errors="replace")
    # The profile probe, as a user runs it after a failing report.
    probe = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentfsm",
        "conformance",
        "probe",
        "--base-url",
        f"{proxy.base_url}/v1",
        "--model",
        "smollm2-135m-instruct",
        "--api-key-env",
        KEY_ENV,
        "--wire",
        wire,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    output, _ = await asyncio.wait_for(probe.communicate(), timeout=600)
    run.probe_returncode = int(probe.returncode or 0)
    run.probe_output = output.decode(errors="replace")
    return run


async def _run_everything(work: Path) -> LiteLLMRun:
    from agentfsm.adapters.providers._local import LocalModel

    async with LocalModel() as model, litellm_proxy(model.base_url) as proxy:
        env = {**os.environ, KEY_ENV: proxy.master_key}
        async with httpx.AsyncClient(timeout=httpx.Timeout(120, connect=5)) as client:
            raw = await _measure(client, proxy, model.base_url)
        wires = {wire: await _kit(proxy, wire, work, env) for wire in WIRES}
    keep = os.environ.get("AGENTFSM_LITELLM_REPORTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for wire in WIRES:
            for suffix in (".json", ".md"):
                shutil.copy(work / f"{wire}{suffix}", Path(keep) / f"{wire}{suffix}")
    return LiteLLMRun(raw=raw, wires=wires, master_key=proxy.master_key)


@pytest.fixture(scope="module")
def litellm_run(tmp_path_factory: pytest.TempPathFactory) -> LiteLLMRun:
    _require_tools()
    run = asyncio.run(_run_everything(tmp_path_factory.mktemp("litellm")))
    for wire, wire_run in run.wires.items():
        print(f"kit on the {wire} wire: {wire_run.seconds:.0f} s, exit {wire_run.returncode}")
    return run


# ---- the raw bytes: what the route does, independent of the kit's verdicts ----


def test_raw_facts_of_the_route(litellm_run: LiteLLMRun) -> None:
    raw = litellm_run.raw
    # A text block costs more than its text, directly and through the Messages route alike.
    assert raw.a1_block_tokens > raw.a1_string_tokens + 20, raw
    assert raw.a1_block_tokens == raw.a1_direct_list_tokens, raw
    # Tools reach the prompt only with tool_choice, on both wires.
    for wire, (bare, tools, choice) in raw.t15_tokens.items():
        assert bare == tools < choice, (wire, raw.t15_tokens)
    # llama.cpp: an empty 200 stream; LiteLLM: a clean empty answer on both wires.
    assert raw.t16_direct_body == b""
    assert raw.t16_openai_frames, raw
    deltas = [c["delta"] for f in raw.t16_openai_frames for c in f.get("choices", [])]
    assert not any(d.get("content") or d.get("tool_calls") for d in deltas), deltas
    finishes = {c.get("finish_reason") for f in raw.t16_openai_frames for c in f["choices"]}
    assert "stop" in finishes
    kinds = [e["type"] for e in raw.t16_anthropic_events]
    assert "content_block_delta" not in kinds, raw.t16_anthropic_events
    stops = [
        e["delta"]["stop_reason"] for e in raw.t16_anthropic_events if e["type"] == "message_delta"
    ]
    assert stops == ["end_turn"]
    # A wrong key: 400 "No connected db." on both wires, never 401.
    for wire, (status, text) in raw.e1_wrong_key.items():
        assert (status, "No connected db." in text) == (400, True), (wire, status, text)
    # One tool_use block per chunk, all with one id.
    assert len(raw.tool_use_ids) > 1, raw.tool_use_ids
    assert len(set(raw.tool_use_ids)) == 1, raw.tool_use_ids
    # Streamed usage the server never sent: the proxy's own count.
    assert raw.usage_streamed is not None, raw
    assert raw.usage_streamed != raw.usage_unstreamed, raw
    # A tool result never reaches the prompt: a long one costs what a short one costs.
    assert raw.tool_result_tokens[0] == raw.tool_result_tokens[1], raw.tool_result_tokens
    # The proxy names its backend in a response header.
    assert raw.api_base_header == raw.backend_url


# ---- the kit's verdicts, on each wire ----

# (wire, check) -> outcome, words its message must contain, quirk ids it must not cite
EXPECTED: dict[tuple[str, str], tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    ("openai-chat", "A1"): ("pass", (), ()),
    ("openai-chat", "A4"): ("pass-normalized", ("null",), ()),
    ("openai-chat", "T1"): ("pass-normalized", ("repeated",), ()),
    ("openai-chat", "T6"): ("pass-normalized", ("repeated",), ()),
    ("openai-chat", "T7"): ("pass-normalized", ("repeated",), ()),
    ("openai-chat", "T14"): ("pass-normalized", (), ("Q6",)),
    ("openai-chat", "T15"): ("fail", ("tool_choice", "prompt tokens"), ()),
    ("openai-chat", "T16"): ("fail", ("empty",), ("Q26",)),
    ("openai-chat", "U6"): ("fail", (), ("Q15", "Q16")),
    ("openai-chat", "E1"): ("fail", ("No connected db.",), ("Q23",)),
    ("openai-chat", "E7"): ("pass", (), ()),
    ("openai-chat", "C1"): ("pass", (), ()),
    ("anthropic", "A1"): ("fail", ("prompt tokens", "block"), ()),
    ("anthropic", "A4"): ("fail", ("tool_use",), ()),
    ("anthropic", "T1"): ("pass-normalized", ("tool_use", "id"), ("Q8", "Q10")),
    ("anthropic", "T6"): ("pass-normalized", ("tool_use", "id"), ("Q8", "Q10")),
    ("anthropic", "T7"): ("pass-normalized", ("tool_use", "id"), ("Q8", "Q10")),
    ("anthropic", "T10"): ("skip", (), ()),
    ("anthropic", "T14"): ("fail", ("tool_use blocks alone",), ("Q6",)),
    ("anthropic", "T15"): ("fail", ("tool_choice", "prompt tokens"), ()),
    ("anthropic", "T16"): ("fail", ("empty",), ("Q26",)),
    ("anthropic", "U6"): ("fail", (), ("Q15", "Q16")),
    ("anthropic", "E1"): ("fail", ("No connected db.",), ("Q23",)),
    ("anthropic", "E7"): ("pass", (), ()),
    ("anthropic", "C1"): ("pass", (), ()),
}


@pytest.mark.parametrize(("wire", "check"), sorted(EXPECTED), ids=lambda v: str(v))
def test_verdict(litellm_run: LiteLLMRun, wire: str, check: str) -> None:
    outcome, words, not_cited = EXPECTED[wire, check]
    result = litellm_run.wires[wire].result(check)
    assert result["outcome"] == outcome, result
    for word in words:
        assert word in result["message"], (word, result)
    for quirk in not_cited:
        assert quirk not in result["quirks"], (quirk, result)


def test_the_a1_failure_names_the_measured_counts(litellm_run: LiteLLMRun) -> None:
    raw = litellm_run.raw
    message = litellm_run.wires["anthropic"].result("A1")["message"]
    assert "prompt tokens" in message, message
    for count in (raw.a1_block_tokens, raw.a1_string_tokens):
        assert re.search(rf"\b{count}\b", message), (count, message)


@pytest.mark.parametrize("wire", WIRES)
def test_the_t15_failure_names_the_measured_counts(litellm_run: LiteLLMRun, wire: str) -> None:
    message = litellm_run.wires[wire].result("T15")["message"]
    assert "model behaviour" not in message
    # The counts with tools and with tools and tool_choice, as the raw requests got them
    # (the kit's T15 measurement sends the raw one above: same system, user text and tool).
    _, tools, choice = litellm_run.raw.t15_tokens[wire]
    for count in (tools, choice):
        assert re.search(rf"\b{count}\b", message), (count, message)


@pytest.mark.parametrize("wire", WIRES)
def test_the_run_as_a_whole(litellm_run: LiteLLMRun, wire: str) -> None:
    run = litellm_run.wires[wire]
    assert run.returncode == 1, run.stderr[-3000:]
    for result in run.report["results"]:
        # The /v1 base URL works on both wires: no probe lands on /v1/v1/….
        assert not re.search(r"\b404\b|/v1/v1/", result["message"]), result
        if result["outcome"] == "fail":
            assert "model behaviour" not in result["message"], result
    described = QUIRKS_DOC.read_text("utf-8")
    cited = {q for r in run.report["results"] for q in r["quirks"]}
    for quirk in sorted(cited):
        assert f"| {quirk} |" in described, f"{quirk} is cited but not described in docs"
    assert "| T16 | `tools.stream_auto` | ✗ fail |" in run.markdown


@pytest.mark.parametrize("wire", WIRES)
def test_the_recordings(litellm_run: LiteLLMRun, wire: str) -> None:
    run = litellm_run.wires[wire]
    files = sorted(run.record.iterdir())
    texts = {path.name: path.read_text("utf-8", errors="replace") for path in files}
    everything = "\n".join(texts.values())
    # No secret and no internal backend address in a recording.
    assert litellm_run.master_key not in everything
    assert "x-litellm-model-api-base" not in everything.lower()
    assert litellm_run.raw.backend_url not in everything
    # Every failed check's exchanges are there, adapter calls included.
    failed = [r["check"] for r in run.report["results"] if r["outcome"] == "fail"]
    for check in failed:
        assert any(f"-{check}-" in name for name in texts), (check, sorted(texts))
    # The corpus reads the wire from the recordings and replays the failures as failures.
    assert run.corpus_returncode == 1, run.corpus_output[-3000:]
    assert "T16" in run.corpus_output, run.corpus_output[-3000:]


def test_the_probe_says_no_profile_works(litellm_run: LiteLLMRun) -> None:
    # OpenAI wire: the suggested profile gets the tools into the prompt, but the tool results
    # never reach it, so the agent loop cannot work (T15 under the profile).
    openai = litellm_run.wires["openai-chat"]
    assert openai.probe_returncode == 1, openai.probe_output[-3000:]
    assert "explicit_tool_choice=True" in openai.probe_output, openai.probe_output[-3000:]
    assert "stream_with_tools=False" in openai.probe_output, openai.probe_output[-3000:]
    assert "no profile works: T15" in openai.probe_output, openai.probe_output[-3000:]
    # Anthropic wire: a turn of tool_use blocks alone is refused whatever the profile.
    anthropic = litellm_run.wires["anthropic"]
    assert anthropic.probe_returncode == 1, anthropic.probe_output[-3000:]
    assert "no profile works: A4" in anthropic.probe_output, anthropic.probe_output[-3000:]
