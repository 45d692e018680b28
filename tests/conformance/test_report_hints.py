"""The conformance report a provider author acts on: the quirk behind a failure and its
fix, ``probe`` suggested when a profile is suspected, the run's version, URL and declared
capabilities in the JSON, and the ``--capability`` that runs a skipped check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentfsm
from agentfsm.cli import main
from agentfsm.conformance import Report, report_markdown
from agentfsm.conformance._hints import capability_hint, public_url, quirks_in
from agentfsm.testing import FakeProviderServer

from .probe_servers import OpenAIServer

NOTES = "docs/conformance.md#known-quirks"


def run(tmp_path: Path, server: OpenAIServer, *flags: str) -> tuple[int, dict[str, Any], str, str]:
    out, markdown = tmp_path / "report.json", tmp_path / "report.md"
    with FakeProviderServer() as fake:
        fake.handler = server
        url = f"{fake.base_url}/v1"
        base = ["conformance", "--base-url", url, "--model", "m", "--out", str(out)]
        code = main([*base, "--markdown", str(markdown), *flags])
    return code, json.loads(out.read_text("utf-8")), markdown.read_text("utf-8"), url


def by_check(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["check"]: r for r in report["results"]}


def test_an_error_that_shows_one_quirk_carries_its_tag_and_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "unexpected ProviderError: … unknown field stream_options", naming nothing.
    code, report, markdown, url = run(
        tmp_path, OpenAIServer(rejects_stream_options=True), "--only", "answers"
    )
    assert code == 1
    a1 = by_check(report)["A1"]
    assert (a1["outcome"], a1["quirks"]) == ("fail", ["Q14"])
    assert a1["message"].endswith(
        f"unknown field stream_options (known quirk: Q14; see {NOTES}; a profile works "
        "around it: --quirk stream_options=false)"
    )
    command = f"agentfsm conformance probe --base-url {url} --model m --wire openai-chat"
    assert report["suggestion"].startswith("the failures of A1, A2 show Q14: try " + command)
    assert f"Next: the failures of A1, A2 show Q14: try {command}" in markdown
    printed = capsys.readouterr().out
    assert f"next: the failures of A1, A2 show Q14: try {command}" in printed


def test_a_profile_suspected_from_the_checks_suggests_probe_with_the_key_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", "sk-test-not-a-real-key-0123456789")
    code, report, _, url = run(
        tmp_path,
        OpenAIServer(tools_need_tool_choice=True),
        "--only",
        "tools",
        "--api-key-env",
        "MY_KEY",
    )
    assert code == 1
    t15 = by_check(report)["T15"]
    assert (t15["outcome"], t15["quirks"]) == ("fail", ["Q39"])
    assert t15["message"].endswith(
        f"(known quirk: Q39; see {NOTES}; a profile works around it: "
        "--quirk explicit_tool_choice=true)"
    )
    assert report["suggestion"] == (
        "the failures of T6, T7, T12, T15 show Q39: try agentfsm conformance probe "
        f"--base-url {url} --model m --wire openai-chat --api-key-env MY_KEY"
    )
    assert "sk-test-not-a-real-key" not in capsys.readouterr().out + json.dumps(report)


def test_the_json_report_names_version_url_and_declared_capabilities(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report, markdown, url = run(
        tmp_path,
        OpenAIServer(),
        "--only",
        "tools",
        "--capability",
        "parallel_tools",
        "--capability",
        "context_window=8192",
    )
    assert report["agentfsm"] == agentfsm.__version__
    assert report["base_url"] == url
    assert report["capabilities"]["parallel_tools"] is True
    assert report["capabilities"]["context_window"] == 8192
    assert report["capabilities"]["cache_reporting"] is False
    assert report["suggestion"] == ""  # nothing points at a profile
    assert "next:" not in capsys.readouterr().out
    assert f"agentfsm {agentfsm.__version__}" in markdown
    assert f"Base URL: `{url}`" in markdown
    assert "Declared capabilities: streaming=True, tools=True, parallel_tools=True" in markdown
    # The fields survive a round trip (``agentfsm conformance matrix`` reads reports back).
    again = Report.from_dict(report)
    assert (again.version, again.base_url) == (agentfsm.__version__, url)
    assert again.capabilities == report["capabilities"]
    assert report_markdown(again) == markdown
    del code


def test_a_key_in_the_base_url_is_not_in_the_report(tmp_path: Path) -> None:
    key = "AIzaSyD-not-a-real-key-but-shaped-like-one"
    out = tmp_path / "report.json"
    with FakeProviderServer() as fake:
        fake.handler = OpenAIServer()
        url = f"{fake.base_url}/v1?key={key}"
        main(
            ["conformance", "--base-url", url, "--model", "m", "--only", "wire", "--out", str(out)]
        )
    text = out.read_text("utf-8")
    assert key not in text
    report = json.loads(text)
    assert report["base_url"] == f"{fake.base_url}/v1?key=***"
    assert report["target"] == f"m @ {fake.base_url}/v1?key=***"
    assert public_url("https://me:hunter2@h.example:8443/v1?api-version=2024&sig=abc") == (
        "https://me@h.example:8443/v1?api-version=2024&sig=***"
    )


def test_a_skipped_check_names_the_capability_that_runs_it(tmp_path: Path) -> None:
    _, report, _, _ = run(tmp_path, OpenAIServer(), "--only", "tools", "--only", "errors")
    checks = by_check(report)
    assert checks["T8"]["message"] == (
        "capability absent: parallel_tools (run it with --capability parallel_tools; in code: "
        "Capabilities(parallel_tools=True))"
    )
    assert checks["T1"]["message"].startswith(
        "capability absent: tool_choice (run it with --capability tool_choice;"
    )
    skipped = [r for r in report["results"] if r["message"].startswith("capability absent")]
    assert skipped
    assert all("--capability " in r["message"] for r in skipped)
    window = [r for r in skipped if "context_window" in r["message"]]
    assert window
    assert all("--capability context_window=N" in r["message"] for r in window)


def test_only_an_error_that_points_at_one_quirk_is_tagged() -> None:
    assert quirks_in("400: unknown field stream_options") == ("Q14",)
    assert quirks_in("Duplicate value for 'tool_call_id' of call_1") == ("Q7",)
    assert quirks_in("invalid message content type: <nil>") == ("Q23",)
    assert quirks_in("parallel_tool_calls is only allowed when tools are specified") == ("Q33",)
    assert quirks_in("503 upstream overloaded") == ()
    # Two quirks at once: the text does not say which one caused the failure.
    assert quirks_in("stream_options and parallel_tool_calls are unsupported") == ()
    assert capability_hint(["reasoning", "context_window"]) == (
        "capability absent: reasoning, context_window (run it with --capability reasoning "
        "--capability context_window=N; in code: Capabilities(reasoning=True, context_window=N))"
    )
