"""The corpus that ships with agentfsm: its index, its fixtures, and the CLI that replays it."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentfsm.adapters.providers import OpenAIChat, RetryPolicy, load_wire_fixture
from agentfsm.adapters.providers._replay import fixture_wire
from agentfsm.cli import main
from agentfsm.conformance import RecordedTarget, run_corpus
from agentfsm.conformance import _bundled as bundled_module
from agentfsm.conformance._bundled import (
    CorpusMissingError,
    bundled_corpus,
    corpus_index,
    index_problems,
)

CORPUS = bundled_corpus()  # a missing corpus fails the collection; it is never skipped
ENTRIES = corpus_index(CORPUS)["exchanges"]


def fixture(entry: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CORPUS / entry["file"]).read_text("utf-8"))
    return data


def test_the_corpus_ships_inside_the_package() -> None:
    assert Path(bundled_module.__file__).resolve().parent / "corpus_data" == CORPUS
    assert not list(CORPUS.rglob("*.py"))  # data only


def test_the_index_matches_the_files() -> None:
    assert index_problems(CORPUS) == []
    index = corpus_index(CORPUS)
    assert (index["count"], len(ENTRIES)) == (80, 80)
    assert len({e["id"] for e in ENTRIES}) == 80
    assert [e["id"] for e in ENTRIES] == sorted(e["id"] for e in ENTRIES)
    assert len({e["id"].split("/")[0] for e in ENTRIES}) == 16  # folders; 15 + compat route
    assert Counter(e["wire"] for e in ENTRIES) == {
        "openai-chat": 51,
        "anthropic": 20,
        "openai-responses": 1,
        None: 8,
    }
    assert Counter(e["kind"] for e in ENTRIES) == {"stream": 37, "error": 29, "completion": 14}
    for entry in ENTRIES:
        assert entry["file"] == f"{entry['id']}.json"
        assert set(entry) == {
            "id", "file", "provider", "api", "wire", "streaming", "kind", "tags",
            "responses", "repository", "commit", "sha256",
        }  # fmt: skip


def test_every_fixture_agrees_with_its_index_entry() -> None:
    for entry in ENTRIES:
        data = fixture(entry)
        loaded = load_wire_fixture(CORPUS / entry["file"])
        assert data["format"] == "agentfsm.wire-fixture/1"
        assert (loaded.name, loaded.provider) == (entry["id"], entry["provider"])
        assert fixture_wire(loaded) == entry["wire"] == data["wire"], entry["id"]
        assert len(loaded.responses) == entry["responses"] > 0
        assert loaded.streaming == entry["streaming"]
        assert entry["api"] == data.get("api_attributed", data["api"])
        source = data["source"]
        assert (source["repository"], source["commit"]) == (entry["repository"], entry["commit"])
        assert isinstance(data["redactions"], list)


def test_the_fixtures_keep_their_source_and_redactions() -> None:
    data = fixture(
        next(e for e in ENTRIES if e["id"].endswith("chat_nonstream_text__crmne-ruby_llm"))
    )
    assert data["source"] == {
        "repository": "crmne/ruby_llm",
        "path": "spec/fixtures/vcr_cassettes/chat_basic_chat_functionality_openai_gpt-4_1-nano_can_have_a_basic_conversation.yml",
        "commit": "f770a00648e95d3ea05e9ef15f074cc332ec71a7",
        "kind": "cassette",
        "format": "Ruby VCR 6 cassette (filter_sensitive_data placeholders like <OPENAI_API_KEY>)",
        "interactions": [0],
    }
    assert data["redactions"] == [
        "header:authorization",
        "header:openai-organization",
        "header:openai-project",
        "header:set-cookie",
    ]
    request = data["interactions"][0]["request"]
    assert ["Authorization", "REDACTED"] in request["headers"]
    assert json.loads(request["body"]["text"])["model"] == "gpt-4.1-nano"
    # Every commit is a full hash where the source names one; no credential survived.
    commits = {e["commit"] for e in ENTRIES}
    assert all(len(c) == 40 for c in commits if c and not c.startswith("n/a"))
    text = "".join((CORPUS / e["file"]).read_text("utf-8") for e in ENTRIES)
    assert "sk-proj-" not in text
    assert "AIzaSy" not in text


def test_response_only_fixtures_name_their_framing() -> None:
    jsonl = [e for e in ENTRIES if fixture(e)["source"]["kind"] == "stream-payloads"]
    assert len(jsonl) == 6
    for entry in jsonl:
        body = load_wire_fixture(CORPUS / entry["file"]).responses[0].body
        assert body.startswith(b"data: {")
        assert body.endswith(b"\n\ndata: [DONE]\n\n")


def test_index_problems_finds_every_kind_of_damage(tmp_path: Path) -> None:
    copy = tmp_path / "corpus"
    shutil.copytree(CORPUS, copy)
    assert index_problems(copy) == []
    first, second = ENTRIES[0]["file"], ENTRIES[1]["file"]
    (copy / first).write_text((copy / first).read_text("utf-8") + " ", "utf-8")
    (copy / second).unlink()
    (copy / "openai" / "stray.json").write_text("{}", "utf-8")
    assert index_problems(copy) == [
        f"{first}: sha256 differs from the index",
        f"{second}: indexed but missing",
        "openai/stray.json: not in the index",
    ]
    with pytest.raises(CorpusMissingError, match=r"index\.json is missing"):
        index_problems(tmp_path)


def test_a_missing_bundled_corpus_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bundled_module, "CORPUS_DIR", tmp_path / "corpus_data")
    with pytest.raises(CorpusMissingError, match="no recorded corpus"):
        bundled_corpus()
    assert main(["conformance", "corpus"]) == 2
    assert "no recorded corpus" in capsys.readouterr().err
    # A corpus whose index lists files that are not there is no better.
    (tmp_path / "corpus_data").mkdir()
    shutil.copy(CORPUS / "index.json", tmp_path / "corpus_data" / "index.json")
    with pytest.raises(CorpusMissingError, match="lacks 80 indexed files"):
        bundled_corpus()


async def test_run_corpus_refuses_a_missing_or_empty_folder(tmp_path: Path) -> None:
    once = RetryPolicy(max_attempts=1)
    target = RecordedTarget(lambda url: OpenAIChat("m", base_url=url, retry=once))
    with pytest.raises(CorpusMissingError, match="is not a folder"):
        await run_corpus(target, tmp_path / "nowhere")
    with pytest.raises(CorpusMissingError, match="no recorded exchanges"):
        await run_corpus(target, tmp_path)


BUNDLED_WIRES = (("openai-chat", 51), ("anthropic", 20))


def _holds_on_every_file(path: Path, wire: str, files: int) -> None:
    report = json.loads(path.read_text("utf-8"))
    assert (report["mode"], report["wire"]) == ("recorded", wire)
    w1 = next(r for r in report["results"] if r["check"] == "W1")
    assert (w1["outcome"], w1["message"]) == ("pass", f"holds on {files} recorded files")
    assert {r["outcome"] for r in report["results"]} == {"pass", "skip"}


def test_cli_corpus_replays_the_bundled_corpus_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --wire, each wire's files through its own adapter: a report per wire."""
    out = tmp_path / "report.json"
    assert main(["conformance", "corpus", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert not out.exists()
    for wire, files in BUNDLED_WIRES:
        assert f"{wire} adapter on recorded corpus ({files} files)" in printed.out
        _holds_on_every_file(tmp_path / f"report.{wire}.json", wire, files)
    responses = json.loads((tmp_path / "report.openai-responses.json").read_text("utf-8"))
    held = {r["check"] for r in responses["results"] if r["outcome"] == "pass"}
    assert held == {"W1", "W5", "E7"}
    assert {r["outcome"] for r in responses["results"]} == {"pass", "skip"}
    assert (
        ": 20 anthropic, 51 openai-chat, 1 openai-responses, 8 of no wire read here\n"
        in printed.err
    )


@pytest.mark.parametrize(("wire", "files"), BUNDLED_WIRES)
def test_cli_corpus_replays_one_wire_of_the_bundled_corpus(
    wire: str, files: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"
    assert main(["conformance", "corpus", "--wire", wire, "--out", str(out)]) == 0
    assert f"on recorded corpus ({files} files)" in capsys.readouterr().out
    _holds_on_every_file(out, wire, files)
