"""A Responses endpoint that answers like a model: the fake server's ``tools`` scenario
(``agentfsm.testing.scenario_handler``), with one defect at a time switched on.

Written by the project for the tests (not a recording): text or function calls per the
prompt, streamed or not, usage, ``status: incomplete`` past ``max_output_tokens``, a 400
``context_length_exceeded`` past its window, a 401 for a wrong key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from attrs import evolve

from agentfsm.testing import Reply, scenario_handler
from agentfsm.testing._fake_server import RecordedRequest

WINDOW = 200
KEY = "sk-9f8e7d6c5b4a3210"
"""The key the endpoint wants (no 8-character piece of it occurs in a reply: recordings
redact such pieces)."""


@dataclass(frozen=True)
class ResponsesServer:
    """The defaults answer correctly; each other value is one defect."""

    window: int | None = WINDOW
    """Prompts of more tokens than this get a 400 ``context_length_exceeded``."""
    ignores_max_tokens: bool = False
    """The whole answer, ``completed``, whatever ``max_output_tokens``."""
    drops_usage: bool = False
    """Usage is all zeros."""
    completes_cut_answers: bool = False
    """An answer cut at ``max_output_tokens`` says ``completed`` (llama.cpp's server)."""


def _zero(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: 0 if k.endswith("_tokens") else _zero(v) for k, v in value.items()}
    return value


def _without_usage(payload: dict[str, Any]) -> dict[str, Any]:
    response = payload.get("response", payload)
    if isinstance(response, dict) and isinstance(response.get("usage"), dict):
        response["usage"] = _zero(response["usage"])
    return payload


def _completed(payload: dict[str, Any]) -> dict[str, Any]:
    response = payload.get("response", payload)
    if isinstance(response, dict) and response.get("status") == "incomplete":
        response["status"] = "completed"
        response.pop("incomplete_details", None)
    if payload.get("type") == "response.incomplete":
        payload["type"] = "response.completed"
    return payload


def _rewrite(reply: Reply, change: Any) -> Reply:
    if reply.frames is None:
        return evolve(reply, body=json.dumps(change(json.loads(reply.body))).encode())
    frames = []
    for frame in reply.frames:
        head, _, data = str(frame).partition("data: ")
        payload = change(json.loads(data))
        head = head.replace("response.incomplete", str(payload.get("type")))
        frames.append(f"{head}data: {json.dumps(payload)}\n\n")
    return evolve(reply, frames=tuple(frames))


def answer(server: ResponsesServer, request: RecordedRequest) -> Reply:
    """What ``server`` sends back for ``request``."""
    if server.ignores_max_tokens:
        body = request.json()
        body.pop("max_output_tokens", None)
        request = evolve(request, body=json.dumps(body).encode())
    reply = scenario_handler("tools", api_key=KEY, context_window=server.window)(request)
    if reply.status != 200:
        return reply
    if server.drops_usage:
        reply = _rewrite(reply, _without_usage)
    if server.completes_cut_answers:
        reply = _rewrite(reply, _completed)
    return reply
