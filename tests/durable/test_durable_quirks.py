"""A durable run keeps the quirk profile it was started with (``--quirk`` is part of its spec)."""

from __future__ import annotations

from pathlib import Path

from agentfsm.testing import FakeProviderServer

from .test_kill9 import TURNS, _agentfsm, _finish, _reply, _turn


def _durable(server: FakeProviderServer, folder: Path, *quirks: str) -> list[str]:
    (folder / "work").mkdir(parents=True, exist_ok=True)
    return [
        "run",
        "go",
        "--durable",
        "--provider",
        "openai-compatible",
        "--base-url",
        f"{server.base_url}/v1",
        "--model",
        "m",
        "--preset",
        "minimal",
        "--workspace",
        str(folder / "work"),
        "--session-dir",
        str(folder / "sessions"),
        "--no-sandbox",
        "--quiet",
        *(part for quirk in quirks for part in ("--quirk", quirk)),
    ]


def test_a_durable_run_sends_what_its_quirk_profile_says(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        server.handler = lambda request: _reply(_turn(request))
        proc = _agentfsm(tmp_path, *_durable(server, tmp_path, "explicit_tool_choice=true"))
        assert _finish(proc).strip() == "done"
        bodies = [r.json() for r in server.requests]
    assert len(bodies) == TURNS
    assert all(body["tools"] and body["tool_choice"] == "auto" for body in bodies)


def test_a_durable_run_without_the_quirk_sends_no_tool_choice(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        server.handler = lambda request: _reply(_turn(request))
        assert _finish(_agentfsm(tmp_path, *_durable(server, tmp_path))).strip() == "done"
        bodies = [r.json() for r in server.requests]
    assert len(bodies) == TURNS
    assert not any("tool_choice" in body for body in bodies)


def test_a_bad_quirk_stops_a_durable_run_before_any_request(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        proc = _agentfsm(tmp_path, *_durable(server, tmp_path, "no_such_quirk=true"))
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2
        assert "no_such_quirk" in err.decode()
        assert "explicit_tool_choice" in err.decode()  # the valid names are listed
        assert server.requests == []
