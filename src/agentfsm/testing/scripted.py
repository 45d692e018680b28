"""``ScriptedChat`` and ``ScriptedTools``: deterministic doubles for testing your own agents."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeAlias

from attrs import frozen

from agentfsm.engine.messages import (
    AssistantMessage,
    ChatResult,
    Message,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from agentfsm.engine.protocols import ChatDelta, DeltaHandler, SupportsAbort

__all__ = [
    "ChatRequest",
    "ScriptExhausted",
    "ScriptItem",
    "ScriptedChat",
    "ScriptedTools",
    "tool_reply",
]

ScriptItem: TypeAlias = ChatResult | AssistantMessage | str | BaseException
"""One scripted reply: a full result, a message, plain text, or an error to raise."""

ScriptFn: TypeAlias = Callable[[Sequence[Message]], "ScriptItem | Awaitable[ScriptItem]"]


class ScriptExhausted(AssertionError):
    """The model was called more times than the script has replies."""


@frozen
class ChatRequest:
    """One call ``ScriptedChat`` received."""

    messages: tuple[Message, ...]
    """The messages, as they were at call time."""
    tools: tuple[ToolSpec, ...]
    """The tools offered."""
    temperature: float | None
    max_tokens: int | None


def tool_reply(
    *calls: ToolCall | tuple[str, dict[str, object]], content: str = ""
) -> AssistantMessage:
    """An assistant message asking for tools; ``("name", {args})`` pairs get ids ``call_1``…"""
    built: list[ToolCall] = []
    for index, call in enumerate(calls, start=1):
        if isinstance(call, ToolCall):
            built.append(call)
        else:
            name, args = call
            built.append(ToolCall(f"call_{index}", name, dict(args)))
    return AssistantMessage(content, tool_calls=tuple(built))


class ScriptedChat:
    """A chat model that answers from a script.

    ``script`` is either a sequence of replies, used in order, or a function of the messages
    returning the next reply (sync or async). A reply that is an exception is raised. Every
    call is recorded in :attr:`requests` (set ``record=False`` to skip the copy).

    Args:
        script: Replies, or a function producing them.
        usage: Usage attached to replies given as text or messages.
        model: Model name reported in results.
        record: Keep a copy of each request.
    """

    def __init__(
        self,
        script: Sequence[ScriptItem] | ScriptFn,
        *,
        usage: Usage | None = None,
        model: str | None = "scripted",
        record: bool = True,
    ) -> None:
        if callable(script):
            self._fn: ScriptFn | None = script
            self._items: list[ScriptItem] = []
        else:
            self._fn = None
            self._items = list(script)
        self._usage = usage
        self._model = model
        self._record = record
        self._next = 0
        self.requests: list[ChatRequest] = []

    @property
    def calls(self) -> int:
        """How many times the model was called."""
        return self._next

    async def __call__(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        signal: SupportsAbort | None = None,
        on_delta: DeltaHandler | None = None,
    ) -> ChatResult:
        if self._record:
            self.requests.append(
                ChatRequest(tuple(messages), tuple(tools), temperature, max_tokens)
            )
        index = self._next
        self._next += 1
        if self._fn is not None:
            item = self._fn(messages)
            if inspect.isawaitable(item):
                item = await item
        elif index < len(self._items):
            item = self._items[index]
        else:
            raise ScriptExhausted(
                f"ScriptedChat was called {index + 1} times but has {len(self._items)} replies"
            )
        if isinstance(item, BaseException):
            raise item
        result = self._to_result(item)
        if on_delta is not None:
            if result.message.reasoning:
                on_delta(ChatDelta("thinking", result.message.reasoning))
            if result.message.content:
                on_delta(ChatDelta("text", result.message.content))
        return result

    def _to_result(self, item: ChatResult | AssistantMessage | str) -> ChatResult:
        if isinstance(item, ChatResult):
            return item
        message = AssistantMessage(item) if isinstance(item, str) else item
        reason = "tool_calls" if message.tool_calls else "stop"
        return ChatResult(message, self._usage, reason, self._model)


ToolFn: TypeAlias = Callable[..., "ToolResult | str | Awaitable[ToolResult | str]"]


class ScriptedTools:
    """A tool runner built from plain functions, for tests.

    Each function gets the call's arguments as keyword arguments and returns a
    :class:`ToolResult` or a string (a success). An exception becomes a failed result, an
    unknown tool name a failed result naming the known ones: ``run`` never raises.
    """

    def __init__(
        self,
        functions: Mapping[str, ToolFn],
        *,
        specs: Sequence[ToolSpec] | None = None,
    ) -> None:
        self._functions = dict(functions)
        self._specs = (
            tuple(specs)
            if specs is not None
            else tuple(ToolSpec(name, f"The {name} tool.") for name in self._functions)
        )
        self.calls: list[ToolCall] = []

    def specs(self) -> Sequence[ToolSpec]:
        return self._specs

    async def run(self, call: ToolCall, *, signal: SupportsAbort | None = None) -> ToolResult:
        self.calls.append(call)
        fn = self._functions.get(call.name)
        if fn is None:
            known = ", ".join(sorted(self._functions)) or "none"
            return ToolResult(False, "", f"unknown tool {call.name!r}; available: {known}")
        try:
            value = fn(**call.arguments)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            return ToolResult(False, "", f"{type(exc).__name__}: {exc}")
        if isinstance(value, ToolResult):
            return value
        return ToolResult(True, str(value))
