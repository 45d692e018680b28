"""``Agent(...)`` refuses a chat model or tools it could never run with, when it is built,
saying what was probably meant (before: accepted, then a failure inside the runner)."""

from __future__ import annotations

import asyncio
import functools
import warnings
from collections.abc import Sequence
from typing import Any

import pytest

from agentfsm import Agent, ChatResult, Message, ToolSpec
from agentfsm.adapters.providers import AnthropicChat, LocalModel, OpenAIChat
from agentfsm.adapters.tools import ToolBox
from agentfsm.testing import ScriptedChat


async def chat_fn(messages: Sequence[Message], tools: Sequence[ToolSpec], **_: Any) -> ChatResult:
    raise AssertionError("never called")


async def keywordless(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ChatResult:
    raise AssertionError("the runner always passes temperature, max_tokens, signal, on_delta")


def _prefixed(function: Any) -> Any:
    """A decorator that supplies the wrapped function's first argument."""

    @functools.wraps(function)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        return await function("prefix", *args, **kwargs)

    return wrapper


@_prefixed
async def decorated(prefix: str, messages: Any, tools: Any, **options: Any) -> ChatResult:
    raise AssertionError("never called")


class CallableAndAwaitable:
    """A chat object that can also be awaited (some clients are)."""

    async def __call__(self, messages: Any, tools: Any, **options: Any) -> ChatResult:
        raise AssertionError("never called")

    def __await__(self) -> Any:
        return iter(())


def word_count(text: str) -> int:
    """Count words."""
    return len(text.split())


@pytest.mark.parametrize(
    ("chat", "meant"),
    [
        ("gpt-4o", r"did you mean OpenAIChat\('gpt-4o'\)\?"),
        ("claude-sonnet-4-5", r"did you mean AnthropicChat\('claude-sonnet-4-5'\)\?"),
        (OpenAIChat, r"did you mean OpenAIChat\(\.\.\.\)\?"),
        (AnthropicChat, r"did you mean AnthropicChat\(\.\.\.\)\?"),
        (42, "takes a chat model"),
        (None, "takes a chat model"),
        (lambda: None, r"cannot be called as chat\(messages, tools"),
        (keywordless, "unexpected keyword argument 'temperature'"),
        (LocalModel, r"did you mean async with LocalModel\(\) as model: Agent\(model\.chat\(\)"),
    ],
)
def test_a_chat_that_is_no_chat_model_is_refused_when_built(chat: Any, meant: str) -> None:
    with pytest.raises(TypeError, match=meant):
        Agent(chat)


def test_a_model_object_that_is_no_chat_points_at_its_chat() -> None:
    with pytest.raises(TypeError, match=r"LocalModel is not a chat model itself: did you mean"):
        Agent(LocalModel())  # type: ignore[arg-type]


def test_a_called_chat_function_is_refused_without_a_never_awaited_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError, match="pass the chat function itself"):
            Agent(chat_fn([], []))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tools", "meant"),
    [
        ([word_count], r"did you mean ToolBox\(\[\.\.\.\]\)"),
        (word_count, r"did you mean ToolBox\(\[\.\.\.\]\)"),
        ("read_file", "must be a tool runner"),
        ({"word_count": word_count}, "must be a tool runner"),
        ([], r"\(no tools: None\)"),
        (ToolBox, r"ToolBox is a class, not a tool runner: did you mean ToolBox\(\.\.\.\)\?"),
    ],
)
def test_tools_that_are_no_tool_runner_are_refused_when_built(tools: Any, meant: str) -> None:
    with pytest.raises(TypeError, match=meant):
        Agent(ScriptedChat(["hi"]), tools)


def test_chat_models_and_tool_runners_of_every_kind_are_accepted() -> None:
    for chat in (
        ScriptedChat(["hi"]),
        chat_fn,
        OpenAIChat("m", base_url="http://127.0.0.1:9/v1"),
        AnthropicChat("m", base_url="http://127.0.0.1:9"),
        decorated,
        CallableAndAwaitable(),
        functools.partial(chat_fn),
    ):
        Agent(chat, ToolBox([word_count]))
        Agent(chat, None)


def test_run_sync_runs_a_script_and_refuses_inside_an_event_loop() -> None:
    agent = Agent(ScriptedChat(["hi", "again"]))
    assert agent.run_sync("hello").stopped_reason == "final"

    async def inside() -> None:
        with pytest.raises(RuntimeError, match=r"use await agent\.run\(\)"):
            agent.run_sync("hello")

    asyncio.run(inside())


def test_an_error_raised_through_run_sync_is_not_chained_to_the_event_loop_lookup() -> None:
    agent = Agent(ScriptedChat([ValueError("the provider said no")]))
    with pytest.raises(ValueError, match="the provider said no") as raised:
        agent.run_sync("hello")
    # No "no running event loop ... During handling of the above exception" above it.
    assert raised.value.__context__ is None
    assert raised.value.__cause__ is None
