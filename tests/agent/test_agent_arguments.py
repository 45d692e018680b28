"""``Agent(...)`` refuses a chat model, tools, hooks, a preamble or a sandbox it could never
run with, when it is built, saying what was probably meant (before: accepted, then a failure
inside the runner, after the model was called)."""

from __future__ import annotations

import asyncio
import functools
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentfsm import Agent, ChatResult, Hooks, Message, ToolSpec, WorkspacePreamble
from agentfsm.adapters.providers import AnthropicChat, LocalModel, OpenAIChat
from agentfsm.adapters.tools import McpServer, ToolBox, workspace_tools
from agentfsm.agent import RunStop
from agentfsm.policies import presets, verify
from agentfsm.sandbox import BubblewrapSandbox, Unsandboxed
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


def on_stop(event: RunStop) -> None:
    """A stop hook."""


@pytest.mark.parametrize(
    ("arguments", "meant"),
    [
        ({"hooks": Hooks}, r"not the class Hooks: did you mean Hooks\(stop=\.\.\.\)\?"),
        ({"hooks": {"stop": print}}, r"not dict: did you mean Hooks\(stop=print\)\?"),
        ({"hooks": on_stop}, r"not a function: did you mean Hooks\(stop=on_stop\)\?"),
        ({"hooks": "stop"}, r"must be a Hooks or None, not str"),
        ({"preamble": WorkspacePreamble}, r"did you mean WorkspacePreamble\(root\)\?"),
        ({"preamble": "README"}, r"not str: did you mean WorkspacePreamble\('README'\)"),
        ({"preamble": 42}, "must be a PreambleProvider"),
        ({"sandbox": Unsandboxed}, r"Unsandboxed is a class, not a sandbox: did you mean "),
        ({"sandbox": BubblewrapSandbox}, r"did you mean BubblewrapSandbox\(\.\.\.\)\?"),
        ({"sandbox": "bwrap"}, r"sandbox must be a CommandSandbox"),
    ],
)
def test_hooks_preamble_and_sandbox_are_checked_when_built(
    arguments: dict[str, Any], meant: str
) -> None:
    chat = ScriptedChat(["never"])
    with pytest.raises(TypeError, match=meant):
        Agent(chat, **arguments)
    assert chat.calls == 0


def test_a_hook_that_is_not_callable_is_refused_when_set() -> None:
    with pytest.raises(TypeError, match=r"Hooks\.stop must be a function .* RunStop.*got 1"):
        Hooks(stop=1)  # type: ignore[arg-type]
    hooks = Hooks(stop=on_stop)
    with pytest.raises(TypeError, match=r"Hooks\.session_start must be a function"):
        hooks.session_start = "start"  # type: ignore[assignment]


def test_what_the_checks_let_through_still_runs(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    stopped: list[RunStop] = []
    agent = Agent(
        ScriptedChat(["done"]),
        hooks=Hooks(stop=stopped.append),
        preamble=WorkspacePreamble(tmp_path),
        sandbox=Unsandboxed(),
    )
    assert agent.run_sync("go").stopped_reason == "final"
    assert [s.stopped_reason for s in stopped] == ["final"]


@pytest.mark.parametrize("sandbox", [Unsandboxed, BubblewrapSandbox, "bwrap"])
def test_every_sandbox_taker_refuses_a_class_or_a_name_when_built(
    tmp_path: Path, sandbox: Any
) -> None:
    makers: list[tuple[str, Callable[[], object]]] = [
        ("workspace_tools", lambda: workspace_tools(tmp_path, sandbox=sandbox)),
        ("verify", lambda: verify("make check", workspace=tmp_path, sandbox=sandbox)),
        ("verify", lambda: presets.coding_agent(workspace=tmp_path, sandbox=sandbox)),
        ("McpServer", lambda: McpServer.stdio("s", command="server", sandbox=sandbox)),
    ]
    for owner, make in makers:
        with pytest.raises(TypeError, match=rf"^{owner}: .*(did you mean|CommandSandbox)"):
            make()


async def test_run_takes_a_string_or_messages_and_says_so() -> None:
    chat = ScriptedChat(["never"])
    agent = Agent(chat)
    with pytest.raises(TypeError, match=r"Agent\.run: message 0 is a dict, not a message"):
        await agent.run([{"role": "user", "content": "hi"}])  # type: ignore[list-item]
    assert chat.calls == 0
