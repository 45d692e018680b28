"""Session record text: compact ASCII JSON, formatted directly for the frequent records.

:func:`dumps` is ``json.dumps(obj, separators=(",", ":"))`` (ASCII: any text, lone surrogates
included, becomes valid escapes) through one reused C encoder. :func:`message_json` gives
``dumps(to_jsonable(message))`` without building the intermediate dicts: each message class
has a small formatter, and anything it does not expect (a subclass, a field of another
type, an argument value that is not plain JSON) goes the generic way, so the text is always
the same.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable, Sequence
from typing import Any

from attrs import fields

from agentfsm.engine.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from agentfsm.engine.serialization import JsonChunks, c_json_encoder, compact_json, to_jsonable

__all__ = [
    "assistant_json",
    "assistant_record",
    "dumps",
    "json_string",
    "message_json",
    "message_line",
    "meta_line",
    "system_json",
    "tool_json",
    "tool_record",
    "usage_json",
    "user_json",
]

json_string: Callable[[str], str] = json.encoder.encode_basestring_ascii
"""A string's JSON literal, ASCII (the encoder's own function: the same escapes); raises
``TypeError`` for anything but a string."""
_string = json_string


class _NotPlain(Exception):
    """A value the JSON encoder does not take as is: the generic path decides."""


def _not_plain(value: object) -> Any:
    raise _NotPlain


dumps: Callable[[object], str] = compact_json()
"""``json.dumps(obj, separators=(",", ":"))``: compact ASCII JSON through one reused C encoder;
raises what ``json.dumps`` raises."""
_plain_encoder = c_json_encoder(_not_plain)
"""Encodes what ``to_jsonable`` passes through unchanged (dicts, lists, tuples, strings,
numbers, booleans, ``None``); raises for anything else."""


def _fields(cls: type) -> tuple[str, ...]:
    return tuple(a.name for a in fields(cls))


# Each formatter writes its class's fields in declaration order; a class whose fields are
# not the ones it knows (the class changed) goes the generic way.
_EXPECTED: dict[type, tuple[str, ...]] = {
    ToolCall: ("id", "name", "arguments", "raw_arguments"),
    ImagePart: ("media_type", "data"),
    AssistantMessage: ("content", "tool_calls", "reasoning", "role"),
    ToolMessage: ("tool_call_id", "content", "is_error", "role"),
    UserMessage: ("content", "images", "role"),
    SystemMessage: ("content", "role"),
    Usage: (
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
    ),
}
_KNOWN = all(_fields(cls) == names for cls, names in _EXPECTED.items())


def _no_encoder(obj: object, level: int) -> Sequence[str]:
    raise _NotPlain


_plain: JsonChunks = _plain_encoder if _plain_encoder is not None else _no_encoder
_FAST = _KNOWN and _plain_encoder is not None
"""The formatters may run: they know the classes, and the plain encoder exists."""

# Each formatter gives ``dumps(to_jsonable(message))``: directly for its own class with the
# usual field types; for anything else (a subclass, a field of another type, an argument
# value that is not plain JSON) it raises inside and the generic path writes the message.


def _generic(message: Message) -> str:
    return dumps(to_jsonable(message))


def message_line(stamp: str, message: str) -> str:
    """The line of a ``message`` record: ``ts`` ``stamp``, the message's JSON text
    ``message``."""
    return f'{{"ts":"{stamp}","kind":"message","message":{message}}}\n'


def meta_line(stamp: str, meta: str) -> str:
    """The line of a ``meta`` record: ``ts`` ``stamp``, the meta's JSON text ``meta``."""
    return f'{{"ts":"{stamp}","kind":"meta","meta":{meta}}}\n'


_AT_MESSAGE = len(message_line("", "")) - 2
"""Where the message's JSON starts in a line stamped ``""``."""
_ASSISTANT = _string("assistant")
_TOOL = _string("tool")


def assistant_json(message: AssistantMessage) -> str:
    """``dumps(to_jsonable(message))`` of an assistant message."""
    return assistant_record("", message)[_AT_MESSAGE:-2]


def assistant_record(stamp: str, message: AssistantMessage) -> str:
    """The line of the ``message`` record of an assistant message, with ``ts`` ``stamp``."""
    if _FAST and type(message) is AssistantMessage:
        try:
            calls = []
            for call in message.tool_calls:
                arguments = call.arguments
                if type(call) is not ToolCall or type(arguments) is not dict:
                    raise _NotPlain
                raw = call.raw_arguments
                calls.append(
                    f'{{"id":{_string(call.id)},"name":{_string(call.name)},'
                    f'"arguments":{"".join(_plain(arguments, 0))},'
                    f'"raw_arguments":{"null" if raw is None else _string(raw)}}}'
                )
            reasoning = message.reasoning
            role = message.role
            return (
                f'{{"ts":"{stamp}","kind":"message","message":'
                f'{{"content":{_string(message.content)},"tool_calls":[{",".join(calls)}],'
                f'"reasoning":{"null" if reasoning is None else _string(reasoning)},'
                f'"role":{_ASSISTANT if role == "assistant" else _string(role)}}}}}\n'
            )
        except Exception:
            pass
    return message_line(stamp, _generic(message))


def tool_json(message: ToolMessage) -> str:
    """``dumps(to_jsonable(message))`` of a tool message."""
    return tool_record("", message)[_AT_MESSAGE:-2]


def tool_record(stamp: str, message: ToolMessage) -> str:
    """The line of the ``message`` record of a tool message, with ``ts`` ``stamp``."""
    if _FAST and type(message) is ToolMessage:
        is_error = message.is_error
        role = message.role
        try:
            if is_error is True or is_error is False:
                return (
                    f'{{"ts":"{stamp}","kind":"message","message":'
                    f'{{"tool_call_id":{_string(message.tool_call_id)},'
                    f'"content":{_string(message.content)},'
                    f'"is_error":{"true" if is_error else "false"},'
                    f'"role":{_TOOL if role == "tool" else _string(role)}}}}}\n'
                )
        except Exception:
            pass
    return message_line(stamp, _generic(message))


def user_json(message: UserMessage) -> str:
    """``dumps(to_jsonable(message))`` of a user message."""
    if _FAST and type(message) is UserMessage:
        try:
            images = []
            for image in message.images:
                if type(image) is not ImagePart:
                    raise _NotPlain
                images.append(
                    f'{{"media_type":{_string(image.media_type)},"data":{_string(image.data)}}}'
                )
            return (
                f'{{"content":{_string(message.content)},"images":[{",".join(images)}],'
                f'"role":{_string(message.role)}}}'
            )
        except Exception:
            pass
    return _generic(message)


def system_json(message: SystemMessage) -> str:
    """``dumps(to_jsonable(message))`` of a system message."""
    if _FAST and type(message) is SystemMessage:
        try:
            return f'{{"content":{_string(message.content)},"role":{_string(message.role)}}}'
        except Exception:
            pass
    return _generic(message)


_BY_CLASS: dict[type, Callable[[Any], str]] = {
    AssistantMessage: assistant_json,
    ToolMessage: tool_json,
    UserMessage: user_json,
    SystemMessage: system_json,
}


def message_json(message: Message) -> str:
    """``dumps(to_jsonable(message))``: compact ASCII JSON, as every session record."""
    return _BY_CLASS.get(type(message), _generic)(message)


def usage_json(usage: Usage) -> str:
    """``dumps(to_jsonable(usage))``."""
    if _KNOWN and type(usage) is Usage:
        a, b, c, d, e = (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.reasoning_tokens,
        )
        ints = type(a) is int and type(b) is int and type(c) is int and type(d) is int
        if ints and type(e) is int:
            return (
                f'{{"input_tokens":{a},"output_tokens":{b},"cache_read_tokens":{c},'
                f'"cache_write_tokens":{d},"reasoning_tokens":{e}}}'
            )
    return dumps(to_jsonable(usage))
