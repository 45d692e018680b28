"""Retry and failover events on the current span, through the OpenTelemetry API when it is
installed, and nothing when it is not.

Without the ``otel`` extra, or with no tracer provider configured, :func:`span_event` costs
one check.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType

__all__ = ["ERROR_TYPE", "FAILOVER_EVENT", "RETRY_EVENT", "span_event"]

ERROR_TYPE = "error.type"
"""The stable conventions' ``error.type`` (``opentelemetry.semconv.attributes.error_attributes``),
spelled out so that the providers need no OpenTelemetry package."""
RETRY_EVENT = "agentfsm.retry"
"""Span event of a retried provider call: the failed attempt, its error kind, the delay."""
FAILOVER_EVENT = "agentfsm.failover"
"""Span event of a router moving on to its next provider after one failed."""

_trace: ModuleType | None
try:
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - the otel extra is not installed
    _trace = None


def span_event(name: str, attributes: Mapping[str, str | int | float]) -> None:
    """Add event ``name`` to the current span, if a recording one is current."""
    if _trace is None:
        return
    span = _trace.get_current_span()
    if span.is_recording():
        span.add_event(name, dict(attributes))
