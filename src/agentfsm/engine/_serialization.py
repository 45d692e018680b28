"""One cattrs converter for every JSON boundary: messages, events, results, usage."""

from __future__ import annotations

import array
import itertools
import json
import re
from typing import Any, TypeVar, get_args

from cattrs.gen import make_dict_unstructure_fn, override
from cattrs.preconf.json import make_converter

from ._errors import RecordedError, error_name
from ._events import AgentEvent
from ._messages import AssistantMessage, ChatResult, Message
from ._text import escape_surrogates

__all__ = [
    "converter",
    "dumps",
    "json_shape",
    "loads",
    "structure_event",
    "structure_message",
    "to_jsonable",
]

T = TypeVar("T")

converter = make_converter()
"""The project's converter; ``converter.unstructure(x)`` gives JSON-ready data."""


def _discriminated(union: Any, key: str) -> dict[str, type]:
    table: dict[str, type] = {}
    for cls in get_args(union):
        tag = next(a.default for a in cls.__attrs_attrs__ if a.name == key)
        table[tag] = cls
    return table


_MESSAGES = _discriminated(Message, "role")
_EVENTS = _discriminated(AgentEvent, "type")


def _structure_tagged(table: dict[str, type], key: str, what: str) -> Any:
    def structure(data: Any, _: Any) -> Any:
        if not isinstance(data, dict):
            raise TypeError(f"a {what} must be a JSON object, got {type(data).__name__}")
        tag = data.get(key)
        cls = table.get(tag) if isinstance(tag, str) else None
        if cls is None:
            raise ValueError(f"unknown {what} {key} {tag!r}; expected one of {sorted(table)}")
        return converter.structure(data, cls)

    return structure


converter.register_structure_hook(Message, _structure_tagged(_MESSAGES, "role", "message"))
# An assistant message without reasoning items is written as before they existed.
converter.register_unstructure_hook(
    AssistantMessage,
    make_dict_unstructure_fn(
        AssistantMessage, converter, reasoning_items=override(omit_if_default=True)
    ),
)
converter.register_structure_hook(AgentEvent, _structure_tagged(_EVENTS, "type", "event"))
# ``finish_reason_raw`` is written only when set, so results without it serialize as before.
converter.register_unstructure_hook(
    ChatResult,
    make_dict_unstructure_fn(
        ChatResult, converter, finish_reason_raw=override(omit_if_default=True)
    ),
)
converter.register_unstructure_hook(
    BaseException, lambda e: {"name": error_name(e), "message": str(e)}
)


def _structure_error(data: Any, _: Any) -> BaseException:
    if not isinstance(data, dict):
        raise TypeError("an error must be a JSON object with name and message")
    return RecordedError(str(data.get("name", "Error")), str(data.get("message", "")))


converter.register_structure_hook(BaseException, _structure_error)


def to_jsonable(obj: Any) -> Any:
    """Unstructure a message, event or result into plain JSON-ready data."""
    return converter.unstructure(obj)


_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
"""A JSON string (escapes included): what :func:`json_shape` leaves out."""
_NOT_BRACKETS = bytes(code for code in range(256) if code not in b"[]{}")
_SIGNS = bytes.maketrans(b"[]{}", b"\x01\xff\x01\xff")
"""An opening bracket as +1, a closing one as -1 (signed bytes)."""


def json_shape(text: str | bytes) -> tuple[int, int]:
    """``(depth, containers)`` of JSON text: how deep its arrays and objects nest, and how
    many there are.

    Read from the brackets outside strings, at C speed and in linear time, before any
    parsing (a parser's recursion never decides, and a hostile line costs a fraction of
    ``json.loads``). For text that is not JSON, the figures are those of its brackets.
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    brackets = _STRINGS.sub(b"", data).translate(None, _NOT_BRACKETS)
    containers = brackets.count(b"[") + brackets.count(b"{")
    if containers <= 1:
        return containers, containers
    depth = max(itertools.accumulate(array.array("b", brackets.translate(_SIGNS))))
    return depth, containers


def dumps(obj: Any) -> str:
    """Serialize a message, event or result to a compact JSON string.

    Non-ASCII text is kept as is, except lone surrogates, which are written as ``\\uXXXX``
    escapes: the string always has a UTF-8 form and :func:`loads` gives the same text back.
    One exception: a high surrogate directly followed by a low one (two halves side by side,
    which only ``surrogatepass`` decoding makes) reads back as the one character they encode;
    JSON cannot keep them apart.
    """
    text = json.dumps(converter.unstructure(obj), ensure_ascii=False, separators=(",", ":"))
    return escape_surrogates(text)


def loads(text: str | bytes, cls: Any) -> Any:
    """Parse JSON text into ``cls`` (a class, or the ``Message`` / ``AgentEvent`` unions)."""
    return converter.structure(json.loads(text), cls)


def structure_message(data: Any) -> Message:
    """Build a message from unstructured data (dispatching on ``role``)."""
    message: Message = converter.structure(data, Message)  # type: ignore[arg-type]
    return message


def structure_event(data: Any) -> AgentEvent:
    """Build an event from unstructured data (dispatching on ``type``)."""
    event: AgentEvent = converter.structure(data, AgentEvent)  # type: ignore[arg-type]
    return event
