"""A small OTLP/HTTP receiver on 127.0.0.1: decodes each protobuf payload it is sent."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in value.array_value.values]
    if kind is None:
        return None
    return getattr(value, kind)


def attributes_of(span: Span | Any) -> dict[str, Any]:
    return {a.key: value_of(a.value) for a in span.attributes}


class OtlpReceiver:
    """Collects ``ExportTraceServiceRequest`` and ``ExportMetricsServiceRequest`` payloads
    (and their raw bytes) posted to ``/v1/traces`` and ``/v1/metrics``."""

    def __init__(self) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.raw: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                with receiver._lock:
                    receiver.raw.append(body)
                    receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                    if self.path == "/v1/traces":
                        receiver.traces.append(ExportTraceServiceRequest.FromString(body))
                        answer = ExportTraceServiceResponse().SerializeToString()
                    elif self.path == "/v1/metrics":
                        receiver.metrics.append(ExportMetricsServiceRequest.FromString(body))
                        answer = ExportMetricsServiceResponse().SerializeToString()
                    else:
                        self.send_error(404)
                        return
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def spans(self) -> list[Span]:
        with self._lock:
            return [
                span
                for request in self.traces
                for resource in request.resource_spans
                for scope in resource.scope_spans
                for span in scope.spans
            ]

    def resource_attributes(self) -> list[dict[str, Any]]:
        with self._lock:
            return [
                attributes_of(resource.resource)
                for request in self.traces
                for resource in request.resource_spans
            ]

    def metric_names(self) -> set[str]:
        with self._lock:
            return {
                metric.name
                for request in self.metrics
                for resource in request.resource_metrics
                for scope in resource.scope_metrics
                for metric in scope.metrics
            }
