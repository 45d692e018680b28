"""The slow tier: the conformance kit against the real llama-cpp-python server.

What CONFORMANCE-NOTES §6 says that server does must show up in the right checks, and the
committed report (docs/conformance/llama-cpp-python.json) must still describe it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from attrs import evolve

from agentfsm import UserMessage
from agentfsm.adapters.providers import (
    OpenAIChat,
    ProviderError,
    ReplayTransport,
    RetryPolicy,
    load_wire_fixture,
)

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "docs" / "conformance" / "llama-cpp-python.json"
# Checks whose outcome is the server's protocol, not the 135M model's answers.
PROTOCOL_CHECKS = ("A4", "T1", "T7", "T14", "T16", "U1", "U2", "U6", "E7", "C1")


def outcomes(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["check"]: r for r in report["results"]}


async def test_the_kit_on_the_local_server(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="needs the local extra: make test-live installs it")
    from agentfsm.adapters.providers._local import LOCAL_MODEL_NAME, LocalModel

    out, markdown, record = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "wire"
    async with LocalModel() as model:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "agentfsm",
            "conformance",
            "--base-url",
            model.base_url,
            "--model",
            LOCAL_MODEL_NAME,
            "--capability",
            "tool_choice",
            "--capability",
            "stream_usage",
            "--capability",
            "context_window=8192",
            "--out",
            str(out),
            "--markdown",
            str(markdown),
            "--record",
            str(record),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=900)
    # The server has protocol failures, so the run fails, and says which.
    assert process.returncode == 1, stderr.decode(errors="replace")[-3000:]
    report = json.loads(out.read_text("utf-8"))
    got = outcomes(report)

    # §6: a streamed automatic tool choice gets an empty HTTP 200 stream.
    assert got["T16"]["outcome"] == "fail"
    assert "Q26" in got["T16"]["quirks"]
    assert "empty_stream" in got["T16"]["message"]
    # §6: a named tool_choice repeats the full id and name in every chunk; absorbed.
    for check in ("T1", "T7"):
        assert got[check]["outcome"] == "pass-normalized", got[check]
        assert "Q5" in got[check]["quirks"]
    # Assistant content null is rejected; '' works (the profile the CLI uses).
    assert got["A4"]["outcome"] == "pass-normalized"
    assert "Q23" in got["A4"]["quirks"]
    # A 135M model's poor answers are the outcome `model`, saying so, never failures.
    for result in got.values():
        if result["outcome"] == "fail":
            assert "model behaviour" not in result["message"], result
    misses = [r for r in got.values() if r["message"].startswith("model behaviour")]
    assert all(r["outcome"] == "model" for r in misses)
    text = markdown.read_text("utf-8")
    assert "| T16 | `tools.stream_auto` | ✗ fail |" in text

    # The committed report still describes this server.
    committed = outcomes(json.loads(COMMITTED.read_text("utf-8")))
    for check in PROTOCOL_CHECKS:
        assert got[check]["outcome"] == committed[check]["outcome"], check

    # The recorded empty stream replays through the adapter as the same error.
    files = sorted(record.glob("*T16-streamed-auto*.json"))
    assert files, sorted(p.name for p in record.iterdir())
    fixture = load_wire_fixture(files[0])
    assert fixture.streaming
    assert fixture.responses[0].status == 200
    assert fixture.responses[0].body == b""
    async with httpx.AsyncClient(transport=ReplayTransport(fixture.responses)) as client:
        chat = OpenAIChat(
            LOCAL_MODEL_NAME,
            base_url="http://replay/v1",
            http_client=client,
            retry=RetryPolicy(max_attempts=1),
        )
        with pytest.raises(ProviderError) as caught:
            await chat([UserMessage("replay")], [])
    assert caught.value.provider_code == "empty_stream"


async def test_probe_suggests_the_local_profile() -> None:
    pytest.importorskip("llama_cpp", reason="needs the local extra: make test-live installs it")
    from agentfsm.adapters.providers._local import LOCAL_MODEL_NAME, LOCAL_QUIRKS, LocalModel
    from agentfsm.conformance._probe import probe

    async with LocalModel() as model:
        findings, quirks = await probe(model.base_url, LOCAL_MODEL_NAME)
    assert (quirks.stream_with_tools, quirks.explicit_tool_choice) == (False, True), findings
    assert quirks.null_assistant_content is False, findings
    assert evolve(quirks, tool_string_max_length=LOCAL_QUIRKS.tool_string_max_length) == (
        LOCAL_QUIRKS
    )
