"""A hostile provider against the turn-level wire features: ``pause_turn`` continuations and
the ``think_tags`` splitter stay bounded in requests and memory."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentfsm import UserMessage
from agentfsm.adapters.providers import (
    AnthropicChat,
    Limits,
    OpenAIChat,
    OpenAIQuirks,
    ProviderError,
    RetryPolicy,
    Timeouts,
)
from agentfsm.conformance._frames import DONE, chunk, openai_url
from agentfsm.engine._protocols import ChatDelta
from agentfsm.testing import FakeProviderServer, Reply

from .tally import AttackTally

FAST = Timeouts(connect=2, first_byte=5, idle=5, terminal_grace=0.3)
ONCE = RetryPolicy(max_attempts=1)
SMALL = Limits(max_body_bytes=100_000)


def paused(stream: bool, text: str) -> Reply:
    if not stream:
        return Reply.json(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "pause_turn",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        )

    def event(kind: str, data: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    return Reply.sse(
        [
            event("message_start", {"message": {"id": "msg_1", "model": "m", "content": []}}),
            event("content_block_start", {"index": 0, "content_block": {"type": "text"}}),
            event(
                "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}}
            ),
            event("message_delta", {"delta": {"stop_reason": "pause_turn"}}),
            event("message_stop", {}),
        ]
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_a_server_that_pauses_forever_gets_five_continuations(
    attacks: AttackTally, stream: bool
) -> None:
    with FakeProviderServer() as server:
        server.handler = lambda request: paused(stream, "more ")
        chat = AnthropicChat("m", base_url=server.base_url, stream=stream, timeouts=FAST)
        result = await chat([UserMessage("x")], [])
        sent = len(server.requests)
        largest = max(len(r.body) for r in server.requests)
    attacks.record("endless pause_turn", sent != 6, f"{sent} requests")
    attacks.record("endless pause_turn", largest > 2_000, f"a request of {largest} bytes")
    assert result.finish_reason_raw == "pause_turn"


def streamed_text(pieces: list[str]) -> Reply:
    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"content": piece}) for piece in pieces]
    return Reply.sse([*frames, chunk(finish="stop"), DONE])


FLOODS = {
    "blanks before a possible <think>": [" " * 10_000] * 30,
    "an unclosed <think>": ["<think>"] + ["x" * 10_000] * 30,
    "closing-tag prefixes inside <think>": ["<think>"] + ["</thin" * 2_000] * 30,
    "a tag opened one character at a time, then blanks": list("<think") + [" " * 10_000] * 30,
}


@pytest.mark.parametrize("flood", sorted(FLOODS))
async def test_think_tag_floods_hit_the_reply_size_bound(attacks: AttackTally, flood: str) -> None:
    """300 KB of text shaped to be held back by the splitter, against a 100 KB bound."""
    with FakeProviderServer() as server:
        server.enqueue(streamed_text(FLOODS[flood]))
        chat = OpenAIChat(
            "m",
            base_url=openai_url(server),
            quirks=OpenAIQuirks(think_tags=True),
            timeouts=FAST,
            retry=ONCE,
            limits=SMALL,
        )
        delivered = [0]

        def count(delta: ChatDelta) -> None:
            delivered[0] += len(delta.text)

        try:
            result = await chat([UserMessage("x")], [], on_delta=count)
        except ProviderError as error:
            attacks.record("think_tags flood", error.kind != "too_large", f"{flood}: {error}")
            # Nothing piles up unseen: what arrived flowed on until the bound stopped it.
            held = delivered[0] < SMALL.max_body_bytes // 2
            attacks.record("think_tags flood", held, f"{flood}: {delivered[0]} delivered")
        else:
            size = len(result.message.content) + len(result.message.reasoning or "")
            attacks.record("think_tags flood", True, f"{flood}: {size} characters accepted")
