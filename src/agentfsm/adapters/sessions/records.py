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
from collections.abc import Callable
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
from agentfsm.engine.serialization import to_jsonable

__all__ = ["dumps", "json_string", "message_json", "usage_json"]

json_string: Callable[[str], str] = json.encoder.encode_basestring_ascii
"""A string's JSON literal, ASCII (the encoder's own function: the same escapes); raises
``TypeError`` for anything but a string."""
_string = json_string

_slow_dumps = json.JSONEncoder(separators=(",", ":")).encode


class _NotPlain(Exception):
    """A value the JSON encoder does not take as is: the generic path decides."""


def _not_plain(value: object) -> Any:
    raise _NotPlain


def _c_encoder(default: Callable[[object], Any]) -> Callable[[object], str] | None:
    """A reusable C encoder with the settings of ``_slow_dumps`` and no circular-reference
    bookkeeping (it keeps no state between calls; a cycle ends in ``RecursionError``), or
    ``None`` when this Python has none."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    try:
        encoder = make(None, default, _string, None, ":", ",", False, False, True)

        def encode(obj: object) -> str:
            return "".join(encoder(obj, 0))

        if encode({"a": [1, 2.5, None, True, "\udcff\u2028"]}) != _slow_dumps(
            {"a": [1, 2.5, None, True, "\udcff\u2028"]}
        ):
            return None
    except Exception:  # another signature: use the generic encoder
        return None
    return encode


_fast_dumps = _c_encoder(json.JSONEncoder().default)
_plain_dumps = _c_encoder(_not_plain)


def dumps(obj: object) -> str:
    """``json.dumps(obj, separators=(",", ":"))``: compact ASCII JSON; raises what it raises."""
    if _fast_dumps is not None:
        try:
            return _fast_dumps(obj)
        except Exception:  # the generic encoder raises its own error (a cycle: ValueError)
            pass
    return _slow_dumps(obj)


def _plain(obj: object) -> str:
    """JSON of ``obj`` when it holds only what the encoder takes as is (dicts, lists,
    tuples, strings, numbers, booleans, ``None``: what ``to_jsonable`` passes through);
    raises otherwise."""
    if _plain_dumps is None:
        raise _NotPlain
    return _plain_dumps(obj)


def _null_or_string(value: str | None) -> str:
    return "null" if value is None else _string(value)


def _boolean(value: bool) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    raise _NotPlain


def _tool_call(call: ToolCall) -> str:
    if type(call) is not ToolCall or type(call.arguments) is not dict:
        raise _NotPlain
    return (
        f'{{"id":{_string(call.id)},"name":{_string(call.name)},'
        f'"arguments":{_plain(call.arguments)},'
        f'"raw_arguments":{_null_or_string(call.raw_arguments)}}}'
    )


def _image(image: ImagePart) -> str:
    if type(image) is not ImagePart:
        raise _NotPlain
    return f'{{"media_type":{_string(image.media_type)},"data":{_string(image.data)}}}'


def _assistant(message: AssistantMessage) -> str:
    calls = ",".join([_tool_call(call) for call in message.tool_calls])
    return (
        f'{{"content":{_string(message.content)},"tool_calls":[{calls}],'
        f'"reasoning":{_null_or_string(message.reasoning)},"role":{_string(message.role)}}}'
    )


def _tool(message: ToolMessage) -> str:
    return (
        f'{{"tool_call_id":{_string(message.tool_call_id)},'
        f'"content":{_string(message.content)},"is_error":{_boolean(message.is_error)},'
        f'"role":{_string(message.role)}}}'
    )


def _user(message: UserMessage) -> str:
    images = ",".join([_image(image) for image in message.images])
    return (
        f'{{"content":{_string(message.content)},"images":[{images}],'
        f'"role":{_string(message.role)}}}'
    )


def _system(message: SystemMessage) -> str:
    return f'{{"content":{_string(message.content)},"role":{_string(message.role)}}}'


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

_FORMATTERS: dict[type, Callable[[Any], str]] = (
    {AssistantMessage: _assistant, ToolMessage: _tool, UserMessage: _user, SystemMessage: _system}
    if _KNOWN and _plain_dumps is not None
    else {}
)


def message_json(message: Message) -> str:
    """``dumps(to_jsonable(message))``."""
    formatter = _FORMATTERS.get(type(message))
    if formatter is not None:
        try:
            return formatter(message)
        except Exception:  # not the usual shape: the generic path gives the same text
            pass
    return dumps(to_jsonable(message))


def usage_json(usage: Usage) -> str:
    """``dumps(to_jsonable(usage))``."""
    if _KNOWN and type(usage) is Usage:
        values = (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.reasoning_tokens,
        )
        if all(type(value) is int for value in values):
            return (
                '{{"input_tokens":{},"output_tokens":{},"cache_read_tokens":{},'
                '"cache_write_tokens":{},"reasoning_tokens":{}}}'.format(*values)
            )
    return dumps(to_jsonable(usage))
