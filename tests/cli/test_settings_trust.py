"""The settings a CLI run applies: the user's merged under the workspace's, what a workspace
file widens (keys this version's schema may not have yet included), and the durable check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentfsm.adapters.tools._settings import Settings, SettingsError, load_settings
from agentfsm.cli._settings_trust import (
    RunSettings,
    check_submitted,
    consent,
    read_run_settings,
    trust_file,
    user_settings_path,
    widenings,
)


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config" / "agentfsm" / "settings.json"


def write(path: Path, settings: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings), "utf-8")


def test_the_user_settings_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert user_settings_path() == tmp_path / "agentfsm" / "settings.json"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative")
    assert user_settings_path() == Path.home() / ".config" / "agentfsm" / "settings.json"


def test_user_settings_are_merged_under_the_workspaces(tmp_path: Path, config: Path) -> None:
    write(
        config,
        {
            "permissions": {"deny": ["shell(rm *)"]},
            "sandbox": {"network": True, "read": ["/opt/a"]},
            "provider": {"quirks": {"explicit_tool_choice": True, "stream_with_tools": False}},
        },
    )
    workspace = tmp_path / "ws"
    write(
        workspace / ".agentfsm" / "settings.json",
        {
            "permissions": {"deny": ["write_file(.git/**)"]},
            "sandbox": {"read": ["/opt/a", "/opt/b"]},
            "provider": {"quirks": {"explicit_tool_choice": False}},
        },
    )
    found = read_run_settings(workspace)
    settings = found.settings
    assert settings.sandbox.network is True
    assert settings.sandbox.read == ("/opt/a", "/opt/b")
    assert [(rule.tool, rule.pattern) for rule in settings.permissions.deny] == [
        ("shell", "rm *"),
        ("write_file", ".git/**"),
    ]
    assert dict(settings.provider.quirks) == {
        "explicit_tool_choice": False,
        "stream_with_tools": False,
    }
    assert found.widens == ("read /opt/a", "read /opt/b")  # what the workspace's file asks


def test_a_malformed_user_file_names_itself(tmp_path: Path, config: Path) -> None:
    config.parent.mkdir(parents=True)
    config.write_text('{"colour": 1}', "utf-8")
    with pytest.raises(SettingsError, match=f"^{config}: colour: unknown key"):
        read_run_settings(tmp_path)


def test_an_absent_workspace_file_widens_nothing(tmp_path: Path, config: Path) -> None:
    found = read_run_settings(tmp_path)
    assert found == RunSettings(Settings())


def accepts(tmp_path: Path, settings: dict[str, Any]) -> bool:
    write(tmp_path / "probe" / ".agentfsm" / "settings.json", settings)
    try:
        load_settings(tmp_path / "probe")
    except SettingsError:
        return False
    return True


@pytest.mark.parametrize(
    ("sandbox", "widens"),
    [
        ({"env": ["GITHUB_TOKEN", "NPM_TOKEN"]}, ("env GITHUB_TOKEN, NPM_TOKEN",)),
        ({"limits": {"processes": 1_000_000}}, ("limits processes=1000000",)),
        ({"env": []}, ()),
    ],
)
def test_keys_the_schema_may_not_have_yet(
    tmp_path: Path, sandbox: dict[str, Any], widens: tuple[str, ...]
) -> None:
    """``sandbox.env`` and ``sandbox.limits`` are read from the raw JSON: judged the same
    whether this version's schema takes them (parsed) or not (raw only)."""
    raw = {"sandbox": sandbox}
    parsed = Settings()
    if accepts(tmp_path, raw):
        parsed = load_settings(tmp_path / "probe")
    assert widenings(parsed, raw, tmp_path) == widens


def test_paths_are_judged_after_symlinks(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "inside").mkdir(parents=True)
    (workspace / "out").symlink_to(tmp_path)
    raw = {"sandbox": {"read": [str(workspace / "inside"), str(workspace / "out")]}}
    write(workspace / ".agentfsm" / "settings.json", raw)
    assert read_run_settings(workspace).widens == (f"read {workspace / 'out'}",)


def test_consent_is_recorded_per_workspace_and_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    found = RunSettings(Settings(), ("network",), "a" * 64)
    consent("agentfsm run", workspace, found, trust_flag=False, ask=True, answer=lambda: "y\n")
    assert "  - network" in capsys.readouterr().err
    assert json.loads(trust_file().read_text("utf-8")) == {
        "version": 1,
        "trusted": {str(workspace.resolve()): "a" * 64},
    }
    assert trust_file().stat().st_mode & 0o077 == 0
    consent("agentfsm run", workspace, found, trust_flag=False, ask=False)  # remembered
    changed = RunSettings(Settings(), ("network",), "b" * 64)
    with pytest.raises(Exception, match="widens the sandbox \\(network\\)"):
        consent("agentfsm run", workspace, changed, trust_flag=False, ask=False)


def test_a_trust_file_inside_the_workspace_is_not_believed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    write(trust_file(), {"version": 1, "trusted": {str(tmp_path.resolve()): "a" * 64}})
    found = RunSettings(Settings(), ("network",), "a" * 64)
    with pytest.raises(Exception, match="widens the sandbox"):
        consent("agentfsm run", tmp_path, found, trust_flag=False, ask=False)


def test_a_durable_run_applies_only_the_file_agreed_to() -> None:
    found = RunSettings(Settings(), ("network",), "a" * 64)
    check_submitted(found, "a" * 64)
    check_submitted(RunSettings(Settings()), None)
    with pytest.raises(SettingsError, match="not the file agreed to"):
        check_submitted(found, None)
    with pytest.raises(SettingsError, match="not the file agreed to"):
        check_submitted(found, "b" * 64)


async def test_a_worker_refuses_a_file_changed_after_submission(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The durable agent factory (what ``agentfsm worker`` and ``runs resume`` run)."""
    pytest.importorskip("dbos")
    from agentfsm.adapters.durable import RunSpec
    from agentfsm.cli._durable_cmd import _OPTIONS, CLI_FACTORY, SETTINGS_DIGEST, _cli_agent

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    workspace = tmp_path / "ws"
    write(workspace / ".agentfsm" / "settings.json", {"sandbox": {"network": True}})
    options: dict[str, Any] = dict.fromkeys(_OPTIONS)
    options.update(
        provider="openai-compatible",
        base_url="http://127.0.0.1:9/v1",
        model="m",
        preset="minimal",
        max_turns=2,
        no_sandbox=True,
        quirk=[],
        workspace=str(workspace),
        session_dir=str(tmp_path / "sessions"),
    )
    agreed = read_run_settings(workspace).digest
    spec = RunSpec(prompt="x", factory=CLI_FACTORY, session_path="s.jsonl", options=options)
    with pytest.raises(SettingsError, match="not the file agreed to"):
        async with _cli_agent(spec):
            pass
    options[SETTINGS_DIGEST] = agreed
    spec = RunSpec(prompt="x", factory=CLI_FACTORY, session_path="s.jsonl", options=options)
    async with _cli_agent(spec) as agent:
        assert agent is not None
    write(workspace / ".agentfsm" / "settings.json", {"sandbox": {"network": True}, "x": 1})
    with pytest.raises(SettingsError):
        async with _cli_agent(spec):
            pass
