"""Usage: a provider's prompt total is taken as it is; cached and cache-write counts are
parts of it, never added to it (Anthropic's ``input_tokens``, which leaves them out, is
summed with them)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from agentfsm import UserMessage
from agentfsm.adapters.providers import (
    AnthropicChat,
    OpenAIChat,
    ProviderError,
    ReplayTransport,
    RetryPolicy,
    Timeouts,
    load_wire_fixture,
)
from agentfsm.adapters.providers._replay import RecordedResponse, fixture_wire
from agentfsm.adapters.providers._usage import openai_usage
from agentfsm.conformance._bundled import bundled_corpus, corpus_index
from agentfsm.conformance._frames import DONE, chunk, completion, openai_url
from agentfsm.engine._messages import Usage
from agentfsm.testing import FakeProviderServer, Reply

CORPUS = bundled_corpus()
FAST = Timeouts(connect=2, first_byte=2, idle=2, terminal_grace=0.3)

# OpenRouter in front of Gemini: the prompt total, of which 2161 tokens were read from the
# cache and 2161 written to it (the same tokens, reported twice).
GEMINI_USAGE = {
    "prompt_tokens": 2168,
    "completion_tokens": 12,
    "total_tokens": 2180,
    "prompt_tokens_details": {"cached_tokens": 2161, "cache_write_tokens": 2161},
}
EXPECTED = Usage(2168, 12, cache_read_tokens=2161, cache_write_tokens=2161)


def test_cached_and_cache_write_counts_are_parts_of_the_prompt() -> None:
    assert openai_usage(GEMINI_USAGE) == EXPECTED
    # OpenAI: the first call writes the cache, the second reads it; the prompt is 4020 both times.
    written = {"prompt_tokens": 4020, "prompt_tokens_details": {"cache_write_tokens": 4012}}
    read = {"prompt_tokens": 4020, "prompt_tokens_details": {"cached_tokens": 4012}}
    assert openai_usage(written) == Usage(4020, 0, cache_write_tokens=4012)
    assert openai_usage(read) == Usage(4020, 0, cache_read_tokens=4012)
    # A broken report whose total is below one of its parts is raised to that part only.
    assert openai_usage({"prompt_tokens": 0, "prompt_tokens_details": {"cached_tokens": 9}}) == (
        Usage(9, 0, cache_read_tokens=9)
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_openrouter_gemini_cache_usage_through_the_adapter(stream: bool) -> None:
    message = {"role": "assistant", "content": "ok"}
    with FakeProviderServer() as server:
        if stream:
            server.enqueue(
                Reply.sse(
                    [
                        chunk({"role": "assistant", "content": "ok"}),
                        chunk({}, finish="stop"),
                        f"data: {json.dumps({'choices': [], 'usage': GEMINI_USAGE})}\n\n",
                        DONE,
                    ]
                )
            )
        else:
            server.enqueue(Reply.json({**completion(message), "usage": GEMINI_USAGE}))
        chat = OpenAIChat("m", base_url=openai_url(server), stream=stream, timeouts=FAST)
        result = await chat([UserMessage("x")], [])
    assert result.usage == EXPECTED


_NUMBER = r"\\?\"{}\\?\": ?(\d+)"


def last_number(text: str, key: str) -> int | None:
    found = re.findall(_NUMBER.format(key), text)
    return int(found[-1]) if found else None


def recorded_usages() -> list[tuple[str, str, RecordedResponse]]:
    out = []
    for entry in corpus_index(CORPUS)["exchanges"]:
        fixture = load_wire_fixture(CORPUS / entry["file"])
        wire = fixture_wire(fixture)
        for index, response in enumerate(fixture.responses):
            if wire is not None and response.status == 200 and response.whole:
                out.append((f"{entry['id']}#{index}", wire, response))
    return out


USAGES = recorded_usages()


async def decoded_usage(wire: str, response: RecordedResponse) -> Usage | None:
    async with httpx.AsyncClient(transport=ReplayTransport([response])) as client:
        options: dict[str, Any] = {"http_client": client, "retry": RetryPolicy(max_attempts=1)}
        chat: Any = (
            AnthropicChat("recorded", base_url="http://replay", **options)
            if wire == "anthropic"
            else OpenAIChat("recorded", base_url="http://replay/v1", **options)
        )
        try:
            result = await chat([UserMessage("replay")], [])
        except ProviderError as error:
            if not error.in_stream:  # only a recorded stream may end in an error event
                raise
            return None
        usage: Usage | None = result.usage
        return usage


def test_there_are_recorded_usages() -> None:
    assert len(USAGES) >= 40


@pytest.mark.parametrize(("name", "wire", "response"), USAGES, ids=[u[0] for u in USAGES])
async def test_every_recorded_prompt_total_is_the_input_the_adapter_reports(
    name: str, wire: str, response: RecordedResponse
) -> None:
    """Each recording's own numbers, read from its text: on the Chat Completions wire the
    last ``prompt_tokens`` is the input; on the Messages wire the last ``input_tokens`` plus
    the cache reads and writes are."""
    text = response.body.decode("utf-8")
    usage = await decoded_usage(wire, response)
    if usage is None and '"error"' in text:
        return
    if wire == "anthropic":
        stated = last_number(text, "input_tokens")
        parts = [last_number(text, f"cache_{k}_input_tokens") or 0 for k in ("read", "creation")]
        if stated is None:
            assert usage is None or usage.input_tokens == 0, name
            return
        assert usage is not None, name
        assert usage.input_tokens == stated + sum(parts), name
        assert (usage.cache_read_tokens, usage.cache_write_tokens) == tuple(parts), name
        return
    stated = last_number(text, "prompt_tokens")
    if stated is None:
        return  # no usage, or another field name (checked by the replay snapshots)
    assert usage is not None, name
    assert usage.input_tokens == stated, name
    assert usage.cache_read_tokens <= usage.input_tokens, name
    assert usage.cache_write_tokens <= usage.input_tokens, name


def test_the_usage_checks_accept_a_part_reported_as_both_read_and_written() -> None:
    from agentfsm.conformance._checks.usage import _consistent
    from agentfsm.conformance._model import CheckFailed

    _consistent(EXPECTED)
    with pytest.raises(CheckFailed, match="each inside input_tokens"):
        _consistent(Usage(10, 0, cache_read_tokens=11))
