"""Quirk profiles by name: ``explicit_tool_choice=true`` from a command line or a settings
file into an :class:`OpenAIQuirks`, :class:`AnthropicQuirks` or :class:`ResponsesQuirks`,
and back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import attrs

from ._anthropic_wire import AnthropicQuirks
from ._endpoints import WireName
from ._openai_wire import OpenAIQuirks
from ._responses_wire import ResponsesQuirks

__all__ = [
    "QUIRK_CLASSES",
    "QuirkProfile",
    "QuirkValue",
    "all_quirk_names",
    "changed_quirks",
    "parse_quirk",
    "quirk_names",
    "quirk_profile",
]

QuirkProfile: TypeAlias = OpenAIQuirks | AnthropicQuirks | ResponsesQuirks
QuirkValue: TypeAlias = bool | int | str | None

QUIRK_CLASSES: dict[
    WireName, type[OpenAIQuirks] | type[AnthropicQuirks] | type[ResponsesQuirks]
] = {
    "openai-chat": OpenAIQuirks,
    "anthropic": AnthropicQuirks,
    "openai-responses": ResponsesQuirks,
}
"""The quirk class of each wire."""

_CHOICES = {"max_tokens_field": ("max_tokens", "max_completion_tokens")}
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def quirk_names(wire: WireName) -> tuple[str, ...]:
    """The quirk names of ``wire``, in the order its class declares them."""
    return tuple(f.name for f in attrs.fields(QUIRK_CLASSES[wire]))


def all_quirk_names() -> tuple[str, ...]:
    """Every quirk name of any wire, sorted."""
    return tuple(sorted({name for wire in QUIRK_CLASSES for name in quirk_names(wire)}))


def _kind(wire: WireName, name: str) -> str:
    field = attrs.fields_dict(QUIRK_CLASSES[wire])[name]
    return str(field.type)


def _typed(wire: WireName, name: str, value: QuirkValue) -> QuirkValue:
    """``value`` checked against the field's type; ``ValueError`` naming what it takes."""
    kind = _kind(wire, name)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
            return value.lower() in _TRUE
        raise ValueError(f"quirk {name} takes true or false, got {value!r}")
    if "int" in kind:
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if "None" in kind:
                return None
        elif isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        elif isinstance(value, str) and value.isdigit() and int(value) > 0:
            return int(value)
        none = " or none" if "None" in kind else ""
        raise ValueError(f"quirk {name} takes a positive integer{none}, got {value!r}")
    if not isinstance(value, str):
        raise ValueError(f"quirk {name} takes a name, got {value!r}")
    choices = _CHOICES.get(name)
    if choices is not None and value not in choices:
        raise ValueError(f"quirk {name} takes {' or '.join(choices)}, got {value!r}")
    return value


def quirk_profile(
    wire: WireName, values: Mapping[str, QuirkValue], base: QuirkProfile | None = None
) -> QuirkProfile:
    """``base`` (the wire's defaults when ``None``) with ``values`` set.

    Values are typed (from JSON) or text (``"true"``, ``"64"``, ``"none"``).

    Raises:
        ValueError: a name that is not a quirk of ``wire`` (the message lists the valid
            names) or a value its field does not take.
    """
    cls = QUIRK_CLASSES[wire]
    names = quirk_names(wire)
    changes: dict[str, Any] = {}
    for name, value in values.items():
        if name not in names:
            raise ValueError(
                f"{name!r} is not a quirk of the {wire} wire (valid: {', '.join(names)})"
            )
        changes[name] = _typed(wire, name, value)
    start = base if base is not None else cls()
    if not isinstance(start, cls):
        raise TypeError(f"a {wire} profile must start from {cls.__name__}")
    return attrs.evolve(start, **changes)


def parse_quirk(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` as a pair (``-`` in the name read as ``_``); ``ValueError`` when the
    ``=`` or the name is missing."""
    name, sep, value = text.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or not name:
        raise ValueError(f"a quirk is NAME=VALUE, got {text[:100]!r}")
    return name, value.strip()


def changed_quirks(profile: QuirkProfile) -> dict[str, QuirkValue]:
    """The fields of ``profile`` that differ from its class's defaults."""
    defaults = type(profile)()
    out: dict[str, QuirkValue] = {}
    for field in attrs.fields(type(profile)):
        value = getattr(profile, field.name)
        if value != getattr(defaults, field.name):
            out[field.name] = value
    return out
