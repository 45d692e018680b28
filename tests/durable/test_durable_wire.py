"""A durable run speaks the wire it was started with (``--wire`` is part of its spec)."""

from __future__ import annotations

import json
from pathlib import Path

from agentfsm.testing import FakeProviderServer, RecordedRequest, Reply, responses_reply, tool_reply

from .test_kill9 import TURNS, _finish, _run


def _responses_turn(request: RecordedRequest) -> Reply:
    body = json.loads(request.body)
    turn = sum(1 for item in body["input"] if item.get("type") == "function_call")
    if turn < TURNS - 1:
        return responses_reply(tool_reply(("shell", {"command": f"echo {turn} >> side.log"})))
    return responses_reply("done")


def test_a_durable_run_on_the_responses_wire(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        server.handler = _responses_turn
        assert _finish(_run(server, tmp_path, "--wire", "responses")).strip() == "done"
        paths = [r.path for r in server.requests]
    assert paths == ["/v1/responses"] * TURNS
    assert (tmp_path / "work" / "side.log").read_text() == "0\n1\n2\n"
