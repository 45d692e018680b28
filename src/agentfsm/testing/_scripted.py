"""``ScriptedChat`` and ``ScriptedTools``: deterministic doubles for testing your own agents."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TypeAlias, overload

from attrs import evolve, field, frozen

from agentfsm.adapters.tools import run_in_daemon_thread
from agentfsm.engine import (
    AssistantMessage,
    ChatDelta,
    ChatResult,
    DeltaHandler,
    Message,
    SupportsAbort,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)

__all__ = [
    "ChatRequest",
    "ScriptExhausted",
    "ScriptFn",
    "ScriptItem",
    "ScriptedChat",
    "ScriptedTools",
    "Streamed",
    "tool_reply",
]


def _pieces(value: Iterable[str | ChatDelta]) -> tuple[str | ChatDelta, ...]:
    return tuple(value)


def _texts(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@frozen
class Streamed:
    """A scripted reply delivered in pieces through ``on_delta`` before the call returns.

    The ``thinking`` pieces are streamed first (as ``ChatDelta("thinking", ...)``), then the
    ``chunks`` (a string is a ``ChatDelta("text", ...)``; a :class:`ChatDelta` is sent as it
    is, so text and thinking can interleave). The call then returns ``then`` with the
    streamed text as its content and the streamed reasoning (if any) as its reasoning::

        ScriptedChat([
            Streamed(["Hel", "lo"], thinking=["Greet."]),
            Streamed(["Let me look."], then=tool_reply(("search", {"q": "x"}))),
        ])

    Args:
        chunks: The answer text, in pieces.
        thinking: Reasoning text, in pieces, streamed before the answer.
        then: The rest of the reply: tool calls, usage, finish reason. Its content (and
            reasoning) must be empty or equal the streamed text. ``None`` is a plain answer.

    Raises:
        ValueError: ``then`` carries a different text than the one streamed.
    """

    chunks: tuple[str | ChatDelta, ...] = field(default=(), converter=_pieces)
    thinking: tuple[str, ...] = field(default=(), converter=_texts)
    then: ChatResult | AssistantMessage | None = None

    def __attrs_post_init__(self) -> None:
        message = self.then.message if isinstance(self.then, ChatResult) else self.then
        if message is None:
            return
        if message.content and message.content != self.text:
            raise ValueError(
                f"Streamed: then's content {message.content!r} is not the streamed text "
                f"{self.text!r}; leave it empty"
            )
        if message.reasoning and message.reasoning != (self.reasoning or ""):
            raise ValueError(
                f"Streamed: then's reasoning {message.reasoning!r} is not the streamed "
                f"reasoning {self.reasoning!r}; leave it empty"
            )

    def deltas(self) -> tuple[ChatDelta, ...]:
        """What ``on_delta`` receives, in order."""
        return tuple(ChatDelta("thinking", piece) for piece in self.thinking) + tuple(
            ChatDelta("text", piece) if isinstance(piece, str) else piece for piece in self.chunks
        )

    @property
    def text(self) -> str:
        """The streamed answer text, joined."""
        return "".join(d.text for d in self.deltas() if d.kind == "text")

    @property
    def reasoning(self) -> str | None:
        """The streamed reasoning, joined; ``None`` when nothing was streamed as thinking."""
        thinking = [d.text for d in self.deltas() if d.kind == "thinking"]
        return "".join(thinking) if thinking else None


ScriptItem: TypeAlias = ChatResult | AssistantMessage | str | Streamed | BaseException
"""One scripted reply: a full result, a message, plain text, a :class:`Streamed` reply, or an
error to raise."""


class ScriptExhausted(AssertionError):
    """The model was called more times than the script has replies."""


@frozen
class ChatRequest(Sequence[Message]):
    """One call ``ScriptedChat`` received: what a script function is given, and what
    :attr:`ScriptedChat.requests` keeps.

    It is also the sequence of its messages, so a script function written for the messages
    alone (``messages[0]``, ``len(messages)``, ``list(messages)``) works unchanged.
    """

    messages: tuple[Message, ...]
    """The messages, as they were at call time."""
    tools: tuple[ToolSpec, ...] = ()
    """The tools offered."""
    temperature: float | None = None
    """The call's ``temperature``."""
    max_tokens: int | None = None
    """The call's ``max_tokens``."""
    signal: SupportsAbort | None = field(default=None, eq=False, repr=False)
    """The call's abort signal, if it got one (not compared)."""

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...

    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        return self.messages[index]

    def __len__(self) -> int:
        return len(self.messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)


def _chat_shaped(fn: Callable[..., object]) -> bool:
    """Whether ``fn`` has the chat function's shape: ``(messages, tools, **params)``."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    required = [p for p in positional if p.default is p.empty and p.kind != p.VAR_POSITIONAL]
    return len(required) >= 2 or (len(positional) >= 2 and positional[1].name == "tools")


def _params_for(fn: Callable[..., object], request: ChatRequest) -> dict[str, object]:
    """The call parameters ``fn`` accepts by keyword."""
    offered: dict[str, object] = {
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "signal": request.signal,
    }
    parameters = inspect.signature(fn).parameters
    if any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
        return offered
    return {name: value for name, value in offered.items() if name in parameters}


def _wants_request(fn: Callable[..., object]) -> bool:
    """Whether ``fn`` takes a :class:`ChatRequest`: its first parameter is unannotated or
    annotated ``ChatRequest``, rather than e.g. ``Sequence[Message]``."""
    try:
        parameter = next(iter(inspect.signature(fn).parameters.values()), None)
    except (TypeError, ValueError):
        return True
    if parameter is None or parameter.annotation is inspect.Parameter.empty:
        return True
    annotation = parameter.annotation
    if isinstance(annotation, str):
        return annotation.strip("'\" ").rsplit(".", 1)[-1] == "ChatRequest"
    return isinstance(annotation, type) and issubclass(annotation, ChatRequest)


ScriptFn: TypeAlias = Callable[[ChatRequest], "ScriptItem | Awaitable[ScriptItem]"]
ChatShapedScript: TypeAlias = Callable[..., "ScriptItem | Awaitable[ScriptItem]"]
"""A script shaped like a chat function: ``(messages, tools, *, temperature=None,
max_tokens=None, signal=None)``."""
"""A script as a function: gets the :class:`ChatRequest`, returns (or awaits) the reply."""


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

    ``script`` is either a sequence of replies, used in order, or a function returning the
    next reply (sync or async). The function gets a :class:`ChatRequest`: the messages, the
    tools offered and the call parameters (it is also the sequence of the messages). A
    function whose parameter is annotated with another type than ``ChatRequest`` (such as
    ``Sequence[Message]``, the older form) gets the messages exactly as the caller passed
    them. A function shaped like a chat function, ``(messages, tools, *, temperature=None,
    max_tokens=None, signal=None)``, is called that way (with the keywords it accepts). A
    reply that is an exception is raised; a
    :class:`Streamed` reply is delivered in pieces through ``on_delta``; any other reply is
    delivered whole, as one thinking and one text delta. Every call is recorded in
    :attr:`requests` (set ``record=False`` to skip the copy).

    Example::

        def answer(request: ChatRequest) -> ScriptItem:
            if any(spec.name == "search" for spec in request.tools):
                return tool_reply(("search", {"q": request.messages[-1].content}))
            return Streamed(["No tools", ", sorry."])

        chat = ScriptedChat(answer)

    Args:
        script: Replies, or a function producing them (``ScriptedChat(["hello"])`` answers
            ``hello`` once; a bare string is refused).
        usage: Usage attached to replies given as text or messages.
        model: Model name reported in results.
        record: Keep a copy of each request.
    """

    def __init__(
        self,
        script: Sequence[ScriptItem] | ScriptFn | ChatShapedScript,
        *,
        usage: Usage | None = None,
        model: str | None = "scripted",
        record: bool = True,
    ) -> None:
        if isinstance(script, (str, bytes)):
            reply = repr(script) if len(script) <= 60 else "..."
            raise TypeError(
                f"ScriptedChat takes a list of replies, not a {type(script).__name__} (each "
                f"character would be a reply): did you mean ScriptedChat([{reply}])?"
            )
        self._chat_shaped = False
        if callable(script):
            self._fn: Callable[..., object] | None = script
            self._chat_shaped = _chat_shaped(script)
            self._wants_request = _wants_request(script)
            self._items: list[ScriptItem] = []
        else:
            self._fn = None
            self._wants_request = True
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
        request = ChatRequest(tuple(messages), tuple(tools), temperature, max_tokens, signal)
        if self._record:
            self.requests.append(request)
        index = self._next
        self._next += 1
        if self._fn is not None:
            fn: Callable[..., object] = self._fn
            if self._chat_shaped:  # (messages, tools, *, temperature, max_tokens, signal)
                item: object = fn(messages, request.tools, **_params_for(fn, request))
            else:
                # A function of the messages (the older form) gets the caller's very sequence.
                item = fn(request if self._wants_request else messages)
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
        if isinstance(item, Streamed):
            return await self._stream(item, on_delta)
        if not isinstance(item, ChatResult | AssistantMessage | str):
            raise TypeError(f"ScriptedChat: the script gave {type(item).__name__}, not a reply")
        result = self._to_result(item)
        if on_delta is not None:
            if result.message.reasoning:
                on_delta(ChatDelta("thinking", result.message.reasoning))
            if result.message.content:
                on_delta(ChatDelta("text", result.message.content))
        return result

    async def _stream(self, item: Streamed, on_delta: DeltaHandler | None) -> ChatResult:
        for number, delta in enumerate(item.deltas()):
            if number:
                await asyncio.sleep(0)  # let the caller's other tasks run between pieces
            if on_delta is not None:
                on_delta(delta)
        result = self._to_result(item.then if item.then is not None else "")
        message = evolve(
            result.message,
            content=item.text,
            reasoning=item.reasoning if item.reasoning is not None else result.message.reasoning,
        )
        return evolve(result, message=message)

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

    Async functions run on the event loop. A sync function runs in a daemon thread of its
    own, as in :class:`~agentfsm.adapters.tools.ToolBox`, so a blocking one does not hold
    up the loop: an interrupt or a timeout abandons the thread at once (Python cannot stop
    it; being a daemon, it never keeps the process alive).
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
            if inspect.iscoroutinefunction(fn):
                value = await fn(**call.arguments)
            else:
                value = await run_in_daemon_thread(
                    fn, call.arguments, name=f"scripted-tool:{call.name}"
                )
                if inspect.isawaitable(value):
                    value = await value
        except Exception as exc:
            return ToolResult(False, "", f"{type(exc).__name__}: {exc}")
        if isinstance(value, ToolResult):
            return value
        return ToolResult(True, str(value))
