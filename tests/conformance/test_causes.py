"""Live verdicts on an endpoint that behaves like LiteLLM in front of llama-cpp-python: an
empty answer fails as ``empty_answer``, a cause the prompt tokens prove replaces a
``model behaviour`` skip, and a result carries only the quirks its run saw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentfsm.adapters.providers import AnthropicChat, OpenAIChat, OpenAIQuirks, RetryPolicy
from agentfsm.conformance import CheckResult, LiveTarget, RecordedTarget, run_check, run_corpus
from agentfsm.conformance._checks import by_id
from agentfsm.conformance._checks.tools.fixtures import SYSTEM_PROMPT
from agentfsm.conformance._context import LiveContext, Wire
from agentfsm.conformance._frames import event
from agentfsm.conformance._model import Capabilities
from agentfsm.testing import FakeProviderServer

from .proxy_server import TOOL_TOKENS, Proxy, answer

ALL = Capabilities(tool_choice=True, stream_usage=True)
WIRES: tuple[Wire, ...] = ("openai-chat", "anthropic")


async def run(
    check_id: str,
    wire: Wire,
    proxy: Proxy | None = None,
    *,
    quirks: OpenAIQuirks | None = None,
    capabilities: Capabilities = ALL,
) -> CheckResult:
    with FakeProviderServer() as fake:
        fake.handler = lambda request: answer(proxy or Proxy(), request)
        target = LiveTarget(
            f"{fake.base_url}/v1",
            "m",
            wire=wire,
            quirks=quirks or OpenAIQuirks(),
            capabilities=capabilities,
        )
        return await run_check(by_id(check_id), target, LiveContext(target))


# -- empty answers -------------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_t16_fails_a_clean_empty_answer_on_both_wires(wire: Wire) -> None:
    result = await run("T16", wire)
    assert result.outcome == "fail", result
    assert (result.got or "").startswith("empty_answer: an HTTP 200 stream with finish")
    assert "no text, no tool call" in (result.got or "")
    assert result.quirks == ("Q37",)
    if wire == "anthropic":
        assert "usage 0/0" in (result.got or "")


@pytest.mark.parametrize("wire", WIRES)
async def test_t16_passes_when_the_stream_answers(wire: Wire) -> None:
    result = await run("T16", wire, Proxy(empty_auto_stream=False))
    assert result.outcome in ("pass", "pass-normalized"), result
    assert "Q37" not in result.quirks


async def test_t16_is_normalized_when_the_profile_never_streams_tools() -> None:
    result = await run("T16", "openai-chat", quirks=OpenAIQuirks(stream_with_tools=False))
    assert (result.outcome, result.quirks) == ("pass-normalized", ("Q37",))
    assert "the profile sends tools unstreamed, and that request answers" in result.message


async def test_t16_fails_when_the_profiles_request_is_empty_too() -> None:
    proxy = Proxy(empty_everything=True)
    result = await run("T16", "openai-chat", proxy, quirks=OpenAIQuirks(stream_with_tools=False))
    assert result.outcome == "fail"
    assert "unstreamed: finish 'stop', no text, no tool call" in (result.got or "")


@pytest.mark.parametrize("check_id", ["T1", "T6", "T9", "T11", "T12", "T14", "T15", "A4"])
@pytest.mark.parametrize("wire", WIRES)
async def test_every_tools_request_fails_an_empty_answer(check_id: str, wire: Wire) -> None:
    capabilities = Capabilities(tool_choice=True, parallel_tools=True)
    result = await run(check_id, wire, Proxy(empty_everything=True), capabilities=capabilities)
    assert result.outcome == "fail", result
    assert "empty_answer: finish" in (result.got or ""), result
    assert result.quirks == ("Q37",)


# -- causes measured instead of model behaviour --------------------------------------------


async def test_a1_names_text_blocks_rendered_as_more_than_their_text() -> None:
    result = await run("A1", "anthropic")
    assert result.outcome == "fail"
    assert result.quirks == ("Q38",)
    # "Reply with the single word PONG." is 6 words; the repr of its block is 63 characters.
    assert "text blocks reach the prompt as more than their text: 41 prompt tokens as a text " in (
        result.got or ""
    )
    assert "block, 16 as a string; on the openai-chat wire: 16 as a text part" in (result.got or "")
    assert (await run("A1", "anthropic", Proxy(blocks_as_repr=False))).outcome == "pass"


@pytest.mark.parametrize("wire", WIRES)
async def test_t15_names_tools_that_reach_the_prompt_only_with_tool_choice(wire: Wire) -> None:
    result = await run("T15", wire, Proxy(blocks_as_repr=False))
    assert result.outcome == "fail", result
    assert result.quirks == ("Q39",)
    got = result.got or ""
    assert "tools reach the prompt only with tool_choice" in got
    system, prompt = SYSTEM_PROMPT, "What is the weather in Paris? Use the get_weather tool."
    bare = 10 + len(system.split()) + len(prompt.split())
    figures = f"{bare} without tools, {bare} with tools, {bare + TOOL_TOKENS} with tools and"
    assert f"prompt tokens on the {wire} wire: {figures}" in got
    other = "anthropic" if wire == "openai-chat" else "openai-chat"
    assert f"prompt tokens on the {other} wire: {figures}" in got
    assert "model behaviour" not in result.message


async def test_t15_passes_once_the_profile_sends_tool_choice() -> None:
    quirks = OpenAIQuirks(explicit_tool_choice=True, stream_with_tools=False)
    assert (await run("T15", "openai-chat", quirks=quirks)).outcome == "pass"


@pytest.mark.parametrize("wire", WIRES)
async def test_a_model_that_sees_the_tools_and_answers_in_text_is_model_behaviour(
    wire: Wire,
) -> None:
    proxy = Proxy(tools_need_choice=False, calls_tools=False, blocks_as_repr=False)
    result = await run("T15", wire, proxy)
    assert result.outcome == "model", result
    assert result.message.startswith("model behaviour: no tool call for the weather in Paris")
    assert f"prompt tokens on the {wire} wire: " in result.message
    assert result.quirks == ()


@pytest.mark.parametrize("check_id", ["T6", "T12"])
async def test_other_no_call_skips_measure_the_cause_too(check_id: str) -> None:
    result = await run(check_id, "anthropic", Proxy(), capabilities=Capabilities())
    assert result.outcome == "fail", result
    assert "tools reach the prompt only with tool_choice" in (result.got or "")
    assert result.quirks == ("Q39",)


async def test_tools_that_never_reach_the_prompt_are_named() -> None:
    proxy = Proxy(tools_need_choice=True, calls_tools=False)
    result = await run("T12", "openai-chat", proxy, capabilities=Capabilities())
    assert result.outcome == "fail"
    assert "tools reach the prompt only with tool_choice" in (result.got or "")


@pytest.mark.parametrize("wire", WIRES)
async def test_t15_fails_when_tool_results_never_reach_the_prompt(wire: Wire) -> None:
    proxy = Proxy(tools_need_choice=False, blocks_as_repr=False, drops_tool_results=True)
    result = await run("T15", wire, proxy)
    assert (result.outcome, result.quirks) == ("fail", ("Q42",)), result
    # 10 + "What is the weather in Paris?" + "Let me check." + the tool; the result: nothing.
    tokens = 10 + 6 + 3 + TOOL_TOKENS
    assert (
        f"tool results never reach the prompt: {tokens} prompt tokens with a short tool result, "
        f"{tokens} with one 80 words longer"
    ) in (result.got or "")
    seen = await run("T15", wire, Proxy(tools_need_choice=False, blocks_as_repr=False))
    assert seen.outcome == "pass", seen


async def test_t9_tells_unseen_results_from_model_behaviour() -> None:
    capabilities = Capabilities(parallel_tools=True)
    proxy = Proxy(drops_tool_results=True, tools_need_choice=False)
    result = await run("T9", "openai-chat", proxy, capabilities=capabilities)
    assert (result.outcome, result.quirks) == ("fail", ("Q42",)), result
    seen = await run("T9", "openai-chat", Proxy(tools_need_choice=False), capabilities=capabilities)
    assert seen.outcome == "model"
    assert seen.message.startswith("model behaviour: the answer does not use both results")


# -- quirks from what was observed ---------------------------------------------------------


async def test_same_id_tool_use_blocks_are_pass_normalized_as_q40() -> None:
    result = await run("T1", "anthropic", Proxy(blocks_as_repr=False))
    assert result.outcome == "pass-normalized", result
    assert result.quirks == ("Q40",)
    assert "consecutive tool_use blocks with the id 'toolu_0', one call" in result.message
    plain = await run("T1", "anthropic", Proxy(one_block_per_chunk=False))
    assert (plain.outcome, plain.quirks) == ("pass", ())


@pytest.mark.parametrize("check_id", ["T1", "A4", "T9", "T14", "U6"])
@pytest.mark.parametrize("wire", WIRES)
async def test_a_plain_500_is_blamed_on_no_quirk(check_id: str, wire: Wire) -> None:
    capabilities = Capabilities(tool_choice=True, parallel_tools=True, stream_usage=True)
    result = await run(check_id, wire, Proxy(status=500), capabilities=capabilities)
    assert result.outcome == "fail", result
    assert result.quirks == (), result
    assert "known quirk" not in result.message


@pytest.mark.parametrize("check_id", ["A4", "T1", "T15"])
async def test_a_connection_failure_is_blamed_on_no_quirk(check_id: str) -> None:
    with FakeProviderServer() as fake:
        url = f"{fake.base_url}/v1"
    target = LiveTarget(url, "m", wire="anthropic", capabilities=ALL)
    result = await run_check(by_id(check_id), target, LiveContext(target))
    assert result.outcome == "fail", result
    assert result.quirks == ()


async def test_u6_names_invented_stream_usage() -> None:
    result = await run("U6", "openai-chat")
    assert (result.outcome, result.quirks) == ("fail", ("Q41",))
    assert "the streamed usage is not the count the unstreamed answer reports" in (result.got or "")
    fine = await run("U6", "openai-chat", Proxy(invented_stream_usage=False))
    assert fine.outcome == "pass"


@pytest.mark.parametrize("wire", WIRES)
async def test_u2_does_not_pass_a_made_up_stream_usage(wire: Wire) -> None:
    result = await run("U2", wire, Proxy(blocks_as_repr=False))
    assert (result.outcome, result.quirks) == ("fail", ("Q41",)), result
    assert "input_tokens=23 streamed, 16 unstreamed for the same request" in (result.got or "")
    fine = await run("U2", wire, Proxy(blocks_as_repr=False, invented_stream_usage=False))
    assert fine.outcome == "pass", fine


async def test_t14_blames_ids_only_when_short_ids_are_accepted() -> None:
    shortened = await run("T14", "openai-chat", Proxy(rejects_ids_over=40))
    assert (shortened.outcome, shortened.quirks) == ("pass-normalized", ("Q6",))
    assert "the adapter shortens ids to 40" in shortened.message
    long_ids = await run("T14", "openai-chat", Proxy(rejects_ids_over=8))
    assert (long_ids.outcome, long_ids.quirks) == ("fail", ("Q6",))
    assert "the ids call_1, call_2, call_3 is accepted" in (long_ids.got or "")
    any_ids = await run("T14", "openai-chat", Proxy(rejects_tool_history=True))
    assert (any_ids.outcome, any_ids.quirks) == ("fail", ())
    assert "the ids are not the cause (see A4)" in (any_ids.got or "")


async def test_a4_blames_q23_only_when_the_turn_is_what_is_rejected() -> None:
    rejected = await run("A4", "openai-chat", Proxy(rejects_tool_history=True))
    assert (rejected.outcome, rejected.quirks) == ("fail", ("Q23",))
    anthropic = await run("A4", "anthropic", Proxy(rejects_tool_history=True))
    assert (anthropic.outcome, anthropic.quirks) == ("fail", ())
    assert "without the tool-call turn: accepted" in (anthropic.got or "")
    bare = await run("A4", "anthropic", Proxy(needs_assistant_text=True, blocks_as_repr=False))
    assert (bare.outcome, bare.quirks) == ("fail", ("Q23",)), bare
    assert "an assistant turn of tool_use blocks alone gets 500" in (bare.got or "")
    assert "the same turn with a text block beside them is accepted" in (bare.got or "")


# -- the recorded corpus -------------------------------------------------------------------


def _fixture(folder: Path, name: str, api: str, body: str) -> None:
    data: dict[str, Any] = {
        "format": "agentfsm.wire-fixture/1",
        "id": f"litellm/{name}",
        "provider": "litellm",
        "api": api,
        "streaming": True,
        "interactions": [
            {
                "request": None,
                "response": {
                    "status": 200,
                    "headers": [["content-type", "text/event-stream"]],
                    "framing": "http",
                    "body": {"encoding": "utf-8", "text": body},
                },
            }
        ],
    }
    (folder / f"{name}.json").write_text(json.dumps(data), "utf-8")


@pytest.mark.parametrize("wire", WIRES)
async def test_a_recorded_empty_answer_fails_t16_in_the_corpus(wire: Wire, tmp_path: Path) -> None:
    folder = tmp_path / "litellm"
    folder.mkdir()
    if wire == "anthropic":
        start = {"id": "msg_1", "model": "m", "usage": {"input_tokens": 0, "output_tokens": 0}}
        text = {"type": "text", "text": ""}
        body = "".join(
            [
                event("message_start", {"message": start}),
                event("content_block_start", {"index": 0, "content_block": text}),
                event("content_block_stop", {"index": 0}),
                event("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {}}),
                event("message_stop", {}),
            ]
        )
        _fixture(folder, "stream_auto_empty", "messages", body)
    else:
        delta = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
        finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        body = f"data: {json.dumps(delta)}\n\ndata: {json.dumps(finish)}\n\ndata: [DONE]\n\n"
        _fixture(folder, "stream_auto_empty", "chat.completions", body)
    once = RetryPolicy(max_attempts=1)

    def factory(url: str) -> AnthropicChat | OpenAIChat:
        if wire == "anthropic":
            return AnthropicChat("m", base_url=url, retry=once)
        return OpenAIChat("m", base_url=url, retry=once)

    report = await run_corpus(RecordedTarget(factory, wire=wire), folder)
    t16 = next(r for r in report.results if r.check == "T16")
    assert t16.outcome == "fail", t16
    assert "empty_answer: finish" in t16.message
