"""The slow tier: the conformance kit against llama.cpp's own server on its three wires, and
against the LiteLLM proxy in front of it on the same three.

``llama-server`` (``make llama-server``: built from the llama.cpp that the llama-cpp-python
sdist vendors) serves ``/v1/chat/completions``, ``/v1/messages`` and ``/v1/responses`` with
SmolLM2-135M-Instruct; the LiteLLM proxy (``make litellm-venv``) routes to it. The kit runs
through the CLI as a user runs it, once per server and wire, and each report is held to the
committed one in docs/conformance/ (``STEMS``): the same failures, each one a known quirk
that docs/conformance.md describes for that server; the same passes; what the 135M model
cannot do is ``model``, never a failure.

Set ``AGENTFSM_LIVE_REPORTS=DIR`` to keep the six reports (json and markdown) in DIR.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.live.litellm_proxy import LITELLM_BIN, LITELLM_VENV, litellm_proxy
from tests.live.llama_server import LlamaServerUnavailable, llama_server, llama_server_binary

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "docs" / "conformance"
QUIRKS_DOC = ROOT / "docs" / "conformance.md"
WIRES = ("openai-chat", "anthropic", "openai-responses")
SHORT = {"openai-chat": "chat", "anthropic": "anthropic", "openai-responses": "responses"}
MODEL = "smollm2-135m-instruct"
KEY_ENV = "AGENTFSM_LITELLM_TEST_KEY"
RUN_SECONDS = 900
"""The bound of one kit run (the CLI is killed past it)."""


def stem(server: str, wire: str) -> str:
    """The committed report's file name, without its extension."""
    return f"{server}-{SHORT[wire]}"


def name(server: str, wire: str, version: str) -> str:
    engine = f"llama.cpp llama-server (llama-cpp-python {version}'s) + SmolLM2-135M-Instruct"
    if server == "litellm-llama-server":
        engine = f"LiteLLM 1.108.7 → {engine}"
    return f"{engine} ({wire} wire)"


@dataclass
class KitRun:
    returncode: int
    seconds: float
    report: dict[str, Any]
    markdown: str
    stderr: str

    def results(self) -> dict[str, dict[str, Any]]:
        return {r["check"]: r for r in self.report["results"]}


def _require_tools() -> str:
    message = None
    try:
        _, version = llama_server_binary()
    except LlamaServerUnavailable as error:
        message, version = str(error), ""
    if message is None and not LITELLM_BIN.exists():
        message = f"no LiteLLM virtualenv at {LITELLM_VENV}: make litellm-venv builds it"
    if message is not None:
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return version


async def _kit(
    base_url: str, wire: str, label: str, work: Path, env: dict[str, str], key: bool
) -> KitRun:
    out, markdown = work / f"{label}.json", work / f"{label}.md"
    command = [sys.executable, "-m", "agentfsm", "conformance", "--base-url", base_url]
    command += ["--model", MODEL, "--wire", wire, "--name", env["AGENTFSM_REPORT_NAME"]]
    command += ["--capability", "tool_choice", "--capability", "stream_usage"]
    command += ["--capability", "context_window=8192", "--out", str(out)]
    command += ["--markdown", str(markdown)]
    command += ["--api-key-env", KEY_ENV] if key else []
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=RUN_SECONDS)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert out.exists(), stderr.decode(errors="replace")[-3000:]
    return KitRun(
        returncode=int(process.returncode or 0),
        seconds=time.monotonic() - started,
        report=json.loads(out.read_text("utf-8")),
        markdown=markdown.read_text("utf-8"),
        stderr=stderr.decode(errors="replace"),
    )


async def _run_everything(work: Path, version: str) -> dict[str, KitRun]:
    runs: dict[str, KitRun] = {}
    async with llama_server() as server:
        for wire in WIRES:
            label = stem("llama-server", wire)
            env = {**os.environ, "AGENTFSM_REPORT_NAME": name("llama-server", wire, version)}
            runs[label] = await _kit(f"{server.base_url}/v1", wire, label, work, env, key=False)
        async with litellm_proxy(f"{server.base_url}/v1") as proxy:
            for wire in WIRES:
                label = stem("litellm-llama-server", wire)
                env = {
                    **os.environ,
                    KEY_ENV: proxy.master_key,
                    "AGENTFSM_REPORT_NAME": name("litellm-llama-server", wire, version),
                }
                runs[label] = await _kit(f"{proxy.base_url}/v1", wire, label, work, env, key=True)
    keep = os.environ.get("AGENTFSM_LIVE_REPORTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for label in runs:
            for suffix in (".json", ".md"):
                shutil.copy(work / f"{label}{suffix}", Path(keep) / f"{label}{suffix}")
    return runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KitRun]:
    version = _require_tools()
    done = asyncio.run(_run_everything(tmp_path_factory.mktemp("servers"), version))
    for label, run in done.items():
        print(f"kit against {label}: {run.seconds:.0f} s, exit {run.returncode}")
    return done


STEMS = [stem(s, w) for s in ("llama-server", "litellm-llama-server") for w in WIRES]


@pytest.mark.parametrize("label", STEMS)
def test_every_live_check_runs_on_every_wire(runs: dict[str, KitRun], label: str) -> None:
    report = runs[label].report
    assert "verdict" not in report, report.get("verdict")
    assert len(report["results"]) == 25
    for result in report["results"]:
        assert "no live procedure" not in result["message"], result
        assert not re.search(r"/v1/v1/", result["message"]), result


@pytest.mark.parametrize("label", STEMS)
def test_every_failure_is_a_quirk_described_for_that_server(
    runs: dict[str, KitRun], label: str
) -> None:
    """A failure names a known quirk, and docs/conformance.md says which server shows it;
    what the model cannot do is never a failure."""
    rows = {
        m.group(1): m.group(0)
        for m in re.finditer(r"^\| (Q\d+) \|.*$", QUIRKS_DOC.read_text("utf-8"), re.MULTILINE)
    }
    who = "LiteLLM" if label.startswith("litellm") else "llama-server"
    run = runs[label]
    for result in run.report["results"]:
        if result["outcome"] == "fail":
            assert result["quirks"], result
            assert "model behaviour" not in result["message"], result
            for quirk in result["quirks"]:
                assert who in rows[quirk], (quirk, rows.get(quirk), result)
        if result["outcome"] == "model":
            assert result["message"].startswith("model behaviour: "), result
    failed = any(r["outcome"] == "fail" for r in run.report["results"])
    assert run.returncode == (1 if failed else 0), run.stderr[-3000:]


@pytest.mark.parametrize("label", STEMS)
def test_the_committed_report_still_describes_the_server(
    runs: dict[str, KitRun], label: str
) -> None:
    """The committed report (a real run) and this run agree on every failure and every
    normalized deviation: the server's protocol, not the model's sampling."""
    committed = {
        r["check"]: r for r in json.loads((FOLDER / f"{label}.json").read_text("utf-8"))["results"]
    }
    got = runs[label].results()
    assert set(got) == set(committed)
    for check, result in got.items():
        was = committed[check]["outcome"]
        if "fail" in (was, result["outcome"]):
            assert result["outcome"] == was, (check, result, committed[check])
            assert result["quirks"] == committed[check]["quirks"], (check, result)
