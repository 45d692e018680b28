"""The run's events that become span events of its ``invoke_agent`` span: compression,
and every policy decision (stop, warn, note, remind, retry, redirect) with the policy's name.

Loop-health verdicts are ``policy_warn`` events: their ``code`` says which pattern
(``oscillation_detected`` …). Reminder and retry texts are content: recorded only when
content capture is on.
"""

from __future__ import annotations

from agentfsm.engine import AgentEvent

from ._attributes import POLICY_NAME, POLICY_REASON, TURN, TURNS, AttributeValue

__all__ = [
    "BUDGET_EXHAUSTED",
    "COMPRESS_END",
    "COMPRESS_START",
    "POLICY_NOTE",
    "POLICY_REDIRECT",
    "POLICY_REDIRECT_SKIPPED",
    "POLICY_REMIND",
    "POLICY_RETRY",
    "POLICY_STOP",
    "POLICY_WARN",
    "span_event_for",
]

COMPRESS_START = "agentfsm.compression.start"
COMPRESS_END = "agentfsm.compression.end"
POLICY_STOP = "agentfsm.policy.stop"
POLICY_WARN = "agentfsm.policy.warn"
POLICY_NOTE = "agentfsm.policy.note"
POLICY_REMIND = "agentfsm.policy.remind"
POLICY_RETRY = "agentfsm.policy.retry"
POLICY_REDIRECT = "agentfsm.policy.redirect"
POLICY_REDIRECT_SKIPPED = "agentfsm.policy.redirect_skipped"
BUDGET_EXHAUSTED = "agentfsm.budget_exhausted"

Found = tuple[str, dict[str, AttributeValue]]


def span_event_for(event: AgentEvent, capture: bool) -> Found | None:
    """The span event recording ``event``, or ``None`` for events that are not one."""
    found: Found | None = None
    match event.type:
        case "compress_start":
            found = (
                COMPRESS_START,
                {"agentfsm.compression.estimated_tokens": event.estimated_tokens},
            )
        case "compress_end":
            found = (COMPRESS_END, {"agentfsm.compression.summary_chars": event.summary_chars})
        case "policy_stop":
            found = (
                POLICY_STOP,
                {TURN: event.turn, POLICY_NAME: event.policy, POLICY_REASON: event.reason},
            )
        case "policy_warn" | "policy_note":
            attributes: dict[str, AttributeValue] = {
                TURN: event.turn,
                POLICY_NAME: event.policy,
                POLICY_REASON: event.reason,
            }
            if event.code is not None:
                attributes["agentfsm.policy.code"] = event.code
            found = (POLICY_WARN if event.type == "policy_warn" else POLICY_NOTE, attributes)
        case "reminder":
            attributes = {TURN: event.turn, POLICY_NAME: event.policy}
            if capture:
                attributes["agentfsm.policy.text"] = event.text
            found = (POLICY_REMIND, attributes)
        case "gate":
            attributes = {TURN: event.turn, POLICY_NAME: event.policy}
            if capture:
                attributes["agentfsm.policy.text"] = event.reminder
            found = (POLICY_RETRY, attributes)
        case "redirect":
            found = (
                POLICY_REDIRECT,
                {
                    TURN: event.turn,
                    POLICY_REASON: event.reason,
                    "agentfsm.redirect.directions": event.directions,
                    "agentfsm.redirect.directions_chars": event.directions_chars,
                    "agentfsm.redirect.latency_ms": event.latency_ms,
                },
            )
        case "redirect_skipped":
            found = (
                POLICY_REDIRECT_SKIPPED,
                {
                    TURN: event.turn,
                    POLICY_REASON: event.reason,
                    "agentfsm.redirect.trigger": event.trigger,
                },
            )
        case "budget_exhausted":
            found = (BUDGET_EXHAUSTED, {TURNS: event.turns_used})
    return found
