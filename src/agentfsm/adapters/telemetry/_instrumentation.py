"""``Instrumentation``: where an instrumented agent's spans and metrics go, and what they hold.

It needs the ``otel`` extra (``opentelemetry-api`` and ``opentelemetry-semantic-conventions``);
the SDK is the application's business (``agentfsm run --otel`` sets one up).
"""

from __future__ import annotations

import functools
from importlib import metadata
from typing import TYPE_CHECKING

from opentelemetry import metrics, trace
from opentelemetry.metrics import Histogram, Meter, MeterProvider, NoOpMeterProvider
from opentelemetry.semconv._incubating.metrics.gen_ai_metrics import (
    GEN_AI_CLIENT_OPERATION_DURATION,
    GEN_AI_CLIENT_TOKEN_USAGE,
)
from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, Tracer, TracerProvider

from agentfsm.engine import AgentEmitter, ChatFn

from ._content import capture_from_env

if TYPE_CHECKING:
    from ._run import RunTelemetry

__all__ = [
    "DURATION_BUCKETS",
    "RUN_TOOL_CALLS",
    "RUN_TURNS",
    "SCOPE",
    "TOKEN_BUCKETS",
    "Instrumentation",
]

SCOPE = "agentfsm"
"""The instrumentation scope of every span and metric."""
RUN_TURNS = "agentfsm.agent.turns"
"""Histogram: LLM calls per run."""
RUN_TOOL_CALLS = "agentfsm.agent.tool_calls"
"""Histogram: tool calls per run."""
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
"""The conventions' advised bucket boundaries of ``gen_ai.client.token.usage``."""
DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
"""The conventions' advised bucket boundaries of ``gen_ai.client.operation.duration``."""


@functools.cache
def _version() -> str:
    try:
        return metadata.version("agentfsm")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "0"


def _tracing(provider: TracerProvider | None) -> bool:
    given = provider if provider is not None else trace.get_tracer_provider()
    return not isinstance(given, (ProxyTracerProvider, NoOpTracerProvider))


def _metering(provider: MeterProvider | None) -> bool:
    given = provider if provider is not None else metrics.get_meter_provider()
    # The global provider stays a private proxy class until the application sets one.
    return not isinstance(given, NoOpMeterProvider) and not type(given).__name__.startswith(
        "_Proxy"
    )


class Instrumentation:
    """Traces and metrics of an agent's runs, following the OpenTelemetry GenAI conventions.

    Pass it as ``Agent(instrument=...)``; ``instrument=True`` is ``Instrumentation()``.

    Args:
        tracer_provider: Where spans go (default: the global tracer provider).
        meter_provider: Where metrics go (default: the global meter provider).
        capture_content: Record prompts, replies, tool arguments and results. ``None``
            (the default) reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
            (``true``: on); off unless asked. API keys are never recorded in any mode.
        agent_name: ``gen_ai.agent.name`` of the runs.

    With neither provider configured (the API's no-op defaults), a run records nothing and
    costs a check per run.
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool | None = None,
        agent_name: str = "agentfsm",
    ) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.capture_content = capture_from_env() if capture_content is None else capture_content
        """Whether message content is recorded."""
        self.agent_name = agent_name
        self.tracer: Tracer
        self.meter: Meter
        self.token_usage: Histogram
        self.duration: Histogram
        self.turns: Histogram
        self.tool_calls: Histogram
        self._made = False

    def _make(self) -> None:
        """The tracer, the meter and its instruments, made on the first recorded run."""
        version = _version()
        self.tracer = trace.get_tracer(SCOPE, version, self.tracer_provider)
        self.meter = metrics.get_meter(SCOPE, version, self.meter_provider)
        self.token_usage = self.meter.create_histogram(
            GEN_AI_CLIENT_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.duration = self.meter.create_histogram(
            GEN_AI_CLIENT_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.turns = self.meter.create_histogram(
            RUN_TURNS, unit="{turn}", description="LLM calls per agent run."
        )
        self.tool_calls = self.meter.create_histogram(
            RUN_TOOL_CALLS, unit="{call}", description="Tool calls per agent run."
        )
        self._made = True

    def __repr__(self) -> str:
        return f"Instrumentation(agent_name={self.agent_name!r})"

    def start_run(
        self, chat: ChatFn, emitter: AgentEmitter, *, conversation_id: str | None = None
    ) -> RunTelemetry | None:
        """The telemetry of one run that ``emitter`` reports; ``None`` when neither a tracer
        nor a meter provider is configured (nothing to record)."""
        tracing = _tracing(self.tracer_provider)
        metering = _metering(self.meter_provider)
        if not (tracing or metering):
            return None
        if not self._made:
            self._make()
        from ._run import RunTelemetry

        return RunTelemetry(self, chat, emitter, conversation_id=conversation_id, tracing=tracing)
