"""Provider usage payloads into :class:`~agentfsm.engine._messages.Usage`.

One rule everywhere: ``input_tokens`` includes cache reads and writes, ``output_tokens``
includes reasoning. Providers that report the parts apart (Anthropic's ``input_tokens``
leaves out cache reads and writes) are summed; providers that report totals (every Chat
Completions server: ``prompt_tokens`` already holds ``cached_tokens`` and
``cache_write_tokens``) are taken as they are, the parts never added to them. Streams that
repeat cumulative usage are merged field by field (the last non-null value wins), never
summed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentfsm.engine import Usage

__all__ = ["anthropic_usage", "merge_usage_fields", "openai_usage"]


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


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
    prompt = _int(data.get("prompt_tokens", data.get("input_tokens")))
    completion = _int(data.get("completion_tokens", data.get("output_tokens")))
    prompt_details = data.get("prompt_tokens_details") or data.get("input_tokens_details") or {}
    completion_details = (
        data.get("completion_tokens_details") or data.get("output_tokens_details") or {}
    )
    cache_read = (
        _int(prompt_details.get("cached_tokens")) if isinstance(prompt_details, Mapping) else 0
    )
    cache_write = (
        _int(prompt_details.get("cache_write_tokens")) if isinstance(prompt_details, Mapping) else 0
    )
    if "prompt_cache_hit_tokens" in data:  # DeepSeek: prompt = hit + miss
        cache_read = _int(data.get("prompt_cache_hit_tokens"))
        prompt = max(prompt, cache_read + _int(data.get("prompt_cache_miss_tokens")))
    reasoning = (
        _int(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, Mapping)
        else 0
    )
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
    read = _int(data.get("cache_read_input_tokens"))
    write = _int(data.get("cache_creation_input_tokens"))
    return Usage(
        input_tokens=_int(data.get("input_tokens")) + read + write,
        output_tokens=_int(data.get("output_tokens")),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )
