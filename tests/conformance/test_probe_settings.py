"""`conformance probe --write-settings`: the verified profile, where `agentfsm run` reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentfsm.adapters.providers import AnthropicQuirks, OpenAIQuirks
from agentfsm.adapters.tools._settings import load_settings
from agentfsm.cli import main
from agentfsm.conformance._probe_verify import write_settings
from agentfsm.testing import FakeProviderServer

from .probe_servers import OpenAIServer

LITELLM_LIKE = OpenAIServer(tools_need_tool_choice=True, clean_empty_auto_stream=True)


def probe_into(workspace: Path, server: OpenAIServer, *where: str) -> int:
    with FakeProviderServer() as fake:
        fake.handler = server
        return main(
            [
                "conformance",
                "probe",
                "--base-url",
                f"{fake.base_url}/v1",
                "--model",
                "m",
                "--write-settings",
                *where,
            ]
        )


def test_the_verified_profile_is_written_and_run_applies_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    workspace = tmp_path / "project"
    (workspace / ".agentfsm").mkdir(parents=True)
    kept = {
        "permissions": {"deny": ["shell(rm *)"]},
        "provider": {"quirks": {"stream_options": False}},
    }
    (workspace / ".agentfsm" / "settings.json").write_text(json.dumps(kept), "utf-8")
    assert probe_into(workspace, LITELLM_LIKE, str(workspace)) == 0
    out = capsys.readouterr().out
    written = json.loads((workspace / ".agentfsm" / "settings.json").read_text("utf-8"))
    assert f"wrote provider.quirks to {workspace / '.agentfsm' / 'settings.json'}" in out
    assert written == {
        "permissions": {"deny": ["shell(rm *)"]},
        "provider": {"quirks": {"stream_with_tools": False, "explicit_tool_choice": True}},
    }
    assert dict(load_settings(workspace).provider.quirks) == {
        "stream_with_tools": False,
        "explicit_tool_choice": True,
    }
    # agentfsm run in that workspace, against the same kind of server, sends the profile.
    with FakeProviderServer() as fake:
        fake.handler = LITELLM_LIKE
        code = main(
            [
                "run",
                "what is the weather in Paris?",
                "--workspace",
                str(workspace),
                "--no-sandbox",
                "--provider",
                "openai-compatible",
                "--base-url",
                f"{fake.base_url}/v1",
                "--model",
                "m",
                "--quiet",
                "--max-turns",
                "3",
            ]
        )
        first = fake.requests[0].json()
    assert first["tool_choice"] == "auto"
    assert "stream" not in first
    assert code == 0


@pytest.mark.parametrize(
    ("server", "said"),
    [
        (OpenAIServer(rejects_tool_history=True), "no profile works"),
        (OpenAIServer(never_calls_tools=True), "not verified"),
    ],
)
def test_nothing_is_written_without_a_verified_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server: OpenAIServer, said: str
) -> None:
    assert probe_into(tmp_path, server, str(tmp_path)) == 1
    captured = capsys.readouterr()
    assert said in captured.out
    assert "settings not written: no verified profile" in captured.err
    assert not (tmp_path / ".agentfsm").exists()


def test_the_default_place_is_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert probe_into(tmp_path, OpenAIServer()) == 0
    capsys.readouterr()
    written = json.loads((tmp_path / ".agentfsm" / "settings.json").read_text("utf-8"))
    assert written == {"provider": {"quirks": {}}}


def test_a_malformed_settings_file_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "settings.json"
    target.write_text("[1, 2", "utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        write_settings(target, OpenAIQuirks(explicit_tool_choice=True))
    assert target.read_text("utf-8") == "[1, 2"
    target.write_text("[]", "utf-8")
    with pytest.raises(ValueError, match="not hold a JSON object"):
        write_settings(target, OpenAIQuirks(explicit_tool_choice=True))
    assert target.read_text("utf-8") == "[]"


def test_an_anthropic_profile_is_written_by_name(tmp_path: Path) -> None:
    path = write_settings(tmp_path, AnthropicQuirks(explicit_tool_choice=True, string_content=True))
    assert path == tmp_path / ".agentfsm" / "settings.json"
    assert json.loads(path.read_text("utf-8")) == {
        "provider": {"quirks": {"explicit_tool_choice": True, "string_content": True}}
    }
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]  # no temporary left
