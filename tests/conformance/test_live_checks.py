"""Live checks that tell servers apart, run against scripted endpoints that behave like them."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from attrs import evolve

from agentfsm.adapters.providers import OpenAIQuirks
from agentfsm.conformance import Capabilities, CheckResult, LiveTarget, run_check, run_checks
from agentfsm.conformance._checks import by_id
from agentfsm.conformance._context import LiveContext, Wire
from agentfsm.conformance._frames import DONE, chunk, completion, tool_delta
from agentfsm.testing import FakeProviderServer, Reply, scenario_handler
from agentfsm.testing._fake_server import RecordedRequest

CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}


def like_llama_cpp(request: RecordedRequest, *, empty_auto_stream: bool = True) -> Reply:
    """Tools only reach the model with tool_choice; a streamed auto choice ends empty."""
    body: dict[str, Any] = request.json()
    messages = body["messages"]
    if any(m["role"] == "assistant" and m.get("content") is None for m in messages):
        return Reply.json({"detail": "content: Input should be a valid string"}, 500)
    choice = body.get("tool_choice")
    calls = bool(body.get("tools")) and choice is not None and choice != "none"
    if messages[-1]["role"] == "tool":
        calls = False
    if body.get("stream"):
        if calls and choice == "auto" and empty_auto_stream:
            return Reply.raw(b"", headers={"content-type": "text/event-stream"})
        if calls:
            return Reply.sse(
                [
                    chunk(
                        {
                            "role": "assistant",
                            **tool_delta(0, "call_1", "get_weather", '{"city": "Paris"}'),
                        }
                    ),
                    chunk({}, finish="tool_calls"),
                    DONE,
                ]
            )
        return Reply.sse(
            [chunk({"role": "assistant", "content": "Sunny."}), chunk({}, finish="stop"), DONE]
        )
    if calls:
        return Reply.json(
            completion(
                {"role": "assistant", "content": None, "tool_calls": [CALL]}, finish="tool_calls"
            )
        )
    return Reply.json(completion({"role": "assistant", "content": "It is sunny."}))


async def run(check_id: str, quirks: OpenAIQuirks | None = None, **server: Any) -> CheckResult:
    with FakeProviderServer() as fake:
        fake.handler = lambda request: like_llama_cpp(request, **server)
        target = LiveTarget(f"{fake.base_url}/v1", "m", quirks=quirks or OpenAIQuirks())
        return await run_check(by_id(check_id), target, LiveContext(target))


async def test_empty_stream_for_a_streamed_auto_choice_fails_t16() -> None:
    result = await run("T16")
    assert result.outcome == "fail"
    assert "Q26" in result.quirks
    assert "no event, no [DONE], no error frame" in (result.got or "")
    assert "empty_stream" in (result.got or "")


async def test_t16_passes_on_a_server_that_streams_the_choice() -> None:
    assert (await run("T16", empty_auto_stream=False)).outcome == "pass"


async def test_t16_is_normalized_when_the_profile_does_not_stream_tools() -> None:
    result = await run("T16", OpenAIQuirks(stream_with_tools=False))
    assert result.outcome == "pass-normalized"
    assert "the profile sends tools unstreamed" in result.message


async def test_t15_names_a_server_that_ignores_tools_without_tool_choice() -> None:
    result = await run("T15")
    assert result.outcome == "fail"
    assert "tools reach the prompt only with tool_choice" in (result.got or "")
    assert result.quirks == ("Q39",)
    assert "model behaviour" not in result.message


async def test_t15_passes_with_a_profile_that_sends_tool_choice() -> None:
    quirks = OpenAIQuirks(
        stream_with_tools=False, explicit_tool_choice=True, null_assistant_content=False
    )
    assert (await run("T15", quirks)).outcome == "pass"


async def test_t14_tells_rejected_content_from_rejected_ids() -> None:
    result = await run("T14")
    assert result.outcome == "pass-normalized"
    assert result.quirks == ("Q23",)
    ok = await run("T14", OpenAIQuirks(null_assistant_content=False))
    assert ok.outcome == "pass"


async def test_t16_tells_keep_alive_comments_from_events() -> None:
    def pinging(request: RecordedRequest) -> Reply:
        body = request.json()
        if body.get("stream") and body.get("tool_choice") == "auto":
            ping = b": ping - 2026-12-01 16:35:29.799811+00:00\n\n"
            return Reply.raw(ping, headers={"content-type": "text/event-stream"})
        return like_llama_cpp(request)

    with FakeProviderServer() as fake:
        fake.handler = pinging
        target = LiveTarget(f"{fake.base_url}/v1", "m")
        result = await run_check(by_id("T16"), target, LiveContext(target))
    assert result.outcome == "fail"
    assert "no event, no [DONE], no error frame (1 SSE comment line(s) only)" in (result.got or "")
    assert "empty_stream" in (result.got or "")


def _ignores_named_choice(request: RecordedRequest) -> Reply:
    """The fake server as llama.cpp's server is: a named tool_choice (an object) is read as
    auto, and this model answers in text; ``required`` forces the call."""
    body = request.json()
    if isinstance(body.get("tool_choice"), dict):
        body = {k: v for k, v in body.items() if k not in ("tools", "tool_choice")}
    return scenario_handler("tools")(evolve(request, body=json.dumps(body).encode()))


@pytest.mark.parametrize("check_id", ["T1", "T6", "T12"])
@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses"])
def test_a_named_tool_choice_the_server_ignores_is_measured(check_id: str, wire: Wire) -> None:
    with FakeProviderServer() as server:
        server.handler = _ignores_named_choice
        target = LiveTarget(
            f"{server.base_url}/v1", "m", wire, capabilities=Capabilities(tool_choice=True)
        )
        (result,) = asyncio.run(run_checks(target, [by_id(check_id)])).results
    assert (result.outcome, result.quirks) == ("fail", ("Q48",)), result
    assert "the same request with tool_choice 'required' gets ['get_" in result.message


def _drops_tools(request: RecordedRequest) -> Reply:
    """The fake server as llama.cpp's server is with a template without tools: every
    request is answered as if it offered none."""
    body = {k: v for k, v in request.json().items() if k not in ("tools", "tool_choice")}
    return scenario_handler("tools")(evolve(request, body=json.dumps(body).encode()))


@pytest.mark.parametrize("check_id", ["T1", "T15"])
@pytest.mark.parametrize("wire", ["openai-chat", "anthropic", "openai-responses"])
def test_tools_that_never_reach_the_prompt_fail_as_q52(check_id: str, wire: Wire) -> None:
    with FakeProviderServer() as server:
        server.handler = _drops_tools
        target = LiveTarget(
            f"{server.base_url}/v1", "m", wire, capabilities=Capabilities(tool_choice=True)
        )
        (result,) = asyncio.run(run_checks(target, [by_id(check_id)])).results
    assert (result.outcome, result.quirks) == ("fail", ("Q52",)), result
    assert "the tools never reach the prompt" in result.message
    assert "model behaviour" not in result.message


def test_a_model_that_ends_its_turn_at_once_is_the_models() -> None:
    """One output token after the prompt, no text, no call: the model's end of turn."""

    def silent(request: RecordedRequest) -> Reply:
        if "tool" not in request.body.decode():
            return scenario_handler("tools")(request)
        size = len(request.body) // 4  # the results reach the prompt: it grows with them
        usage = {"prompt_tokens": size, "completion_tokens": 1, "total_tokens": size + 1}
        return Reply.json(completion({"role": "assistant", "content": ""}, usage=usage))

    with FakeProviderServer() as server:
        server.handler = silent
        target = LiveTarget(f"{server.base_url}/v1", "m")
        (result,) = asyncio.run(run_checks(target, [by_id("T14")])).results
    assert result.outcome == "model", result
    assert "the model ended its turn at once" in result.message
