"""Typed conversation data: messages, tool calls, tool specs, results and usage.

Every class here is a frozen attrs class. Messages carry a ``role`` literal and are told
apart by it; :data:`agentfsm.engine._serialization.converter` turns any of them into JSON
and back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, TypeAlias

from attrs import field, frozen

__all__ = [
    "AssistantMessage",
    "ChatResult",
    "ImagePart",
    "Message",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "UserMessage",
]


@frozen
class ToolCall:
    """One tool invocation requested by the model."""

    id: str
    """The provider's id for the call; the matching :class:`ToolMessage` echoes it."""
    name: str
    """The tool's name, as advertised in its :class:`ToolSpec`."""
    arguments: dict[str, Any] = field(factory=dict)
    """The decoded JSON arguments."""
    raw_arguments: str | None = None
    """The model's argument text when it was not a JSON object (``arguments`` is then
    empty); a tool runner reports it back as malformed instead of running the tool."""


@frozen
class ToolSpec:
    """A tool as advertised to the model."""

    name: str
    """Unique tool name."""
    description: str
    """What the tool does, for the model."""
    parameters: dict[str, Any] = field(factory=lambda: {"type": "object", "properties": {}})
    """JSON Schema of the arguments object."""
    concurrency_safe: bool = False
    """The tool only reads: consecutive safe calls may run in parallel."""
    destructive: bool = False
    """The tool changes files or the outside world: a success counts as a mutation."""


@frozen
class ToolResult:
    """What a tool returned. A tool never raises: a failure is ``ok=False`` with an error."""

    ok: bool
    """Whether the tool succeeded."""
    output: str
    """The tool's output text (may be partial on failure)."""
    error: str | None = None
    """Why it failed; ``None`` on success."""
    metadata: dict[str, Any] = field(factory=dict)
    """Facts for the engine and policies, not shown to the model. Known keys: ``path`` (the
    file a destructive tool changed), ``before_sha`` / ``after_sha`` (content hashes on
    both sides of an edit, which loop health uses to spot reverts), ``image``
    (``{"media_type", "data"}`` base64: re-sent to the model as a user message)."""
    display_output: str | None = None
    """The full output for people, when ``output`` was cut down for the model."""


def _calls_tuple(calls: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(calls)


@frozen
class SystemMessage:
    """Instructions for the model."""

    content: str
    """The system prompt text."""
    role: Literal["system"] = "system"
    """Discriminator."""


@frozen
class ImagePart:
    """An image attached to a user message."""

    media_type: str
    """``image/png``, ``image/jpeg`` …"""
    data: str
    """Base64-encoded bytes."""


def _images_tuple(images: Iterable[ImagePart]) -> tuple[ImagePart, ...]:
    return tuple(images)


@frozen
class UserMessage:
    """A user turn."""

    content: str
    """The user's text."""
    images: tuple[ImagePart, ...] = field(default=(), converter=_images_tuple)
    """Images sent with the text."""
    role: Literal["user"] = "user"
    """Discriminator."""


def _items_tuple(items: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    return tuple(items)


@frozen
class AssistantMessage:
    """A model turn: text, optional tool calls, optional reasoning text."""

    content: str = ""
    """The visible answer text (empty when the model only called tools)."""
    tool_calls: tuple[ToolCall, ...] = field(default=(), converter=_calls_tuple)
    """Tools the model asks to run, in the order it listed them."""
    reasoning: str | None = None
    """Reasoning or thinking text the provider exposed, if any."""
    role: Literal["assistant"] = "assistant"
    """Discriminator."""
    reasoning_items: tuple[dict[str, Any], ...] = field(default=(), converter=_items_tuple)
    """Opaque reasoning records the provider wants back with the rest of the history, as
    the adapter that read them keeps them (the OpenAI Responses API's ``reasoning`` items:
    ``summary`` and ``encrypted_content``). Only the adapter of that wire sends them; the
    others ignore them."""


@frozen
class ToolMessage:
    """The result of one tool call, as the model sees it."""

    tool_call_id: str
    """The :attr:`ToolCall.id` this answers."""
    content: str
    """Raw output on success; the JSON from ``format_tool_result_content`` on failure."""
    is_error: bool = False
    """The tool failed (or was cancelled)."""
    role: Literal["tool"] = "tool"
    """Discriminator."""


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage
"""Any conversation message; ``role`` tells which."""


@frozen
class Usage:
    """Token usage of one call or of a whole run.

    ``input_tokens`` is inclusive of cache reads and writes; ``output_tokens`` is inclusive of
    reasoning tokens. The other fields break those totals down; they are never added on top.
    """

    input_tokens: int = 0
    """Prompt tokens, cache reads and writes included."""
    output_tokens: int = 0
    """Completion tokens, reasoning included."""
    cache_read_tokens: int = 0
    """Part of ``input_tokens`` served from the provider's prompt cache."""
    cache_write_tokens: int = 0
    """Part of ``input_tokens`` written to the provider's prompt cache."""
    reasoning_tokens: int = 0
    """Part of ``output_tokens`` spent on reasoning."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


@frozen
class ChatResult:
    """One resolved chat call."""

    message: AssistantMessage
    """The assistant message the model produced."""
    usage: Usage | None = None
    """Tokens the call used, when the provider reported them."""
    finish_reason: str | None = None
    """Why the answer ended. The bundled adapters give one of ``stop``, ``length``,
    ``tool_calls``, ``content_filter`` or ``other`` (``None`` when the provider gave no
    reason); see ``docs/providers.md``."""
    model: str | None = None
    """The model that answered, when the provider said."""
    response_id: str | None = None
    """The provider's id of the response (``chatcmpl-…``, ``msg_…``), when it gave one."""
    finish_reason_raw: str | None = None
    """The provider's own finish reason when it is not one the adapter knows (then
    ``finish_reason`` is ``other``) or is empty; ``None`` otherwise."""
