"""``agentfsm run --otel``: an OpenTelemetry SDK with OTLP/HTTP exporters for the run.

The exporters read the standard variables (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``…_HEADERS``, ``…_TIMEOUT`` …), the resource reads
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (service name ``agentfsm`` unless set),
and content capture follows ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``. Spans and
metrics are flushed when the command ends (within about two seconds; a collector that
cannot be reached is one warning line). Needs the ``cli-otel`` extra.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentfsm.adapters.telemetry import Instrumentation

__all__ = ["SHUTDOWN_SECONDS", "otel_instrumentation", "run_with_otel"]

SHUTDOWN_SECONDS = 2.0
"""How long the command waits for the last export when it ends (and each export's timeout
unless ``OTEL_EXPORTER_OTLP_TIMEOUT`` says otherwise)."""
_TIMEOUT_ENVS = (
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
)


class _Exports:
    """Counts the exports that failed, per endpoint, to report them in one line at the end."""

    def __init__(self) -> None:
        self.failed: dict[str, int] = {}

    def watch(self, exporter: Any) -> Any:
        """``exporter`` with its ``export`` counted (it keeps its class and settings)."""
        export = exporter.export
        endpoint = str(getattr(exporter, "_endpoint", "") or "the collector")

        def counted(batch: Any, *args: Any, **kwargs: Any) -> Any:
            outcome = export(batch, *args, **kwargs)
            if getattr(outcome, "name", "") == "FAILURE":
                self.failed[endpoint] = self.failed.get(endpoint, 0) + 1
            return outcome

        exporter.export = counted
        return exporter

    def failures(self) -> str:
        """``3 export(s) to URL and 1 to URL failed``, or ``""``."""
        parts = [f"{n} to {where}" for where, n in self.failed.items()]
        if not parts:
            return ""
        first, *rest = parts
        return " and ".join([first.replace(" to ", " export(s) to ", 1), *rest]) + " failed"


def _shutdown_within(seconds: float, *providers: Any) -> bool:
    """Shut the providers down in parallel threads; ``False`` when one is still exporting
    after ``seconds`` (it is abandoned: the process does not wait for it)."""
    threads = [
        threading.Thread(target=provider.shutdown, name="agentfsm-otel-shutdown", daemon=True)
        for provider in providers
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return not any(thread.is_alive() for thread in threads)


@contextmanager
def otel_instrumentation(
    report: Callable[[str], None] | None = None,
) -> Iterator[Instrumentation]:
    """An :class:`Instrumentation` exporting by OTLP/HTTP; flushed and shut down on exit,
    within about :data:`SHUTDOWN_SECONDS`. An export that failed, or a flush cut short, is
    told to ``report`` once, in one line. Raises ``ImportError`` without the ``cli-otel``
    extra."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from agentfsm.adapters.telemetry import Instrumentation

    named = "OTEL_SERVICE_NAME" in os.environ or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    resource = Resource.create({} if named else {"service.name": "agentfsm"})
    timeout = None if any(name in os.environ for name in _TIMEOUT_ENVS) else SHUTDOWN_SECONDS
    exports = _Exports()
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(exports.watch(OTLPSpanExporter(timeout=timeout)))
    )
    reader = PeriodicExportingMetricReader(exports.watch(OTLPMetricExporter(timeout=timeout)))
    meter_provider = MeterProvider(
        resource=resource, metric_readers=[reader], shutdown_on_exit=False
    )
    try:
        yield Instrumentation(tracer_provider=tracer_provider, meter_provider=meter_provider)
    finally:
        finished = _shutdown_within(SHUTDOWN_SECONDS, tracer_provider, meter_provider)
        if report is not None and (exports.failed or not finished):
            what = exports.failures()
            cut = f"the last export did not finish within {SHUTDOWN_SECONDS:g} s"
            report(
                f"--otel: {what}{'; ' if what and not finished else ''}"
                f"{cut if not finished else ''} (spans and metrics lost)"
            )


def run_with_otel(
    args: argparse.Namespace, run: Callable[[argparse.Namespace], int], command: str = "run"
) -> int:
    """``run(args)`` with ``args.instrument`` set to an exporting :class:`Instrumentation`.
    The SDK's own log records go to the command's log file unless ``--verbose``; a
    collector that cannot be reached is one warning line on stderr."""
    from ._logfile import logs_to_file

    with logs_to_file(
        command, verbose=bool(getattr(args, "verbose", False)), loggers=("opentelemetry",)
    ) as log:

        def report(line: str) -> None:
            where = f"; details in {log}" if log is not None else ""
            print(f"agentfsm {command}: WARNING: {line}{where}", file=sys.stderr)

        try:
            setup = otel_instrumentation(report)
            instrumentation = setup.__enter__()
        except ImportError:
            print(
                f"agentfsm {command}: --otel needs pip install 'agentfsm[cli-otel]'",
                file=sys.stderr,
            )
            return 2
        try:
            args.instrument = instrumentation
            args.otel = False
            return run(args)
        finally:
            setup.__exit__(None, None, None)
