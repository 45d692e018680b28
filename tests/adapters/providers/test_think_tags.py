"""The ``think_tags`` quirk: a ``<think>…</think>`` opening an answer is reasoning, streamed
(the tags split anywhere across deltas) or not."""

from __future__ import annotations

import itertools

import pytest

from agentfsm import UserMessage
from agentfsm.adapters.providers import OpenAIChat, OpenAIQuirks, Timeouts
from agentfsm.adapters.providers._profiles import quirk_profile
from agentfsm.adapters.providers._think import MAX_LEADING_SPACE, ThinkSplitter, split_think
from agentfsm.conformance._frames import DONE, chunk, completion, openai_url
from agentfsm.engine._protocols import ChatDelta
from agentfsm.testing import FakeProviderServer, Reply

FAST = Timeouts(connect=2, first_byte=2, idle=2, terminal_grace=0.3)
THINK = OpenAIQuirks(think_tags=True)
ANSWER = "<think>\nI add 2 and 2\u2028 (\udcff lone)</think>\n\nIt is 4 </think> <think>."


@pytest.mark.parametrize(
    ("content", "text", "reasoning"),
    [
        (ANSWER, "It is 4 </think> <think>.", "\nI add 2 and 2\u2028 (\udcff lone)"),
        ("\n  <think>a</think>b", "b", "a"),
        ("<think></think>answer", "answer", ""),
        ("<think>a</think>", "", "a"),
        ("<think>a</think> \n ", "", "a"),
        ("<think>cut off while thinking", "", "cut off while thinking"),
        ("<think>cut off at the tag </thi", "", "cut off at the tag </thi"),
        ("plain answer", "plain answer", ""),
        ("the tag <think>later</think> is text", "the tag <think>later</think> is text", ""),
        ("<thinking>not the tag</thinking>", "<thinking>not the tag</thinking>", ""),
        ("<thi", "<thi", ""),
        ("  ", "  ", ""),
        ("", "", ""),
    ],
)
def test_whole_answers(content: str, text: str, reasoning: str) -> None:
    assert split_think(content) == (text, reasoning)


def feed_all(pieces: list[str]) -> tuple[str, str, list[tuple[str, str]]]:
    splitter = ThinkSplitter()
    out = [splitter.feed(piece) for piece in pieces]
    out.append(splitter.finish())
    return "".join(t for t, _ in out), "".join(r for _, r in out), out


@pytest.mark.parametrize(
    "content",
    [ANSWER, "  <think>ab</think>  cd", "<think>unclosed </thin", "<thi", "no tags here"],
)
def test_every_split_point_gives_the_same_answer(content: str) -> None:
    expected = split_think(content)
    cuts = range(1, len(content))
    for first, second in itertools.combinations_with_replacement(cuts, 2):
        pieces = [content[:first], content[first:second], content[second:]]
        text, reasoning, _ = feed_all(pieces)
        assert (text, reasoning) == expected, pieces
    text, reasoning, out = feed_all(list(content))  # one character at a time
    assert (text, reasoning) == expected
    # Reasoning always comes before any text; nothing of a tag reaches either.
    kinds = [("r" if r else "") + ("t" if t else "") for t, r in out if t or r]
    assert "".join(kinds) == "".join(sorted("".join(kinds), key="rt".index))


def frames(content: str) -> list[str]:
    """The answer streamed one character per chunk."""
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": c}) for c in content]
    return [*out, chunk(finish="stop"), DONE]


@pytest.mark.parametrize("stream", [False, True])
async def test_the_quirk_through_the_adapter(stream: bool) -> None:
    deltas: list[ChatDelta] = []
    with FakeProviderServer() as server:
        for _ in range(2):
            if stream:
                server.enqueue(Reply.sse(frames(ANSWER)))
            else:
                server.enqueue(Reply.json(completion({"role": "assistant", "content": ANSWER})))
        split = OpenAIChat(
            "m", base_url=openai_url(server), stream=stream, quirks=THINK, timeouts=FAST
        )
        result = await split([UserMessage("2+2?")], [], on_delta=deltas.append)
        plain = OpenAIChat("m", base_url=openai_url(server), stream=stream, timeouts=FAST)
        unchanged = await plain([UserMessage("2+2?")], [])
    assert result.message.content == "It is 4 </think> <think>."
    assert result.message.reasoning == "\nI add 2 and 2\u2028 (\udcff lone)"
    assert (unchanged.message.content, unchanged.message.reasoning) == (ANSWER, None)
    if stream:
        thinking = "".join(d.text for d in deltas if d.kind == "thinking")
        text = "".join(d.text for d in deltas if d.kind == "text")
        assert (text, thinking) == (result.message.content, result.message.reasoning)
        kinds = [d.kind for d in deltas]
        assert kinds == sorted(kinds, key=["thinking", "text"].index)


async def test_an_answer_cut_off_while_thinking_is_all_reasoning() -> None:
    content = "<think>still thinking when max_tokens hit </th"
    body = frames(content)
    body[-2] = chunk(finish="length")
    deltas: list[ChatDelta] = []
    with FakeProviderServer() as server:
        server.enqueue(Reply.sse(body))
        chat = OpenAIChat("m", base_url=openai_url(server), quirks=THINK, timeouts=FAST)
        result = await chat([UserMessage("x")], [], on_delta=deltas.append)
    assert result.message.content == ""
    assert result.message.reasoning == "still thinking when max_tokens hit </th"
    assert result.finish_reason == "length"
    assert "".join(d.text for d in deltas) == result.message.reasoning
    assert {d.kind for d in deltas} == {"thinking"}


async def test_a_held_back_tag_start_is_text_when_the_stream_ends() -> None:
    deltas: list[ChatDelta] = []
    with FakeProviderServer() as server:
        server.enqueue(Reply.sse(frames(" <thi")))
        chat = OpenAIChat("m", base_url=openai_url(server), quirks=THINK, timeouts=FAST)
        result = await chat([UserMessage("x")], [], on_delta=deltas.append)
    assert (result.message.content, result.message.reasoning) == (" <thi", None)
    assert [(d.kind, d.text) for d in deltas] == [("text", " <thi")]


def test_leading_whitespace_is_held_back_only_so_far() -> None:
    splitter = ThinkSplitter()
    held = " " * MAX_LEADING_SPACE
    assert splitter.feed(held) == ("", "")
    assert splitter.feed(" ") == (held + " ", "")  # past the bound: the answer is text
    assert splitter.feed("<think>x</think>") == ("<think>x</think>", "")
    assert split_think(held + "<think>x</think>y") == ("y", "x")
    assert split_think(held + " <think>x</think>y") == (held + " <think>x</think>y", "")


def test_the_quirk_is_named_like_the_others() -> None:
    profile = quirk_profile("openai-chat", {"think_tags": "true"})
    assert isinstance(profile, OpenAIQuirks)
    assert profile.think_tags
    assert not OpenAIQuirks().think_tags
