"""``--otel`` with no collector listening: the command's end waits about two seconds for
the exporters, and the lost export is one warning line (the SDK's retries go to the log
file). ``batch --otel`` exports the spans of the tasks it runs to a real OTLP receiver."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentfsm.cli._otel import SHUTDOWN_SECONDS, otel_instrumentation
from agentfsm.testing import FakeProviderServer
from tests.durable.batch_helpers import provider_options, reply, write_tasks
from tests.telemetry.receiver import OtlpReceiver

TIMEOUT_ENVS = (
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT",
)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_a_missing_collector_costs_about_two_seconds_and_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in TIMEOUT_ENVS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    told: list[str] = []
    with otel_instrumentation(told.append) as instrumentation:
        tracers, meters = instrumentation.tracer_provider, instrumentation.meter_provider
        assert tracers is not None
        assert meters is not None
        with tracers.get_tracer("test").start_as_current_span("a span"):
            pass
        meters.get_meter("test").create_counter("c").add(1)
        ending = time.monotonic()
    waited = time.monotonic() - ending
    print(f"--otel with no collector: the end waited {waited:.2f} s; told {told}")
    assert waited < SHUTDOWN_SECONDS + 1.5  # the SDK's own default retries for 10 s and more
    assert len(told) == 1
    assert "failed" in told[0]
    assert "spans and metrics lost" in told[0]
    if "did not finish" not in told[0]:  # both exports failed: both endpoints are named
        assert "/v1/traces" in told[0]
        assert "/v1/metrics" in told[0]


def test_batch_otel_exports_its_tasks_and_a_missing_collector_is_one_line(
    tmp_path: Path,
) -> None:
    (tmp_path / "work").mkdir()
    write_tasks(tmp_path / "tasks.jsonl", ["alpha", "beta"])
    env = {name: value for name, value in os.environ.items() if name not in TIMEOUT_ENVS}
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        env.pop(name, None)

    def run(endpoint: str, folder: Path) -> tuple[int, list[str], float]:
        started = time.monotonic()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentfsm",
                "batch",
                str(tmp_path / "tasks.jsonl"),
                *provider_options(server),
                "--workspace",
                str(tmp_path / "work"),
                "--database-url",
                f"sqlite:///{folder / 'queue.sqlite'}",
                "--poll",
                "0.1",
                "--otel",
            ],
            env={
                **env,
                "XDG_STATE_HOME": str(folder / "state"),
                "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        _, err = proc.communicate(timeout=180)
        return proc.returncode, err.decode().splitlines(), time.monotonic() - started

    with FakeProviderServer() as server, OtlpReceiver() as receiver:
        server.handler = reply
        code, err, _ = run(receiver.endpoint, tmp_path / "first")
        assert code == 0, err
        assert not any("--otel" in line for line in err)
        names = [span.name for span in receiver.spans()]
        assert names.count("invoke_agent agentfsm") == 2  # one per task, from the batch's worker
        code, err, took = run(f"http://127.0.0.1:{closed_port()}", tmp_path / "second")
    print(f"batch --otel with no collector: {took:.1f} s; stderr {err}")
    assert code == 0, err
    warnings = [line for line in err if "--otel" in line]
    assert len(warnings) == 1
    assert warnings[0].startswith("agentfsm batch: WARNING: --otel: ")
    [log] = [
        line.removeprefix("agentfsm batch: logs go to ") for line in err if "logs go to" in line
    ]
    assert warnings[0].endswith(f"details in {log}")  # one log file for the command
    assert "Transient error" in Path(log).read_text()  # the SDK's retries are there
    assert not any("Transient error" in line or "Traceback" in line for line in err)
