"""``agentfsm run --otel``: an OpenTelemetry SDK with OTLP/HTTP exporters for the run.

The exporters read the standard variables (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``…_HEADERS``, ``…_TIMEOUT`` …), the resource reads
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (service name ``agentfsm`` unless set),
and content capture follows ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``. Spans and
metrics are flushed when the command ends. Needs the ``cli-otel`` extra.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentfsm.adapters.telemetry import Instrumentation

__all__ = ["otel_instrumentation", "run_with_otel"]


@contextmanager
def otel_instrumentation() -> Iterator[Instrumentation]:
    """An :class:`Instrumentation` exporting by OTLP/HTTP; flushed and shut down on exit.
    Raises ``ImportError`` without the ``cli-otel`` extra."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from agentfsm.adapters.telemetry._instrumentation import Instrumentation

    named = "OTEL_SERVICE_NAME" in os.environ or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    resource = Resource.create({} if named else {"service.name": "agentfsm"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    meter_provider = MeterProvider(
        resource=resource, metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())]
    )
    try:
        yield Instrumentation(tracer_provider=tracer_provider, meter_provider=meter_provider)
    finally:
        tracer_provider.shutdown()  # exports what is left
        meter_provider.shutdown()


def run_with_otel(args: argparse.Namespace, run: Callable[[argparse.Namespace], int]) -> int:
    """``run(args)`` with ``args.instrument`` set to an exporting :class:`Instrumentation`."""
    try:
        setup = otel_instrumentation()
        instrumentation = setup.__enter__()
    except ImportError:
        print("agentfsm run: --otel needs pip install 'agentfsm[cli-otel]'", file=sys.stderr)
        return 2
    try:
        args.instrument = instrumentation
        args.otel = False
        return run(args)
    finally:
        setup.__exit__(None, None, None)
