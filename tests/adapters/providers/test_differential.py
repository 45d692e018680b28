"""Our stream accumulation against the official ``openai`` SDK on the same recorded bytes."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agentfsm import UserMessage
from agentfsm.adapters.providers import (
    OpenAIChat,
    ProviderError,
    ReplayTransport,
    RetryPolicy,
    load_wire_fixture,
)
from agentfsm.adapters.providers._replay import RecordedResponse
from agentfsm.adapters.providers._usage import openai_usage
from agentfsm.conformance._bundled import bundled_corpus, corpus_index

openai = pytest.importorskip("openai", reason="the openai SDK is a dev-only dependency")

CORPUS = bundled_corpus()  # a missing corpus fails the collection; it is never skipped


def streamed_openai_responses() -> list[tuple[str, RecordedResponse]]:
    out = []
    for entry in corpus_index(CORPUS)["exchanges"]:
        if entry["wire"] != "openai-chat":
            continue
        fixture = load_wire_fixture(CORPUS / entry["file"])
        for index, response in enumerate(fixture.responses):
            headers = dict(response.headers)
            content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
            if response.status == 200 and "event-stream" in content_type:
                out.append((f"{entry['id']}#{index}", response))
    return out


CASES = streamed_openai_responses()


async def ours(response: RecordedResponse) -> dict[str, Any]:
    async with httpx.AsyncClient(transport=ReplayTransport([response])) as client:
        chat = OpenAIChat(
            "m", base_url="http://replay/v1", http_client=client, retry=RetryPolicy(max_attempts=1)
        )
        result = await chat([UserMessage("x")], [])
    usage = result.usage
    return {
        "text": result.message.content,
        "calls": [(c.name, c.arguments) for c in result.message.tool_calls],
        "usage": None if usage is None else (usage.input_tokens, usage.output_tokens),
    }


async def sdk(response: RecordedResponse) -> dict[str, Any]:
    async with httpx.AsyncClient(transport=ReplayTransport([response])) as http:
        client = openai.AsyncOpenAI(
            api_key="replay", base_url="http://replay/v1", http_client=http, max_retries=0
        )
        async with client.chat.completions.stream(
            model="m", messages=[{"role": "user", "content": "x"}]
        ) as stream:
            async for _ in stream:
                pass
            completion = await stream.get_final_completion()
    message = completion.choices[0].message
    calls = [
        (c.function.name, json.loads(c.function.arguments) if c.function.arguments else {})
        for c in (message.tool_calls or [])
    ]
    # Same normalization on both sides: this compares what was accumulated.
    usage = openai_usage(completion.usage.model_dump()) if completion.usage else None
    return {
        "text": message.content or message.refusal or "",
        "calls": calls,
        "usage": None if usage is None else (usage.input_tokens, usage.output_tokens),
    }


@pytest.mark.parametrize(("name", "response"), CASES, ids=[c[0] for c in CASES])
async def test_same_bytes_same_answer(name: str, response: RecordedResponse) -> None:
    failure: ProviderError | None = None
    try:
        mine = await ours(response)
    except ProviderError as error:
        failure = error
    if failure is not None:
        # An error inside a 200 stream: we raise a typed error, where the SDK has at best an
        # empty or partial success to offer.
        assert failure.in_stream
        try:
            theirs = await sdk(response)
        except Exception:
            return
        assert not theirs["calls"] or failure.provider_code == "tool_use_failed"
        return
    try:
        theirs = await sdk(response)
    except Exception as exc:  # the SDK itself cannot read this stream: nothing to compare
        pytest.skip(f"the openai SDK fails on this recording ({type(exc).__name__}: {exc})"[:300])
    assert mine["text"] == theirs["text"]
    assert mine["calls"] == theirs["calls"]
    if theirs["usage"] is not None:
        assert mine["usage"] == theirs["usage"]


def test_there_is_something_to_compare() -> None:
    assert len(CASES) >= 20
