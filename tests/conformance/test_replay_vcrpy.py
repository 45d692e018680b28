"""``replay-vcr`` on cassettes the real vcrpy records (a dev dependency): the exchanges of
httpx with a FakeProviderServer, written by vcrpy itself, replay exactly."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
import yaml

from agentfsm.conformance._replay_vcr import replay_vcr
from agentfsm.testing import FakeProviderServer

from .vcr_cassettes import KEY, scenarios

try:
    import vcr  # type: ignore[import-not-found,import-untyped,unused-ignore]
except ImportError:  # pragma: no cover - dev dependency
    if os.environ.get("CI"):
        raise
    pytest.skip("vcrpy is not installed (pip install -e '.[dev]')", allow_module_level=True)


async def test_cassettes_vcrpy_records_replay_exactly(tmp_path: Path) -> None:
    path = tmp_path / "recorded.yaml"
    with FakeProviderServer() as server:
        with vcr.use_cassette(str(path), record_mode="all"):
            async with httpx.AsyncClient(headers={"authorization": f"Bearer {KEY}"}) as client:
                for where, reply in scenarios():
                    server.enqueue(reply)
                    await client.post(server.base_url + where, json={"model": "fake-model"})
        assert len(server.requests) == len(scenarios())
    written = yaml.safe_load(path.read_text("utf-8"))
    assert len(written["interactions"]) == len(scenarios())
    report = await replay_vcr(tmp_path)
    outcomes = [(r.index, r.wire, r.outcome) for r in report.results]
    assert [o for _, w, o in outcomes if w != "openai-responses"] == ["exact"] * 9
    assert [o for _, w, o in outcomes if w == "openai-responses"] == ["exact"]
    assert report.other == 1
    assert report.passed
