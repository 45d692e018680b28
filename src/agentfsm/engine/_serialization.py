"""One cattrs converter for every JSON boundary: messages, events, results, usage."""

from __future__ import annotations

import json
from typing import Any, TypeVar, get_args

from cattrs.gen import make_dict_unstructure_fn, override
from cattrs.preconf.json import make_converter

from ._errors import RecordedError, error_name
from ._events import AgentEvent
from ._messages import AssistantMessage, ChatResult, Message
from ._text import escape_surrogates

__all__ = [
    "converter",
    "nests_deeper_than",
    "dumps",
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


def nests_deeper_than(value: Any, limit: int) -> bool:
    """Whether parsed JSON ``value`` nests arrays/objects deeper than ``limit``.

    Iterative, so it costs one step per container and never recurses.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


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
