"""scripts/import_wire.py on a small source folder: the fixtures, the index, idempotence."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agentfsm.adapters.providers import load_wire_fixture
from agentfsm.conformance._bundled import corpus_index, index_problems
from agentfsm.conformance._corpus import corpus_files

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "import_wire.py"

CASSETTE = """\
fixture:
  provider: openai
  api: chat.completions
  scenario: non-streaming text
  streaming: false
  genuineness: recorded
  evidence:
  - OpenAI chatcmpl id
source:
  repo: example/recorder
  path: cassettes/text.yml
  commit: 0123456789abcdef0123456789abcdef01234567
  interactions:
  - 3
  format: vcrpy cassette
  transformations:
  - 'resp:gunzipped'
  - 'redacted: header:authorization, header:set-cookie'
interactions:
- source_interaction_index: 3
  recorded_at: Fri, 09 Jan 2026 14:11:41 GMT
  request:
    method: POST
    uri: https://api.example.com/v1/chat/completions
    headers:
      Authorization:
      - REDACTED
    body: '{"model":"m","messages":[]}'
  response:
    status: 200
    status_message: OK
    headers:
      Content-Type:
      - application/json
      Set-Cookie:
      - REDACTED
      - REDACTED
    body: |+
      {"id": "chatcmpl-1", "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}]}

"""

MANIFEST = """\
# Wire fixtures

## Index

### openai

| file | source repo | path | commit | api | scenario | stream | genuineness |
|---|---|---|---|---|---|---|---|
| `text__example.yaml` | example/recorder | `cassettes/text.yml` | `0123456789ab` | chat.completions | text | no | recorded |
| `stream_response_only__example.sse` | example/sdk | `snapshots/a.bin` | `fedcba987654` | chat.completions | a stream | yes | recorded (SDK snapshot) |

### mistral

| file | source repo | path | commit | api | scenario | stream | genuineness |
|---|---|---|---|---|---|---|---|
| `chunks_response_only__example.jsonl` | example/ai | `fixtures/m.chunks.txt` | `fedcba987654` | chat.completions | chunks | yes | recorded; SSE framing stripped |

## Full commit hashes

* example/recorder @ `0123456789abcdef0123456789abcdef01234567` (1 files)
* example/sdk @ `fedcba9876543210fedcba9876543210fedcba98` (1 files)

## Quirks digest (per file; also inside each YAML under fixture.quirks)

* `openai/stream_response_only__example.sse`
  * a byte that is not UTF-8 sits in the stream.
"""

SSE = b'data: {"choices":[{"index":0,"delta":{"content":"\xff"}}]}\r\n\r\ndata: [DONE]\r\n\r\n'
CHUNKS = '{"choices":[{"index":0,"delta":{"content":"a"}}]}\n{"choices":[]}\n'


def script() -> ModuleType:
    """The script as a module (it is not part of the package)."""
    name = "agentfsm_scripts_import_wire"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPT)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses resolve their annotations through it
        spec.loader.exec_module(module)
    return sys.modules[name]


def source(folder: Path) -> Path:
    (folder / "openai").mkdir(parents=True)
    (folder / "mistral").mkdir()
    (folder / "MANIFEST.md").write_text(MANIFEST, "utf-8")
    (folder / "openai" / "text__example.yaml").write_text(CASSETTE, "utf-8")
    (folder / "openai" / "stream_response_only__example.sse").write_bytes(SSE)
    (folder / "mistral" / "chunks_response_only__example.jsonl").write_text(CHUNKS, "utf-8")
    return folder


def read(path: Path) -> Any:
    return json.loads(path.read_text("utf-8"))


def run(module: ModuleType, src: Path, dest: Path) -> int:
    code = module.main(["--source", str(src), "--dest", str(dest)])
    assert isinstance(code, int)
    return code


def test_a_cassette_becomes_a_fixture_with_its_source_and_redactions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dest = source(tmp_path / "wire"), tmp_path / "corpus"
    assert run(script(), src, dest) == 0
    assert "3 fixtures and index.json" in capsys.readouterr().out
    data = read(dest / "openai" / "text__example.json")
    assert data["format"] == "agentfsm.wire-fixture/1"
    assert (data["id"], data["provider"], data["api"], data["wire"]) == (
        "openai/text__example",
        "openai",
        "chat.completions",
        "openai-chat",
    )
    assert data["source"] == {
        "repository": "example/recorder",
        "path": "cassettes/text.yml",
        "commit": "0123456789abcdef0123456789abcdef01234567",
        "kind": "cassette",
        "format": "vcrpy cassette",
        "interactions": [3],
    }
    assert data["redactions"] == ["header:authorization", "header:set-cookie"]
    assert data["transformations"] == ["resp:gunzipped"]
    assert data["evidence"] == ["OpenAI chatcmpl id"]
    [interaction] = data["interactions"]
    assert (interaction["source_index"], interaction["recorded_at"]) == (
        3,
        "Fri, 09 Jan 2026 14:11:41 GMT",
    )
    assert interaction["request"] == {
        "method": "POST",
        "uri": "https://api.example.com/v1/chat/completions",
        "headers": [["Authorization", "REDACTED"]],
        "body": {"encoding": "utf-8", "text": '{"model":"m","messages":[]}'},
    }
    response = interaction["response"]
    assert (response["status"], response["reason"], response["framing"]) == (200, "OK", "http")
    assert response["headers"] == [
        ["Content-Type", "application/json"],
        ["Set-Cookie", "REDACTED"],
        ["Set-Cookie", "REDACTED"],
    ]
    assert response["body"]["text"].endswith('"finish_reason": "stop"}]}\n\n')  # |+ kept
    assert data["imported_from"]["file"] == "openai/text__example.yaml"


def test_response_only_files_take_their_source_from_the_manifest(tmp_path: Path) -> None:
    src, dest = source(tmp_path / "wire"), tmp_path / "corpus"
    assert run(script(), src, dest) == 0
    sse = read(dest / "openai" / "stream_response_only__example.json")
    assert (sse["api"], sse["api_attributed"], sse["streaming"]) == (
        "unknown",
        "chat.completions",
        True,
    )
    assert sse["source"]["commit"] == "fedcba9876543210fedcba9876543210fedcba98"
    assert sse["source"]["kind"] == "stream-body"
    assert sse["quirks"] == ["a byte that is not UTF-8 sits in the stream."]
    body = sse["interactions"][0]["response"]["body"]
    assert body["encoding"] == "base64"  # not UTF-8: the bytes, exactly
    imported = load_wire_fixture(dest / "openai" / "stream_response_only__example.json")
    assert imported.responses[0].body == SSE
    chunks = read(dest / "mistral" / "chunks_response_only__example.json")
    response = chunks["interactions"][0]["response"]
    assert (response["framing"], response["body"]["text"]) == ("sse-data-lines", CHUNKS)
    for name in ("openai/stream_response_only__example", "mistral/chunks_response_only__example"):
        recorded = load_wire_fixture(src / f"{name}.{'sse' if 'openai' in name else 'jsonl'}")
        imported = load_wire_fixture(dest / f"{name}.json")
        assert imported.responses == recorded.responses
        assert imported.name == name


def test_the_index_and_a_second_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module = script()
    src, dest = source(tmp_path / "wire"), tmp_path / "corpus"
    assert run(module, src, dest) == 0
    before = {p: p.read_bytes() for p in sorted(dest.rglob("*.json"))}
    assert index_problems(dest) == []
    index = corpus_index(dest)
    assert (index["count"], index["providers"]) == (3, {"mistral": 1, "openai": 2})
    entry = next(e for e in index["exchanges"] if e["id"] == "openai/text__example")
    assert {k: v for k, v in entry.items() if k != "sha256"} == {
        "id": "openai/text__example",
        "file": "openai/text__example.json",
        "provider": "openai",
        "api": "chat.completions",
        "wire": "openai-chat",
        "streaming": False,
        "kind": "completion",
        "tags": ["non-stream"],
        "responses": 1,
        "repository": "example/recorder",
        "commit": "0123456789abcdef0123456789abcdef01234567",
    }
    assert len(corpus_files(dest, "openai-chat")) == 3
    capsys.readouterr()
    # Byte-identical on a second run; a fixture whose source went away is removed.
    assert run(module, src, dest) == 0
    assert "(0 written, 0 removed)" in capsys.readouterr().out
    assert {p: p.read_bytes() for p in sorted(dest.rglob("*.json"))} == before
    (src / "mistral" / "chunks_response_only__example.jsonl").unlink()
    assert run(module, src, dest) == 0
    assert "(1 written, 1 removed)" in capsys.readouterr().out
    assert not (dest / "mistral").exists()
    assert index_problems(dest) == []


def test_a_source_it_cannot_read_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = script()
    assert run(module, tmp_path / "nowhere", tmp_path / "out") == 2
    (tmp_path / "wire" / "openai").mkdir(parents=True)
    (tmp_path / "wire" / "openai" / "x.sse").write_bytes(b"data: {}\n\n")
    assert run(module, tmp_path / "wire", tmp_path / "out") == 1  # no manifest row for it
    assert "needs a row in MANIFEST.md" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def responses_cassette() -> str:
    """A Responses stream written by these tests (not recorded), as a source cassette."""
    from agentfsm.testing import responses_events

    body = "".join(responses_events("Hi from Responses."))
    indented = "\n".join("      " + line for line in body.splitlines())
    return f"""\
fixture:
  provider: openai
  api: responses
  scenario: streamed text (written by the agentfsm tests)
  streaming: true
  genuineness: written by the agentfsm tests, not recorded
source:
  repo: example/tests
  path: cassettes/responses.yml
  commit: 0123456789abcdef0123456789abcdef01234567
  format: vcrpy cassette
interactions:
- request:
    method: POST
    uri: https://api.example.com/v1/responses
    body: '{{"model":"m","input":[]}}'
  response:
    status: 200
    headers:
      Content-Type:
      - text/event-stream
    body: |+
{indented}

"""


def test_a_responses_cassette_is_marked_and_replays(tmp_path: Path) -> None:
    import asyncio

    import httpx

    from agentfsm import UserMessage
    from agentfsm.adapters.providers import OpenAIResponses, ReplayTransport
    from agentfsm.adapters.providers._replay import fixture_wire

    src, dest = tmp_path / "wire", tmp_path / "corpus"
    (src / "openai").mkdir(parents=True)
    (src / "MANIFEST.md").write_text("# Wire fixtures\n", "utf-8")
    (src / "openai" / "stream_text_responses__tests.yaml").write_text(responses_cassette(), "utf-8")
    assert run(script(), src, dest) == 0
    path = dest / "openai" / "stream_text_responses__tests.json"
    data = read(path)
    assert (data["api"], data["wire"]) == ("responses", "openai-responses")
    assert read(dest / "index.json")["exchanges"][0]["wire"] == "openai-responses"
    fixture = load_wire_fixture(path)
    assert fixture_wire(fixture) == "openai-responses"

    async def replay() -> str:
        async with httpx.AsyncClient(transport=ReplayTransport(fixture.responses)) as client:
            chat = OpenAIResponses("m", base_url="http://replay/v1", http_client=client)
            result = await chat([UserMessage("hi")], [])
        return result.message.content

    assert asyncio.run(replay()) == "Hi from Responses."
