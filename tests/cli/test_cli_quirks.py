"""``agentfsm run --quirk`` and the settings' ``provider.quirks``: the bytes the server gets."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from attrs import evolve

from agentfsm.cli import main
from agentfsm.conformance._frames import DONE, chunk, completion, event, tool_delta
from agentfsm.testing import FakeProviderServer, Reply

from .conftest import sandbox_options

ANSWER = Reply.sse([chunk({"content": "Done."}), chunk({}, finish="stop"), DONE])


def anthropic_answer() -> Reply:
    start = {"message": {"id": "msg_1", "model": "m", "usage": {"input_tokens": 5}}}
    return Reply.sse(
        [
            event("message_start", start),
            event("content_block_start", {"index": 0, "content_block": {"type": "text"}}),
            event(
                "content_block_delta",
                {"index": 0, "delta": {"type": "text_delta", "text": "Done."}},
            ),
            event("content_block_stop", {"index": 0}),
            event(
                "message_delta",
                {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
            ),
            event("message_stop", {}),
        ]
    )


def settings(workspace: Path, quirks: dict[str, Any]) -> None:
    folder = workspace / ".agentfsm"
    folder.mkdir(exist_ok=True)
    (folder / "settings.json").write_text(json.dumps({"provider": {"quirks": quirks}}), "utf-8")


def run(workspace: Path, server: FakeProviderServer, *extra: str, wire: str = "openai") -> int:
    provider = (
        ["--provider", "anthropic", "--base-url", server.base_url]
        if wire == "anthropic"
        else ["--provider", "openai-compatible", "--base-url", f"{server.base_url}/v1"]
    )
    return main(
        [
            "run",
            "look at notes.txt",
            "--workspace",
            str(workspace),
            *sandbox_options(),
            *provider,
            "--model",
            "m",
            "--quiet",
            *extra,
        ]
    )


def first_body(server: FakeProviderServer) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(server.requests[0].body)
    return body


def test_default_profile_sends_no_tool_choice(workspace: Path) -> None:
    with FakeProviderServer() as server:
        server.enqueue(ANSWER)
        assert run(workspace, server) == 0
        body = first_body(server)
    assert body["tools"]
    assert "tool_choice" not in body
    assert body["stream"] is True


def test_quirks_on_the_command_line(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with FakeProviderServer() as server:
        server.enqueue(Reply.json(completion({"role": "assistant", "content": "Done."})))
        code = run(
            workspace,
            server,
            "--quirk",
            "explicit_tool_choice=true",
            "--quirk",
            "stream-with-tools=false",
            "--quirk",
            "max_tokens_field=max_completion_tokens",
            "--max-tokens",
            "64",
        )
        raw = server.requests[0].body
        body = first_body(server)
    assert code == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip() == "Done."
    assert b'"tool_choice": "auto"' in raw
    assert "stream" not in body  # tools offered: sent unstreamed
    assert body["max_completion_tokens"] == 64
    assert "max_tokens" not in body


def test_quirks_from_the_settings_and_the_command_line_wins(workspace: Path) -> None:
    settings(workspace, {"explicit_tool_choice": True, "stream_options": False})
    with FakeProviderServer() as server:
        server.enqueue(ANSWER, ANSWER)
        assert run(workspace, server) == 0
        from_settings = first_body(server)
        assert run(workspace, server, "--quirk", "explicit_tool_choice=false") == 0
        overridden: dict[str, Any] = json.loads(server.requests[1].body)
    assert from_settings["tool_choice"] == "auto"
    assert "stream_options" not in from_settings
    assert "tool_choice" not in overridden
    assert "stream_options" not in overridden  # the rest of the settings' profile stays


def test_anthropic_wire_tool_choice(workspace: Path) -> None:
    with FakeProviderServer() as server:
        server.enqueue(anthropic_answer(), anthropic_answer())
        assert run(workspace, server, wire="anthropic") == 0
        assert run(workspace, server, "--quirk", "explicit_tool_choice=1", wire="anthropic") == 0
        plain: dict[str, Any] = json.loads(server.requests[0].body)
        raw = server.requests[1].body
        paths = [r.path for r in server.requests]
    assert "tool_choice" not in plain
    assert plain["tools"]
    assert b'"tool_choice": {"type": "auto"}' in raw
    assert paths == ["/v1/messages", "/v1/messages"]


@pytest.mark.parametrize(
    ("extra", "quirks", "wire", "message"),
    [
        (["--quirk", "bogus=1"], None, "openai", "'bogus' is not a quirk of the openai-chat wire"),
        (["--quirk", "explicit_tool_choice=maybe"], None, "openai", "takes true or false"),
        (["--quirk", "explicit_tool_choice"], None, "openai", "a quirk is NAME=VALUE"),
        (["--quirk", "max_tokens_field=tokens"], None, "openai", "max_completion_tokens"),
        (["--quirk", "string_content=true"], None, "openai", "valid: stream_options"),
        (["--quirk", "stream_options=false"], None, "anthropic", "valid: explicit_tool_choice"),
        ([], {"nope": True}, "openai", "provider.quirks.nope: not a quirk"),
        ([], {"string_content": True}, "openai", "settings.json: provider.quirks:"),
        ([], {"explicit_tool_choice": "x"}, "openai", "settings.json: provider.quirks:"),
    ],
)
def test_bad_quirks_are_usage_errors(
    workspace: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    quirks: dict[str, Any] | None,
    wire: str,
    message: str,
) -> None:
    if quirks is not None:
        settings(workspace, quirks)
    with FakeProviderServer() as server:
        assert run(workspace, server, *extra, wire=wire) == 2
        assert server.requests == []
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1  # one line, no traceback


def test_the_model_cannot_change_the_profile(workspace: Path) -> None:
    """The profile lives in the agent's own settings file, out of the model's reach."""
    settings(workspace, {"explicit_tool_choice": True})
    before = (workspace / ".agentfsm" / "settings.json").read_bytes()
    rewrite = json.dumps({"provider": {"quirks": {"explicit_tool_choice": False}}})
    attempts = [
        tool_delta(
            index=0,
            id="c1",
            name="write_file",
            arguments=json.dumps({"path": ".agentfsm/settings.json", "content": rewrite}),
        ),
        tool_delta(
            index=1,
            id="c2",
            name="read_file",
            arguments=json.dumps({"path": ".agentfsm/settings.json"}),
        ),
    ]
    with FakeProviderServer() as server:
        server.enqueue(
            Reply.sse(
                [chunk(attempts[0]), chunk(attempts[1]), chunk({}, finish="tool_calls"), DONE]
            ),
            ANSWER,
            ANSWER,
        )
        assert run(workspace, server) == 0
        assert run(workspace, server) == 0
        second: dict[str, Any] = json.loads(server.requests[1].body)
        next_run: dict[str, Any] = json.loads(server.requests[2].body)
    assert (workspace / ".agentfsm" / "settings.json").read_bytes() == before
    results = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert len(results) == 2
    assert all("explicit_tool_choice" not in text for text in results)
    assert next_run["tool_choice"] == "auto"


def test_the_local_model_profile_is_the_base_for_local_runs(workspace: Path) -> None:
    from agentfsm.adapters.providers._local import LOCAL_QUIRKS
    from agentfsm.adapters.tools._settings import load_settings
    from agentfsm.cli._run_cmd import add_arguments, quirks

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    settings(workspace, {"tool_string_max_length": 64})
    args = parser.parse_args(["task", "--provider", "local", "--quirk", "stream_with_tools=true"])
    profile = quirks(args, load_settings(workspace))
    assert profile == evolve(LOCAL_QUIRKS, tool_string_max_length=64, stream_with_tools=True)
    assert profile.explicit_tool_choice is True  # kept from the local model's own profile
