"""A durable run keeps the quirk profile it was started with (``--quirk`` is part of its spec)."""

from __future__ import annotations

from pathlib import Path

from agentfsm.testing import FakeProviderServer

from .test_kill9 import TURNS, _finish, _reply, _run, _turn


def _quirks(*quirks: str) -> list[str]:
    return [part for quirk in quirks for part in ("--quirk", quirk)]


def test_a_durable_run_sends_what_its_quirk_profile_says(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        server.handler = lambda request: _reply(_turn(request))
        proc = _run(server, tmp_path, *_quirks("explicit_tool_choice=true"))
        assert _finish(proc).strip() == "done"
        bodies = [r.json() for r in server.requests]
    assert len(bodies) == TURNS
    assert all(body["tools"] and body["tool_choice"] == "auto" for body in bodies)


def test_a_durable_run_without_the_quirk_sends_no_tool_choice(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        server.handler = lambda request: _reply(_turn(request))
        assert _finish(_run(server, tmp_path)).strip() == "done"
        bodies = [r.json() for r in server.requests]
    assert len(bodies) == TURNS
    assert not any("tool_choice" in body for body in bodies)


def test_a_bad_quirk_stops_a_durable_run_before_any_request(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        proc = _run(server, tmp_path, *_quirks("no_such_quirk=true"))
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2
        assert "no_such_quirk" in err.decode()
        assert "explicit_tool_choice" in err.decode()  # the valid names are listed
        assert server.requests == []
