"""Provider usage payloads into :class:`~agentfsm.engine._messages.Usage`.

One rule everywhere: ``input_tokens`` includes cache reads and writes, ``output_tokens``
includes reasoning. Providers that report the parts apart (Anthropic's ``input_tokens``
leaves out cache reads and writes) are summed; providers that report totals (every Chat
Completions server: ``prompt_tokens`` already holds ``cached_tokens`` and
``cache_write_tokens``) are taken as they are, the parts never added to them. Streams that
repeat cumulative usage are merged field by field (the last non-null value wins), never
summed.

A count is a JSON integer, a whole number written as a float (``12.0``) or as decimal digits
(``"12"``); absent or ``null`` is 0. Anything else in a count the adapter reads (a
fraction, a negative or non-finite number, other text, ``true``) is a usage report that
cannot be counted: the reply is a ``bad_response`` (:class:`BadShape`), never a count
made up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from agentfsm.engine import Usage

from ._limits import BadShape

__all__ = ["anthropic_usage", "merge_usage_fields", "openai_usage"]


def _int(value: Any, name: str = "") -> int:
    """A token count (see the module's rules)."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    where = f"usage.{name}" if name else "a usage count"
    raise BadShape(f"`{where}` is not a token count (a {type(value).__name__})")


def merge_usage_fields(into: dict[str, Any], update: Mapping[str, Any] | None) -> None:
    """Fold a (possibly partial, possibly cumulative) usage record into ``into``: a later
    non-null value replaces an earlier one; nested detail objects merge the same way."""
    if not isinstance(update, Mapping):
        return
    for key, value in update.items():
        if value is None:
            continue
        if isinstance(value, Mapping):
            nested = into.get(key)
            if not isinstance(nested, dict):
                nested = into[key] = {}
            merge_usage_fields(nested, value)
        else:
            into[key] = value


def openai_usage(data: Mapping[str, Any] | None) -> Usage | None:
    """Chat Completions usage (OpenAI and compatible servers, DeepSeek's cache fields too)."""
    if not isinstance(data, Mapping) or not data:
        return None
    prompt_key = "prompt_tokens" if "prompt_tokens" in data else "input_tokens"
    completion_key = "completion_tokens" if "completion_tokens" in data else "output_tokens"
    prompt = _int(data.get(prompt_key), prompt_key)
    completion = _int(data.get(completion_key), completion_key)
    prompt_details = data.get("prompt_tokens_details") or data.get("input_tokens_details") or {}
    completion_details = (
        data.get("completion_tokens_details") or data.get("output_tokens_details") or {}
    )
    if not isinstance(prompt_details, Mapping):
        prompt_details = {}
    if not isinstance(completion_details, Mapping):
        completion_details = {}
    cache_read = _int(prompt_details.get("cached_tokens"), "cached_tokens")
    cache_write = _int(prompt_details.get("cache_write_tokens"), "cache_write_tokens")
    if "prompt_cache_hit_tokens" in data:  # DeepSeek: prompt = hit + miss
        cache_read = _int(data.get("prompt_cache_hit_tokens"), "prompt_cache_hit_tokens")
        missed = _int(data.get("prompt_cache_miss_tokens"), "prompt_cache_miss_tokens")
        prompt = max(prompt, cache_read + missed)
    reasoning = _int(completion_details.get("reasoning_tokens"), "reasoning_tokens")
    output = max(completion, reasoning)
    total = data.get("total_tokens")
    if reasoning and isinstance(total, int) and total >= prompt + completion + reasoning:
        output = completion + reasoning  # xAI: completion_tokens excludes reasoning
    # The prompt total already holds the cached and cache-write parts (OpenAI, OpenRouter,
    # Gemini, Mistral, xAI, DeepSeek): they are never added to it. Only a total smaller than
    # one of its parts (a broken report) is raised to that part.
    return Usage(
        input_tokens=max(prompt, cache_read, cache_write),
        output_tokens=output,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        reasoning_tokens=reasoning,
    )


def anthropic_usage(data: Mapping[str, Any] | None) -> Usage | None:
    """Messages API usage: ``input_tokens`` there excludes the cache, so the parts are summed."""
    if not isinstance(data, Mapping) or not data:
        return None
    read = _int(data.get("cache_read_input_tokens"), "cache_read_input_tokens")
    write = _int(data.get("cache_creation_input_tokens"), "cache_creation_input_tokens")
    return Usage(
        input_tokens=_int(data.get("input_tokens"), "input_tokens") + read + write,
        output_tokens=_int(data.get("output_tokens"), "output_tokens"),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )
