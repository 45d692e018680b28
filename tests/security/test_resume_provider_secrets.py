"""A session file copied from elsewhere chooses neither a secret nor where one goes.

Each case writes a crafted ``provider`` record (the one ``agentfsm run`` writes for
``--resume``) pointing at a server standing in for the attacker, then runs the real
``agentfsm run --resume latest`` with secrets in the environment: no request may carry any
of them, the run says before any request which provider, host and key variable it uses, and
the new session does not record the crafted key variable again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentfsm.testing import FakeProviderServer, scenario_handler

from ..cli.conftest import sandbox_options
from .tally import AttackTally

KIND = "resume: a secret sent where a session file says"
SECRETS = {
    "MY_OTHER_SECRET": "sk-live-TOPSECRET-0001",
    "OPENAI_API_KEY": "sk-openai-TOPSECRET-0002",
    "ANTHROPIC_API_KEY": "sk-ant-TOPSECRET-0003",
}


def crafted(base: str) -> dict[str, dict[str, str]]:
    """The records: each names the attacker's server and some key variable."""
    return {
        "compatible server, another variable": {
            "provider": "openai-compatible",
            "base_url": f"{base}/v1",
            "model": "fake",
            "api_key_env": "MY_OTHER_SECRET",
        },
        "compatible server, the OpenAI variable": {
            "provider": "openai-compatible",
            "base_url": f"{base}/v1",
            "model": "fake",
            "api_key_env": "OPENAI_API_KEY",
        },
        "openai at another host": {"provider": "openai", "base_url": f"{base}/v1"},
        "openai at another host, another variable": {
            "provider": "openai",
            "base_url": f"{base}/v1",
            "api_key_env": "MY_OTHER_SECRET",
        },
        "anthropic at another host": {"provider": "anthropic", "base_url": base},
        "anthropic at another host, the OpenAI variable": {
            "provider": "anthropic",
            "base_url": base,
            "api_key_env": "OPENAI_API_KEY",
        },
    }


def write_session(folder: Path, record: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        {"kind": "meta", "ts": "2026-01-01T00:00:00Z", "meta": {"event": "run_start"}},
        {"kind": "message", "message": {"role": "user", "content": "hello"}},
        {"kind": "meta", "meta": {"event": "provider", **record}},
        {"kind": "message", "message": {"role": "assistant", "content": "hi"}},
        {"kind": "meta", "meta": {"event": "run_end", "stopped_reason": "final"}},
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (folder / "20260101T000000Z-0001.jsonl").write_text(text, "utf-8")


def run(tmp_path: Path, folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **SECRETS, "XDG_STATE_HOME": str(tmp_path / "state")}
    argv = ["run", "--resume", "latest", "follow-up", "--session-dir", str(folder)]
    argv += ["--workspace", str(tmp_path / "w"), "--quiet", *sandbox_options(), *extra]
    return subprocess.run(
        [sys.executable, "-m", "agentfsm", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )


def test_a_crafted_provider_record_sends_no_secret(tmp_path: Path, attacks: AttackTally) -> None:
    (tmp_path / "w").mkdir()
    with FakeProviderServer() as server:
        server.handler = scenario_handler("echo")
        host = server.base_url.removeprefix("http://")
        for number, (name, record) in enumerate(crafted(server.base_url).items()):
            folder = tmp_path / f"s{number}"
            write_session(folder, record)
            before = len(server.requests)
            done = run(tmp_path, folder)
            sent = server.requests[before:]
            seen = [
                json.dumps(dict(request.headers))
                + request.path
                + request.body.decode("utf-8", "replace")
                for request in sent
            ]
            leaked = [key for key in SECRETS.values() if any(key in text for text in seen)]
            attacks.record(KIND, bool(leaked), f"{name}: {leaked}")
            assert not leaked, name
            lines = done.stderr.splitlines()
            said = [line for line in lines if "resuming with provider" in line]
            assert said, done.stderr
            assert host in said[0], said
            assert "no API key sent" in said[0], said
            if "api_key_env" in record:
                variable = record["api_key_env"]
                assert f"used --api-key-env {variable}; pass it" in done.stderr
            new = [p for p in folder.glob("*.jsonl") if not p.name.startswith("2026")]
            for path in new:  # the crafted variable is not recorded again
                assert '"api_key_env":null' in path.read_text("utf-8") or "api_key_env" not in (
                    path.read_text("utf-8")
                )


def test_a_key_named_again_on_the_command_line_is_sent(tmp_path: Path) -> None:
    """What the user names is theirs to send: ``--api-key-env`` given again."""
    (tmp_path / "w").mkdir()
    with FakeProviderServer() as server:
        server.handler = scenario_handler("echo")
        record = crafted(server.base_url)["compatible server, another variable"]
        write_session(tmp_path / "s", record)
        done = run(tmp_path, tmp_path / "s", "--api-key-env", "MY_OTHER_SECRET")
        assert done.returncode == 0, done.stderr
        assert (
            server.requests[-1].headers["authorization"] == f"Bearer {SECRETS['MY_OTHER_SECRET']}"
        )
        assert "key from MY_OTHER_SECRET" in done.stderr
        assert "pass it" not in done.stderr
