"""Live checks against a scripted OpenAI-like endpoint: a correct one passes, a broken one fails.

``Server`` answers from the request (text or tool calls, streamed or not, usage when asked,
an overflow error past its window); each of its flags but ``window`` is one defect a check
targets. Every check gets a pass on the correct endpoint and a fail, for its own reason, on
an endpoint with its defect, so no live-only check is vacuous.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from agentfsm.adapters.providers import OpenAIQuirks
from agentfsm.conformance import CheckResult, LiveTarget, run_check
from agentfsm.conformance._checks import by_id
from agentfsm.conformance._context import LiveContext
from agentfsm.conformance._frames import DONE, chunk, completion, tool_delta
from agentfsm.conformance._model import Capabilities
from agentfsm.testing import FakeProviderServer, Frame, Reply
from agentfsm.testing._fake_server import RecordedRequest

WINDOW = 200
ESTIMATE = int(WINDOW * 1.3) + 64
"""The words E7 and E8 send for a ``context_window`` of ``WINDOW``."""
OVERFLOW = "This model's maximum context length is 200 tokens; your messages resulted in 324."
CITIES = ("Paris", "Tokyo", "東京")
HOST = "127.0.0.1"
"""How the adapter names the provider in its errors."""


@dataclass(frozen=True)
class Server:
    """An OpenAI-like endpoint: the defaults answer correctly, each other value is a defect."""

    window: int | None = WINDOW
    """Prompts of more words than this get ``overflow`` as a 400."""
    overflow: str = OVERFLOW
    """E7: the 400's message for an over-long prompt."""
    truncates: bool = False
    """E7, E8: an over-long prompt is cut to the window and answered with a 200."""
    no_model: bool = False
    """A1: answers name no model."""
    finishes: int = 1
    """A2: the finish records in a stream."""
    ignores_max_tokens: bool = False
    """A3: the whole answer, finish 'stop', whatever ``max_tokens``."""
    rejects_null: bool = False
    """A4: a 400 for an assistant tool-call turn with ``content: null``."""
    rejects_empty: bool = False
    """A4: a 400 for an assistant tool-call turn with ``content: ""``."""
    arguments: str | None = None
    """T6, T8, T12: this raw text as the arguments of every call."""
    streamed_arguments: str | None = None
    """T7: this raw text as the arguments of every streamed call."""
    call_id: str | None = None
    """T8: this id for every call."""
    rejects_two_results: bool = False
    """T9: a 400 for two tool results after one assistant turn."""
    parallel_flag_status: int | None = None
    """T10: this status for any request with ``parallel_tool_calls``."""
    ignores_tool_choice_none: bool = False
    """T11: calls tools despite ``tool_choice: "none"``."""
    bad_total: bool = False
    """U1: ``total_tokens`` is not prompt + completion."""
    stream_usage: bool = True
    """U2: usage at the end of a stream that asks for it."""
    rejects_stream_options: bool = False
    """U2: a 400 for any request with ``stream_options``; usage then ends every stream."""
    streamed_input_extra: int = 0
    """U6: added to ``prompt_tokens`` in streams."""


def _error(status: int, message: str) -> Reply:
    return Reply.json({"error": {"message": message, "type": "invalid_request_error"}}, status)


def _calls(server: Server, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The calls a model would make: per the prompt, or the tool named in ``tool_choice``."""
    last, choice = body["messages"][-1], body.get("tool_choice")
    if not body.get("tools") or last["role"] != "user":
        return []
    if choice == "none" and not server.ignores_tool_choice_none:
        return []
    prompt = last["content"]
    forced = choice["function"]["name"] if isinstance(choice, dict) else None
    if forced == "get_time" or (forced is None and "time" in prompt):
        return [("get_time", {})]
    if forced == "get_weather" or "weather" in prompt:
        return [("get_weather", {"city": city}) for city in CITIES if city in prompt]
    return []


def _text(messages: list[dict[str, Any]]) -> str:
    """The answer to the last turn: the tool results it was given, or the prompt's."""
    results: list[str] = []
    for message in reversed(messages):
        if message["role"] != "tool":
            break
        results.insert(0, message["content"])
    if results:
        return " ".join(results)
    prompt = messages[-1]["content"]
    if "PONG" in prompt:
        return "PONG"
    if "Count" in prompt:
        return ", ".join(str(i) for i in range(1, 101))
    return "Hello! The sea is calm today."


def _rejection(server: Server, body: dict[str, Any]) -> Reply | None:
    """The 400 (or other status) this server gives ``body``, if any."""
    if server.parallel_flag_status and "parallel_tool_calls" in body:
        return _error(server.parallel_flag_status, "Unknown field: parallel_tool_calls")
    if server.rejects_stream_options and "stream_options" in body:
        return _error(400, "Unknown field: stream_options")
    messages = body["messages"]
    for message in messages:
        if message["role"] == "assistant" and message.get("tool_calls"):
            if message["content"] is None and server.rejects_null:
                return _error(400, "content: Input should be a valid string")
            if message["content"] == "" and server.rejects_empty:
                return _error(400, "content: must not be empty")
    pending = 0
    for message in messages:
        pending = pending + 1 if message["role"] == "tool" else 0
    if server.rejects_two_results and pending > 1:
        return _error(400, "one tool message expected after each assistant turn")
    return None


def answer(server: Server, request: RecordedRequest) -> Reply:
    """What ``server`` sends back for ``request``."""
    body: dict[str, Any] = request.json()
    rejected = _rejection(server, body)
    if rejected is not None:
        return rejected
    messages, stream = body["messages"], bool(body.get("stream"))
    prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in messages)
    if server.window and prompt_tokens > server.window:
        if not server.truncates:
            return _error(400, server.overflow)
        prompt_tokens = server.window
    calls = _calls(server, body)
    text = "" if calls else _text(messages)
    finish = "tool_calls" if calls else "stop"
    words, limit = text.split(" "), body.get("max_tokens")
    if limit and len(words) > limit and not server.ignores_max_tokens:
        text, finish = " ".join(words[:limit]), "length"
    completion_tokens = len(text.split()) + 10 * len(calls)
    prompt_tokens += server.streamed_input_extra if stream else 0
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens + (7 if server.bad_total else 0),
    }
    model = None if server.no_model else "fake-model"
    arguments = [server.arguments or json.dumps(args, ensure_ascii=False) for _, args in calls]
    ids = [server.call_id or f"call_{i}" for i in range(len(calls))]
    if not stream:
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, (name, _), args in zip(ids, calls, arguments, strict=True)
            ]
        return Reply.json({**completion(message, finish=finish, usage=usage), "model": model})
    frames: list[Frame] = [chunk({"role": "assistant", "content": None}, model=model)]
    frames += [chunk({"content": text[i : i + 8]}, model=model) for i in range(0, len(text), 8)]
    for index, (cid, (name, _), args) in enumerate(zip(ids, calls, arguments, strict=True)):
        args = server.streamed_arguments or args
        frames.append(chunk(tool_delta(index, cid, name, ""), model=model))
        for piece in (args[:5], args[5:]):
            frames.append(chunk(tool_delta(index, arguments=piece), model=model) if piece else "")
    frames += [chunk({}, finish=finish, model=model) for _ in range(server.finishes)]
    asked = (body.get("stream_options") or {}).get("include_usage")
    if server.stream_usage and (asked or server.rejects_stream_options):
        frames.append(chunk(choices=False, usage=usage, model=model))
    return Reply.sse([*frames, DONE])


async def run(
    check_id: str,
    server: Server | None = None,
    needs: dict[str, Any] | None = None,
    quirks: OpenAIQuirks | None = None,
) -> CheckResult:
    """``check_id``'s live procedure against ``server``, with these capabilities."""
    with FakeProviderServer() as fake:
        fake.handler = lambda request: answer(server or Server(), request)
        target = LiveTarget(
            f"{fake.base_url}/v1",
            "m",
            quirks=quirks or OpenAIQuirks(),
            capabilities=Capabilities(**(needs or {})),
        )
        return await run_check(by_id(check_id), target, LiveContext(target))


def assert_failed(result: CheckResult, *fragments: str) -> None:
    """A real failure (not a crash) whose message holds every fragment."""
    assert result.outcome == "fail", result
    assert not result.message.startswith("unexpected"), result.message
    for fragment in fragments:
        assert fragment in result.message, result.message


TOOL_CHOICE = {"tool_choice": True}
PARALLEL = {"parallel_tools": True}
STREAM_USAGE = {"stream_usage": True}
WINDOWED = {"context_window": WINDOW}

CORRECT = [
    ("A1", {}),
    ("A2", {}),
    ("A3", {}),
    ("A4", {}),
    ("T6", {}),
    ("T6", TOOL_CHOICE),
    ("T7", {}),
    ("T7", TOOL_CHOICE),
    ("T8", PARALLEL),
    ("T9", PARALLEL),
    ("T10", {}),
    ("T11", TOOL_CHOICE),
    ("T12", {}),
    ("T12", TOOL_CHOICE),
    ("U1", {}),
    ("U2", STREAM_USAGE),
    ("U6", STREAM_USAGE),
    ("E7", WINDOWED),
    ("E8", WINDOWED),
]


@pytest.mark.parametrize(("check_id", "needs"), CORRECT, ids=lambda v: str(v or "-"))
async def test_a_correct_endpoint_passes(check_id: str, needs: dict[str, Any]) -> None:
    result = await run(check_id, needs=needs)
    assert (result.outcome, result.message) == ("pass", ""), result


async def test_e8_passes_when_a_200_counts_the_whole_prompt() -> None:
    result = await run("E8", Server(window=None), WINDOWED)
    assert result.outcome == "pass", result


ESCAPED = r'{"city": "\\u6771\\u4eac"}'
"""Arguments whose city decodes to the literal text ``\\u6771\\u4eac``, not to 東京."""

BROKEN = [
    ("A1", Server(no_model=True), {}, ["expected the model name (unstreamed)", "got None"]),
    ("A2", Server(finishes=0), {}, ["one final record with a finish reason", "no finish"]),
    (
        "A3",
        Server(ignores_max_tokens=True),
        {},
        ["finish_reason 'length' with max_tokens=5", "'stop' after 100 output tokens"],
    ),
    (
        "A4",
        Server(rejects_null=True, rejects_empty=True),
        {},
        ["null or '' accepted", "null rejected (", "'' rejected (", "Q23"],
    ),
    ("T6", Server(arguments="null"), TOOL_CHOICE, ["one get_time call with arguments {}", "null"]),
    ("T6", Server(arguments="null"), {}, ["one get_time call with arguments {}", "null"]),
    (
        "T7",
        Server(streamed_arguments='{"city": "Lyon"}'),
        TOOL_CHOICE,
        ["streamed calls equal to [('get_weather', {'city': 'Paris'})]", "'Lyon'", "Q12"],
    ),
    (
        "T8",
        Server(arguments='{"city": "Par'),
        PARALLEL,
        ["arguments of every call that parse", '{"city": "Par'],
    ),
    ("T9", Server(rejects_two_results=True), PARALLEL, ["two results sent together", "Q34"]),
    ("T10", Server(parallel_flag_status=500), {}, ["200, or a 400/422 (with tools)", "500:"]),
    (
        "T11",
        Server(ignores_tool_choice_none=True),
        TOOL_CHOICE,
        ["no call with tool_choice none", "get_weather"],
    ),
    ("T12", Server(arguments=ESCAPED), TOOL_CHOICE, ["not \\u escapes", r"\\u6771\\u4eac"]),
    ("T12", Server(arguments=ESCAPED), {}, ["not \\u escapes", r"\\u6771\\u4eac"]),
    ("U1", Server(bad_total=True), {}, ["total_tokens == prompt_tokens + completion_tokens"]),
    ("U2", Server(stream_usage=False), STREAM_USAGE, ["usage at the end of the stream", "Q15"]),
    (
        "U6",
        Server(streamed_input_extra=3),
        STREAM_USAGE,
        ["input_tokens=6 (unstreamed) when streamed", "got input_tokens=9"],
    ),
    (
        "E7",
        Server(overflow="Invalid request."),
        WINDOWED,
        [f"context_overflow for ~{ESTIMATE} tokens (window {WINDOW})", "got bad_request"],
    ),
    (
        "E8",
        Server(truncates=True),
        WINDOWED,
        [f"near the ~{ESTIMATE}-token estimate", f"HTTP 200 with input_tokens={WINDOW}", "Q29"],
    ),
]


@pytest.mark.parametrize(
    ("check_id", "server", "needs", "fragments"),
    BROKEN,
    ids=[f"{b[0]}-{i}" for i, b in enumerate(BROKEN)],
)
async def test_an_endpoint_with_the_defect_fails(
    check_id: str, server: Server, needs: dict[str, Any], fragments: list[str]
) -> None:
    assert_failed(await run(check_id, server, needs), *fragments)


async def test_a4_fails_when_the_profile_shape_is_rejected() -> None:
    quirks = OpenAIQuirks(null_assistant_content=False)
    result = await run("A4", Server(rejects_empty=True), quirks=quirks)
    assert_failed(result, "the profile's assistant content accepted", "'' (the profile's shape)")


# -- the deviations the checks document as normalized ---------------------------------------


async def test_a2_notes_extra_terminal_records() -> None:
    result = await run("A2", Server(finishes=2))
    assert result.outcome == "pass-normalized"
    assert result.message == "the raw stream has 2 terminal records; the adapter kept one"


async def test_a4_notes_which_content_shape_is_rejected() -> None:
    null = await run("A4", Server(rejects_null=True))
    assert (null.outcome, null.quirks) == ("pass-normalized", ("Q23",))
    assert null.message == (
        f"content null rejected ({HOST}: bad_request 400: content: Input should be a valid string);"
        " accepted with OpenAIQuirks(null_assistant_content=False)"
    )
    empty = await run("A4", Server(rejects_empty=True))
    assert (empty.outcome, empty.quirks) == ("pass-normalized", ("Q23",))
    assert (
        empty.message
        == f"content '' rejected ({HOST}: bad_request 400: content: must not be empty);"
        " null (the default) accepted"
    )


async def test_t8_reused_raw_ids_are_noted_not_failed() -> None:
    result = await run("T8", Server(call_id="call_same"), PARALLEL)
    assert (result.outcome, result.quirks) == ("pass-normalized", ("Q7",))
    assert "one id reused across parallel calls" in result.message


@pytest.mark.parametrize("status", [400, 422])
async def test_t10_notes_a_rejection_of_the_flag(status: int) -> None:
    result = await run("T10", Server(parallel_flag_status=status))
    assert (result.outcome, result.quirks) == ("pass-normalized", ("Q33",))
    assert result.message == (
        "parallel_tool_calls: false rejected with tools and without tools;"
        " the adapter never sends it"
    )


async def test_u2_notes_rejected_stream_options() -> None:
    result = await run("U2", Server(rejects_stream_options=True), STREAM_USAGE)
    assert (result.outcome, result.quirks) == ("pass-normalized", ("Q14",))
    assert result.message == "stream_options rejected with 400; works with stream_options=False"


async def test_e7_notes_silent_truncation() -> None:
    result = await run("E7", Server(truncates=True), WINDOWED)
    assert (result.outcome, result.quirks) == ("pass-normalized", ("Q29",))
    assert result.message == (
        f"no error: a 200 with input_tokens={WINDOW} for ~{ESTIMATE} tokens"
        " (silent truncation, see E8)"
    )
