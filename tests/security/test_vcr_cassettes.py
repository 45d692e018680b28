"""Hostile VCR cassettes against ``agentfsm conformance replay-vcr``: a cassette is data a
user got from elsewhere. Its keys never reach a report, its text never drives the terminal,
and no file of it makes the command raise, hang or inflate without bound."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import yaml

from agentfsm.cli import main
from agentfsm.conformance import _replay_vcr
from agentfsm.engine._messages import ChatResult

from .tally import AttackTally

SECRET = "sk-live-SECRET-3c9f1a7e5b2d4f6a8c0e1234"
ESCAPES = ("\x1b[2J", "\x1b]0;pwned\x07", "\x9b31m", "\r\x1b[A")


def _interaction(uri: str, body: str | bytes, headers: dict[str, list[str]]) -> dict[str, Any]:
    return {
        "request": {
            "body": json.dumps({"model": "m"}),
            "headers": {
                "authorization": [f"Bearer {SECRET}"],
                "x-api-key": [SECRET],
                "api-key": [SECRET],
            },
            "method": "POST",
            "uri": uri,
        },
        "response": {
            "headers": {"content-type": ["application/json"], **headers},
            "status": {"code": 200, "message": "OK"},
            "body": {"string": body},
        },
    }


def _answer(text: str) -> str:
    message = {"role": "assistant", "content": text}
    return json.dumps({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})


def _secret_cassettes(folder: Path) -> list[str]:
    """Cassettes with the key in every place a recorder keeps it; returns what each tries."""
    places = {
        "request headers": ("https://api.openai.com/v1/chat/completions", {}),
        "response headers": (
            "https://api.openai.com/v1/chat/completions",
            {"set-cookie": [f"s={SECRET}"], "x-echo-key": [SECRET]},
        ),
        "uri userinfo": (f"https://user:{SECRET}@api.openai.com/v1/chat/completions", {}),
        "uri query": (f"https://api.openai.com/v1/chat/completions?key={SECRET}", {}),
        "uri of another path": (f"https://api.openai.com/v1/files?key={SECRET}", {}),
    }
    for name, (uri, headers) in places.items():
        content = {"interactions": [_interaction(uri, _answer("fine"), headers)], "version": 1}
        (folder / f"{name.replace(' ', '-')}.yaml").write_text(yaml.safe_dump(content), "utf-8")
    return list(places)


def test_keys_in_a_cassette_never_reach_a_report(
    tmp_path: Path, attacks: AttackTally, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "cassettes"
    folder.mkdir()
    places = _secret_cassettes(folder)
    outputs = {
        "text": [],
        "markdown": ["--markdown"],
        "json": ["--json"],
        "markdown file": ["--markdown", str(tmp_path / "r.md")],
        "json file": ["--json", str(tmp_path / "r.json")],
    }
    for output, flags in outputs.items():
        code = main(["conformance", "replay-vcr", str(folder), *flags])
        assert code == 0  # every exchange exact: the key is simply not part of the report
        printed = capsys.readouterr()
        text = printed.out + printed.err
        if output.endswith("file"):
            text += Path(flags[1]).read_text("utf-8")
        for place in places:
            attacks.record("vcr-key-in-report", SECRET[8:24] in text, f"{place} -> {output}")


def test_cassette_text_never_drives_the_terminal(
    tmp_path: Path,
    attacks: AttackTally,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = tmp_path / "cassettes"
    folder.mkdir()

    def lossy(url: str, client: httpx.AsyncClient | None) -> Any:
        """A Chat Completions reader that loses an answer's last character: the report
        shows the recorded text, escapes and all, in the difference."""
        real = _replay_vcr._openai(url, client)

        async def chat(*args: Any, **kwargs: Any) -> ChatResult:
            result = await real(*args, **kwargs)
            message = attrs.evolve(result.message, content=result.message.content[:-1])
            return attrs.evolve(result, message=message)

        return chat

    monkeypatch.setitem(_replay_vcr.ADAPTERS, "openai-chat", ("/v1", lossy))
    for number, escape in enumerate(ESCAPES):
        chunk = {"choices": [{"index": 0, "delta": {"content": escape + "!"}}]}
        shown = _interaction(
            "https://api.openai.com/v1/chat/completions",
            f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n",
            {"content-type": ["text/event-stream"]},
        )
        # A host and a model name with the escape, in a stream cut short.
        start = {"type": "message_start", "message": {"model": escape}}
        hostile_host = _interaction(
            f"https://evil{escape}.example/v1/messages",
            f"event: message_start\ndata: {json.dumps(start)}\n\n",
            {"content-type": ["text/event-stream"]},
        )
        content = {"interactions": [shown, hostile_host], "version": 1}
        (folder / f"esc{number}{escape}.yaml").write_text(yaml.safe_dump(content), "utf-8")
    (folder / "broken\x1b[2J.yaml").write_text("interactions: [\x1b[2J", "utf-8")
    for flags in ([], ["--markdown"]):
        main(["conformance", "replay-vcr", str(folder), *flags])
        printed = capsys.readouterr()
        for escape in ESCAPES:
            raw = escape in printed.out or escape in printed.err
            attacks.record("vcr-terminal-escape", raw, f"{escape!r} with {flags}")
        assert "differing" in printed.out  # the recorded text is in the difference
        assert repr(ESCAPES[0])[1:-1] in printed.out  # the text is shown, escaped
        control = any(c in printed.out for c in "\x1b\x9b\x07")
        attacks.record("vcr-terminal-escape", control, f"any control character with {flags}")


def _bombs(folder: Path) -> list[str]:
    laughs = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(9):
        name, previous = chr(98 + i), chr(97 + i)
        laughs.append(f"{name}: &{name} [{', '.join(['*' + previous] * 10)}]")
    (folder / "laughs.yaml").write_text("\n".join(laughs) + "\ninteractions: [*j]\n", "utf-8")
    uri = "https://api.openai.com/v1/chat/completions"
    inflating = _interaction(uri, gzip.compress(b" " * (200 << 20)), {"content-encoding": ["gzip"]})
    content = {"interactions": [inflating], "version": 1}
    (folder / "gzip-bomb.yaml").write_text(yaml.safe_dump(content), "utf-8")
    (folder / "deep.yaml").write_text(
        yaml.safe_dump({"interactions": [_interaction(uri, "[" * 200_000, {})]}), "utf-8"
    )
    (folder / "nested-yaml.yaml").write_text("interactions: " + "[" * 100_000, "utf-8")
    (folder / "not-utf8.yaml").write_bytes(b"interactions:\n- \xff\xfe\xfd")
    return ["laughs", "gzip-bomb", "deep", "nested-yaml", "not-utf8"]


def test_bombs_are_bounded_and_reported(
    tmp_path: Path, attacks: AttackTally, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "cassettes"
    folder.mkdir()
    names = _bombs(folder)
    started = time.monotonic()
    try:
        code = main(["conformance", "replay-vcr", str(folder), "--json"])
        raised = ""
    except BaseException as error:  # what the attack wants: a traceback or worse
        code, raised = -1, f"{type(error).__name__}: {error}"[:200]
    seconds = time.monotonic() - started
    printed = capsys.readouterr()
    report = json.loads(printed.out) if code != -1 else {}
    reported = {e["file"] for e in report.get("unreadable_files", [])}
    # A body nested 200,000 deep is read: the adapter's bad_response is what it makes.
    read = ("unreadable", "exact")
    reported |= {e["file"] for e in report.get("exchanges", []) if e["outcome"] in read}
    for name in names:
        handled = f"{name}.yaml" in reported
        attacks.record("vcr-bomb", not handled or bool(raised), f"{name}: {raised or reported}")
    attacks.record("vcr-bomb", seconds > 60, f"took {seconds:.1f} s")
    assert code == 1
