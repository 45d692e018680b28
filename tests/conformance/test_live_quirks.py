"""Live runs under a quirk profile of their wire: ``LiveTarget.anthropic_quirks`` and
``agentfsm conformance --quirk`` on both wires, judged by the requests the server received."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from attrs import evolve

from agentfsm.adapters.providers import AnthropicQuirks, OpenAIQuirks
from agentfsm.cli import main
from agentfsm.conformance import LiveContext, LiveTarget
from agentfsm.conformance._context import TOOL_WEATHER
from agentfsm.testing import FakeProviderServer
from agentfsm.testing._fake_server import RecordedRequest

from .proxy_server import Proxy, answer

ANTHROPIC_NAMES = "explicit_tool_choice, stream_with_tools, string_content"
OPENAI_NAMES = (
    "stream_options, stream_with_tools, null_assistant_content, max_tokens_field, "
    "explicit_tool_choice, tool_string_max_length, think_tags"
)
CORRECT = Proxy(tools_need_choice=False, empty_auto_stream=False)


def adapter_calls(requests: list[RecordedRequest]) -> list[dict[str, Any]]:
    """The bodies the project's adapters sent with tools (they ask for JSON or SSE by name;
    the raw probes send httpx's ``*/*``)."""
    sent = [
        r.json()
        for r in requests
        if r.headers.get("accept") in ("application/json", "text/event-stream")
    ]
    return [body for body in sent if body.get("tools")]


# -- the context: the adapter of the wire under the wire's profile --------------------------


async def sent_with(target: LiveTarget, quirks: Any = None) -> dict[str, Any]:
    """The body of one adapter call with a tool, through ``LiveContext.ask(quirks=)``."""
    with FakeProviderServer() as fake:
        fake.handler = lambda request: answer(CORRECT, request)
        url = fake.base_url if target.wire == "anthropic" else f"{fake.base_url}/v1"
        await LiveContext(evolve(target, base_url=url)).ask(
            quirks=quirks, tools=[TOOL_WEATHER], max_tokens=32
        )
        (body,) = adapter_calls(fake.requests)
    return body


async def test_the_anthropic_adapter_is_built_under_the_targets_anthropic_profile() -> None:
    target = LiveTarget(
        "http://unused",
        "m",
        "anthropic",
        anthropic_quirks=AnthropicQuirks(explicit_tool_choice=True, stream_with_tools=False),
    )
    assert target.profile == target.anthropic_quirks
    body = await sent_with(target)
    assert body["tool_choice"] == {"type": "auto"}
    assert "stream" not in body or body["stream"] is False


async def test_a_checks_variation_of_the_openai_profile_reaches_the_anthropic_adapter() -> None:
    target = LiveTarget(
        "http://unused",
        "m",
        "anthropic",
        anthropic_quirks=AnthropicQuirks(explicit_tool_choice=True),
    )
    # What the checks pass: target.quirks as it is (nothing varied), or with a shared field
    # changed (that change applies on top of the Anthropic profile, the rest stays).
    assert (await sent_with(target, target.quirks))["tool_choice"] == {"type": "auto"}
    unstreamed = await sent_with(target, evolve(target.quirks, stream_with_tools=False))
    assert unstreamed["tool_choice"] == {"type": "auto"}
    assert unstreamed.get("stream") in (None, False)
    streamed = await sent_with(target, evolve(target.quirks, explicit_tool_choice=False))
    assert streamed.get("stream") is True
    # An Anthropic profile is taken as it is: explicit_tool_choice off, so no tool_choice.
    plain = await sent_with(target, evolve(target.profile, explicit_tool_choice=False))
    assert "tool_choice" not in plain


async def test_the_wires_own_profile_is_forced_from_target_profile() -> None:
    """``evolve(ctx.target.profile, stream_with_tools=True)`` streams even where the
    target's Anthropic profile sends tools unstreamed (a check that needs the stream)."""
    target = LiveTarget(
        "http://unused", "m", "anthropic", anthropic_quirks=AnthropicQuirks(stream_with_tools=False)
    )
    assert (await sent_with(target)).get("stream") in (None, False)
    forced = evolve(target.profile, stream_with_tools=True)
    assert (await sent_with(target, forced))["stream"] is True


async def test_the_openai_wire_keeps_its_profile() -> None:
    target = LiveTarget(
        "http://unused",
        "m",
        quirks=OpenAIQuirks(explicit_tool_choice=True),
        anthropic_quirks=AnthropicQuirks(stream_with_tools=False),
    )
    assert target.profile == target.quirks
    body = await sent_with(target)
    assert body["tool_choice"] == "auto"
    assert body["stream"] is True
    # A profile of the other wire varies the shared quirks it changes from the target's.
    varied = await sent_with(target, AnthropicQuirks(stream_with_tools=True))
    assert varied["stream"] is True
    assert varied["tool_choice"] == "auto"


# -- agentfsm conformance --quirk --------------------------------------------------------------


def conformance(
    tmp_path: Path, wire: str, *quirks: str, proxy: Proxy | None = None
) -> tuple[int, list[RecordedRequest], dict[str, tuple[str, list[str]]]]:
    out = tmp_path / "report.json"
    out.unlink(missing_ok=True)
    with FakeProviderServer() as fake:
        fake.handler = lambda request: answer(proxy or Proxy(), request)
        code = main(
            [
                "conformance",
                "--base-url",
                f"{fake.base_url}/v1",
                "--model",
                "m",
                "--wire",
                wire,
                "--only",
                "tools",
                "--out",
                str(out),
                *(arg for quirk in quirks for arg in ("--quirk", quirk)),
            ]
        )
        requests = list(fake.requests)
    results = json.loads(out.read_text("utf-8"))["results"] if out.exists() else []
    return code, requests, {r["check"]: (r["outcome"], r["quirks"]) for r in results}


def test_anthropic_quirk_reaches_the_anthropic_adapter(tmp_path: Path) -> None:
    # Without a profile: no tool_choice, and T15 names the tools that never reach the prompt.
    code, requests, verdicts = conformance(tmp_path, "anthropic")
    assert code == 1
    calls = adapter_calls(requests)
    assert calls
    assert all("tool_choice" not in body for body in calls)
    assert verdicts["T15"] == ("fail", ["Q39"])

    code, requests, verdicts = conformance(tmp_path, "anthropic", "explicit_tool_choice=true")
    calls = adapter_calls(requests)
    assert calls
    assert all(body["tool_choice"] == {"type": "auto"} for body in calls)
    assert any(body.get("stream") is True for body in calls)
    # The tools reach the prompt now; the streamed automatic choice comes back empty (Q37).
    assert verdicts["T15"] == ("fail", ["Q37"])
    assert code == 1


def test_an_anthropic_profile_of_two_quirks_passes_the_agent_loop(tmp_path: Path) -> None:
    code, requests, verdicts = conformance(
        tmp_path, "anthropic", "explicit-tool-choice=yes", "stream_with_tools=false"
    )
    calls = adapter_calls(requests)
    assert calls
    assert all(body["tool_choice"] == {"type": "auto"} for body in calls)
    assert all(body.get("stream") in (None, False) for body in calls)
    assert verdicts["T15"] == ("pass", [])
    assert verdicts["T16"][0] == "pass-normalized"
    assert code == 0


def test_openai_quirk_on_the_openai_wire_as_before(tmp_path: Path) -> None:
    code, requests, verdicts = conformance(tmp_path, "openai-chat")
    assert all("tool_choice" not in body for body in adapter_calls(requests))
    assert (code, verdicts["T15"]) == (1, ("fail", ["Q39"]))
    code, requests, verdicts = conformance(tmp_path, "openai-chat", "explicit_tool_choice=true")
    calls = adapter_calls(requests)
    assert calls
    assert all(body["tool_choice"] == "auto" for body in calls)
    assert (code, verdicts["T15"]) == (1, ("fail", ["Q37"]))


@pytest.mark.parametrize(
    ("wire", "quirk", "message"),
    [
        (
            "anthropic",
            "stream_options=false",
            f"--quirk: 'stream_options' is not a quirk of the anthropic wire "
            f"(valid: {ANTHROPIC_NAMES})",
        ),
        (
            "anthropic",
            "null_assistant_content=false",
            f"(valid: {ANTHROPIC_NAMES})",
        ),
        (
            "openai-chat",
            "string_content=true",
            f"--quirk: 'string_content' is not a quirk of the openai-chat wire "
            f"(valid: {OPENAI_NAMES})",
        ),
        ("anthropic", "explicit_tool_choice=maybe", "takes true or false, got 'maybe'"),
        ("openai-chat", "explicit_tool_choice", "--quirk: a quirk is NAME=VALUE"),
        ("openai-chat", "max_tokens_field=tokens", "max_tokens or max_completion_tokens"),
    ],
)
def test_a_bad_quirk_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wire: str, quirk: str, message: str
) -> None:
    code, requests, verdicts = conformance(tmp_path, wire, quirk)
    assert code == 2
    assert requests == []
    assert verdicts == {}
    err = capsys.readouterr().err
    assert err.startswith("agentfsm conformance: --quirk: ")
    assert message in err
    assert err.count("\n") == 1  # one line, no traceback


def test_the_help_names_both_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "OpenAIQuirks: " + OPENAI_NAMES in text
    assert "AnthropicQuirks for --wire anthropic: " + ANTHROPIC_NAMES in text
