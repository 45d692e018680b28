"""Finish reasons: every provider's word for why an answer ended, in one small vocabulary."""

from __future__ import annotations

__all__ = ["FINISH_REASONS", "normalize_finish"]

FINISH_REASONS: frozenset[str] = frozenset(
    {"stop", "length", "tool_calls", "content_filter", "other"}
)
"""What :attr:`~agentfsm.ChatResult.finish_reason` holds after an adapter: ``stop`` (the
answer is complete), ``length`` (cut by ``max_tokens`` or the context window),
``tool_calls`` (the answer calls tools; so whenever it holds calls, unless it was cut),
``content_filter`` (a safety filter or a refusal ended it) and ``other`` (a reason outside
these; the provider's own string is then in ``finish_reason_raw``). ``None`` when the
provider gave no reason. A cut (``length``, ``content_filter``) is never hidden by the calls
an answer holds: a call cut by ``max_tokens`` may have lost the end of its arguments."""

_KNOWN: dict[str, str] = {
    **dict.fromkeys(
        ("stop", "end_turn", "stop_sequence", "eos", "eos_token", "end", "complete"), "stop"
    ),
    **dict.fromkeys(
        (
            "length",
            "max_tokens",
            "max_output_tokens",
            "max_completion_tokens",
            "model_length",
            "model_context_window_exceeded",
        ),
        "length",
    ),
    **dict.fromkeys(("tool_calls", "tool_call", "function_call", "tool_use"), "tool_calls"),
    **dict.fromkeys(
        (
            "content_filter",
            "refusal",
            "safety",
            "recitation",
            "prohibited_content",
            "blocklist",
            "spii",
            "image_safety",
        ),
        "content_filter",
    ),
}
"""Reasons providers send (compared in lower case: Gemini's are upper case)."""

_CUTS = ("length", "content_filter")
"""Reasons that say the answer was cut: kept even when it holds calls."""


def normalize_finish(raw: str | None, has_tool_calls: bool) -> tuple[str | None, str | None]:
    """(normalized, raw) for a provider's finish reason.

    The normalized reason is one of :data:`FINISH_REASONS`: ``tool_calls`` when the answer
    holds calls, whatever the provider said, except a cut (``length`` or
    ``content_filter``), which stays what it is. The raw string is kept, as the second
    value, only when it is not a reason listed here: an unknown reason (``other``) or an
    empty one (``""``, read as ``stop``). No reason at all is ``(None, None)``, or
    ``("tool_calls", None)`` for an answer with calls.
    """
    if raw is None:
        return ("tool_calls" if has_tool_calls else None), None
    known = _KNOWN.get(raw.strip().lower())
    kept = None if known is not None else raw
    if has_tool_calls and known not in _CUTS:
        return "tool_calls", kept
    if known is not None:
        return known, None
    return ("stop" if not raw.strip() else "other"), kept
