"""The OpenTelemetry SDK with in-memory exporters, and span trees for snapshots."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentfsm.adapters.telemetry import Instrumentation


class Otel:
    """A tracer provider and a meter provider whose output stays in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def instrumentation(self, **options: Any) -> Instrumentation:
        options.setdefault("capture_content", False)
        return Instrumentation(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )

    def spans(self) -> tuple[ReadableSpan, ...]:
        return tuple(self.exporter.get_finished_spans())

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """Each metric's data points: ``(attributes, point)``."""
        found: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        data = self.reader.get_metrics_data()
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        found.setdefault(metric.name, []).append(
                            (dict(point.attributes or {}), point)
                        )
        return found

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


@pytest.fixture
def otel() -> Iterator[Otel]:
    running = Otel()
    yield running
    running.shutdown()


VOLATILE = {"gen_ai.conversation.id": "<session id>"}


def _attributes(attributes: Any) -> dict[str, Any]:
    return {
        key: VOLATILE.get(key, list(value) if isinstance(value, tuple) else value)
        for key, value in sorted(dict(attributes or {}).items())
    }


def span_tree(spans: Sequence[ReadableSpan]) -> list[dict[str, Any]]:
    """The spans as nested dicts (children in start order), for snapshots."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent, []).append(span)

    def node(span: ReadableSpan) -> dict[str, Any]:
        assert span.context is not None
        below = sorted(
            children.get(span.context.span_id, []),
            key=lambda s: (s.start_time, str(s.attributes.get("gen_ai.tool.call.id", ""))),  # type: ignore[union-attr]
        )
        return {
            "name": span.name,
            "kind": span.kind.name,
            "status": span.status.status_code.name,
            "attributes": _attributes(span.attributes),
            "events": [
                {"name": event.name, "attributes": _attributes(event.attributes)}
                for event in span.events
            ],
            "children": [node(child) for child in below],
        }

    return [node(root) for root in children.get(None, [])]
