"""`agentfsm conformance probe`: the suggested quirk profile, from what a server does."""

from __future__ import annotations

from typing import Any

import pytest
from attrs import define

from agentfsm.adapters.providers import OpenAIQuirks
from agentfsm.cli import main
from agentfsm.conformance.frames import DONE, chunk, completion
from agentfsm.conformance.probe import probe
from agentfsm.testing import FakeProviderServer, Reply
from agentfsm.testing.fake_server import RecordedRequest


@define
class Server:
    rejects_stream_options: bool = False
    wants_max_completion_tokens: bool = False
    tools_need_tool_choice: bool = False
    empty_auto_stream: bool = False
    rejects_null_content: bool = False

    def __call__(self, request: RecordedRequest) -> Reply:
        body: dict[str, Any] = request.json()
        if self.rejects_stream_options and "stream_options" in body:
            return Reply.json({"error": {"message": "unknown field stream_options"}}, 400)
        if self.wants_max_completion_tokens and "max_tokens" in body:
            message = "Use 'max_completion_tokens' instead of 'max_tokens'"
            return Reply.json({"error": {"message": message}}, 400)
        nulls = [m for m in body["messages"] if m["role"] == "assistant" and m["content"] is None]
        if self.rejects_null_content and nulls:
            return Reply.json({"detail": "content: Input should be a valid string"}, 500)
        tools_shown = bool(body.get("tools")) and (
            "tool_choice" in body or not self.tools_need_tool_choice
        )
        if body.get("stream"):
            if tools_shown and body.get("tool_choice") == "auto" and self.empty_auto_stream:
                return Reply.raw(b"", headers={"content-type": "text/event-stream"})
            return Reply.sse([chunk({"content": "hi"}), chunk({}, finish="stop"), DONE])
        usage = {"prompt_tokens": 20 + (80 if tools_shown else 0), "completion_tokens": 1}
        return Reply.json(completion({"role": "assistant", "content": "hi"}, usage=usage))


async def suggest(server: Server) -> tuple[list[str], OpenAIQuirks]:
    with FakeProviderServer() as fake:
        fake.handler = server
        return await probe(f"{fake.base_url}/v1", "m")


async def test_an_openai_like_server_needs_the_default_profile() -> None:
    findings, quirks = await suggest(Server())
    assert quirks == OpenAIQuirks()
    assert findings == ["stream_options accepted (200)"]


async def test_a_llama_cpp_like_server_gets_its_profile() -> None:
    server = Server(tools_need_tool_choice=True, empty_auto_stream=True, rejects_null_content=True)
    findings, quirks = await suggest(server)
    assert quirks == OpenAIQuirks(
        stream_with_tools=False, explicit_tool_choice=True, null_assistant_content=False
    )
    assert "a streamed request with tools returns an empty 200 stream" in findings
    assert "rejects content: null on assistant tool-call turns (500)" in findings


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        (Server(rejects_stream_options=True), OpenAIQuirks(stream_options=False)),
        (
            Server(wants_max_completion_tokens=True),
            OpenAIQuirks(max_tokens_field="max_completion_tokens"),
        ),
    ],
)
async def test_request_fields_a_server_rejects(server: Server, expected: OpenAIQuirks) -> None:
    assert (await suggest(server))[1] == expected


def test_the_cli_prints_the_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeProviderServer() as fake:
        fake.handler = Server(tools_need_tool_choice=True, empty_auto_stream=True)
        code = main(["conformance", "probe", "--base-url", f"{fake.base_url}/v1", "--model", "m"])
    assert code == 0
    out = capsys.readouterr().out
    assert "suggested: OpenAIQuirks(stream_with_tools=False, explicit_tool_choice=True)" in out
