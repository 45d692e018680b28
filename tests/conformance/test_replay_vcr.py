"""``replay-vcr`` on cassettes the project records itself: exact, differing, crashed, and
the unreadable, reported without a traceback; files that are not cassettes skipped."""

from __future__ import annotations

import asyncio
import copy
import gzip
import json
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentfsm.adapters.providers import OpenAIChat, ProviderError, RetryPolicy
from agentfsm.cli import main
from agentfsm.conformance import _replay_vcr, _vcr
from agentfsm.conformance._reading import Answer, read_recorded
from agentfsm.conformance._replay_vcr import replay_vcr
from agentfsm.conformance._vcr import read_cassette
from agentfsm.engine._messages import AssistantMessage, ChatResult, Message, ToolSpec
from agentfsm.engine._protocols import ChatDelta, DeltaHandler, SupportsAbort

from .vcr_cassettes import ANSWER, KEY, Form, cassette, record, scenarios, write

FORMS: tuple[Form, ...] = ("vcrpy", "pydantic-ai", "ruby", "vcrpy-httpx")


@pytest.fixture(scope="module")
def recorded() -> list[dict[str, Any]]:
    return asyncio.run(record(scenarios()))


def _body(content: dict[str, Any], index: int) -> str:
    body = content["interactions"][index]["response"]["body"]["string"]
    assert isinstance(body, str)
    return body


async def test_own_cassettes_replay_exactly_in_every_form(
    tmp_path: Path, recorded: list[dict[str, Any]]
) -> None:
    for form in FORMS:
        write(tmp_path / "nested" / f"{form}.yaml", cassette(recorded, form))
    report = await replay_vcr(tmp_path)
    assert report.files == 4
    assert report.other == 4  # GET-style /v1/models, once per cassette
    outcomes = {(r.file, r.index): r.outcome for r in report.results}
    assert len(outcomes) == 40
    assert set(outcomes.values()) == {"exact"}
    assert ("nested/vcrpy.yaml", 5) in outcomes  # the gzip body, decoded
    counts = {wire: c for (_, wire), c in report.providers().items()}
    assert counts["openai-chat"]["exact"] == 24
    assert counts["anthropic"]["exact"] == 12
    assert counts["openai-responses"]["exact"] == 4  # a streamed Responses answer
    assert report.judged == 40
    assert report.passed


def test_a_gzip_body_stored_as_bytes_is_replayed_as_sent(
    tmp_path: Path, recorded: list[dict[str, Any]]
) -> None:
    """Bytes still in their coding keep their ``content-encoding``: each reader undoes it
    itself. A body stored as text was decoded by its recorder: replayed without it."""
    raw = recorded[5]["body"]
    assert raw.startswith(b"\x1f\x8b")
    assert json.loads(gzip.decompress(raw))["choices"][0]["message"]["content"] == ANSWER
    for form in FORMS:
        path = write(tmp_path / f"{form}.yaml", cassette(recorded, form))
        assert (b"!!binary" in path.read_bytes()) == (form in ("vcrpy", "pydantic-ai"))
        response = read_cassette(path).exchanges[5].response
        assert response is not None
        codings = [v for k, v in response.headers if k.lower() == "content-encoding"]
        if form == "vcrpy-httpx":  # httpx's decoded content, as text
            assert json.loads(response.body)["choices"][0]["message"]["content"] == ANSWER
            assert codings == []
        else:
            assert (response.body, codings) == (raw, ["gzip"])
        reading = read_recorded(response, "openai-chat")
        assert isinstance(reading.outcome, Answer)
        assert reading.outcome.text == ANSWER


async def test_a_cut_stream_and_a_cut_body_are_read_as_the_errors_they_make(
    tmp_path: Path, recorded: list[dict[str, Any]]
) -> None:
    content = cassette(recorded)
    stream = _body(content, 6)
    content["interactions"][6]["response"]["body"]["string"] = stream[
        : stream.index("event: content_block_stop")
    ]
    body = _body(content, 7)
    content["interactions"][7]["response"]["body"]["string"] = body[: len(body) // 2]
    write(tmp_path / "tampered.yaml", content)
    report = await replay_vcr(tmp_path)
    assert {r.outcome for r in report.results} == {"exact"}
    assert report.passed


async def test_an_adapter_that_reads_a_cut_stream_as_an_answer_differs(
    tmp_path: Path, recorded: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Messages stream cut before its stop reason is a broken connection, not an answer:
    an adapter that returns what it has is caught on the outcome, in every delivery."""
    content = cassette(recorded[6:7])
    stream = _body(content, 0)
    content["interactions"][0]["response"]["body"]["string"] = stream[
        : stream.index("event: content_block_stop")
    ]
    write(tmp_path / "cut.yaml", content)

    def lenient(url: str, client: httpx.AsyncClient | None) -> Any:
        real = _replay_vcr._anthropic(url, client)

        async def chat(*args: Any, **kwargs: Any) -> ChatResult:
            try:
                return await real(*args, **kwargs)
            except ProviderError:
                return ChatResult(AssistantMessage(ANSWER), finish_reason="stop")

        return chat

    monkeypatch.setitem(_replay_vcr.ADAPTERS, "anthropic", ("", lenient))
    (result,) = (await replay_vcr(tmp_path)).results
    assert result.outcome == "differing"
    assert result.fields == ("outcome",)
    assert [d.delivery for d in result.differences] == ["whole", "pieces", "loopback"]
    assert result.detail == (f"whole: outcome: expected an error; got an answer ({ANSWER!r})")


class LineAtATime:
    """A real, naive Chat Completions reader: it parses each network read on its own, as
    if a read always ended on a line; what it cannot parse it drops."""

    def __init__(self, url: str, client: httpx.AsyncClient | None) -> None:
        self.url, self.client = url, client or httpx.AsyncClient()

    async def __call__(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        signal: SupportsAbort | None = None,
        on_delta: DeltaHandler | None = None,
    ) -> ChatResult:
        text = ""
        async with self.client.stream("POST", self.url + "/chat/completions", json={}) as reply:
            async for piece in reply.aiter_bytes():
                for line in piece.decode("utf-8", "replace").splitlines():
                    try:
                        payload = json.loads(line.removeprefix("data:"))
                    except ValueError:
                        continue
                    choices = payload.get("choices") if isinstance(payload, dict) else None
                    for choice in choices if isinstance(choices, list) else []:
                        part = (choice.get("delta") or {}).get("content") or ""
                        text += part
                        if on_delta is not None and part:
                            on_delta(ChatDelta("text", part))
        return ChatResult(AssistantMessage(text), finish_reason="stop", model="fake-model")

    async def aclose(self) -> None:
        await self.client.aclose()


async def test_a_reader_that_loses_split_lines_differs_in_pieces(
    tmp_path: Path, recorded: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "text.yaml", cassette(recorded[:1]))
    monkeypatch.setitem(_replay_vcr.ADAPTERS, "openai-chat", ("/v1", LineAtATime))
    report = await replay_vcr(tmp_path)
    (result,) = report.results
    assert result.outcome == "differing"
    pieces = {d.field: d for d in result.differences if d.delivery == "pieces"}
    assert pieces["text"].expected == repr(ANSWER)  # what the bytes say
    assert pieces["text"].got != pieces["text"].expected
    assert pieces["streamed text"].expected == repr(ANSWER)
    whole = {d.field for d in result.differences if d.delivery == "whole"}
    assert "text" not in whole  # read in one piece, the naive reader gets the text right


async def test_the_three_deliveries_each_build_their_own_adapter(
    tmp_path: Path, recorded: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def spy(url: str, client: httpx.AsyncClient | None) -> OpenAIChat:
        seen.append("loopback" if client is None else "client")
        return OpenAIChat("m", base_url=url, http_client=client, retry=RetryPolicy(max_attempts=1))

    write(tmp_path / "text.yaml", cassette(recorded[:1]))
    monkeypatch.setitem(_replay_vcr.ADAPTERS, "openai-chat", ("/v1", spy))
    (result,) = (await replay_vcr(tmp_path)).results
    assert result.outcome == "exact"
    assert seen == ["client", "client", "loopback"]


async def test_an_adapter_that_raises_is_crashed(
    tmp_path: Path, recorded: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Broken(LineAtATime):
        async def __call__(self, *args: Any, **kwargs: Any) -> ChatResult:
            payload: dict[str, ChatResult] = {}
            return payload["choices"]  # the reader's bug: a KeyError

    write(tmp_path / "text.yaml", cassette(recorded[:1]))
    monkeypatch.setitem(_replay_vcr.ADAPTERS, "openai-chat", ("/v1", Broken))
    (result,) = (await replay_vcr(tmp_path)).results
    assert (result.outcome, result.detail) == ("crashed", "whole: KeyError: 'choices'")


def _garbage(folder: Path, recorded: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "not-yaml.yaml").write_text("interactions: [\n  - {", "utf-8")
    (folder / "binary.yml").write_bytes(b"\xff\xfe\x00garbage")
    (folder / "no-interactions.yaml").write_text("version: 1\n", "utf-8")
    (folder / "scalar.yaml").write_text("just a string\n", "utf-8")
    laughs = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    laughs += [
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]" for i in range(8)
    ]
    (folder / "laughs.yaml").write_text("\n".join(laughs) + "\ninteractions: [*i]\n", "utf-8")
    content = cassette(recorded[:2])
    bad = copy.deepcopy(content)
    bad["interactions"][0]["response"]["status"] = {"code": "abc"}
    bad["interactions"][1]["response"]["body"] = {"string": b"\x1f\x8bnot gzip at all"}
    bad["interactions"][1]["response"]["headers"]["content-encoding"] = ["gzip"]
    write(folder / "bad-exchanges.yaml", bad)
    bomb = copy.deepcopy(content)
    bomb["interactions"][1]["response"]["body"] = {"string": gzip.compress(b"0" * (70 << 20))}
    bomb["interactions"][1]["response"]["headers"]["content-encoding"] = ["gzip"]
    bomb["interactions"][0]["response"]["body"] = {"string": b"\x00\x01"}
    bomb["interactions"][0]["response"]["headers"]["content-encoding"] = ["br"]
    write(folder / "bomb.yaml", bomb)


async def test_garbage_is_reported_unreadable_not_raised(
    tmp_path: Path, recorded: list[dict[str, Any]]
) -> None:
    _garbage(tmp_path, recorded)
    report = await replay_vcr(tmp_path)
    problems = dict(report.unreadable)
    assert problems["not-yaml.yaml"].startswith("not valid YAML")
    assert problems["binary.yml"].startswith("cannot be read as UTF-8")
    assert "YAML aliases" in problems["laughs.yaml"]
    assert dict(report.skipped) == {
        "no-interactions.yaml": "not a VCR cassette: no list of interactions",
        "scalar.yaml": "not a VCR cassette: no list of interactions",
    }
    details = {(r.file, r.index): (r.outcome, r.detail) for r in report.results}
    assert details[("bad-exchanges.yaml", 0)] == ("unreadable", "a status code 'abc'")
    # A gzip body that does not decode is a bad_response, which the adapter says too.
    assert details[("bad-exchanges.yaml", 1)] == ("exact", "")
    assert details[("bomb.yaml", 0)] == (
        "unjudged",
        "a body in the br content encoding, which this reading does not undo",
    )
    # 70 MiB once inflated: past Limits.max_body_bytes, a too_large error for both readings.
    assert details[("bomb.yaml", 1)] == ("exact", "")
    assert not report.passed


async def test_a_file_over_the_size_limit_is_not_read(
    tmp_path: Path, recorded: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "big.yaml", cassette(recorded))
    monkeypatch.setattr(_vcr, "MAX_FILE", path.stat().st_size - 1)
    report = await replay_vcr(tmp_path)
    assert report.results == []
    assert report.unreadable == [
        ("big.yaml", f"{path.stat().st_size} bytes, over the limit of {_vcr.MAX_FILE}")
    ]


@pytest.mark.skipif(not Path("/proc/self/smaps").is_file(), reason="needs Linux's /proc")
async def test_a_file_holding_more_than_its_size_says_is_read_to_the_bound_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link to a file of /proc: its size says 0, its reading gives more (here more than
    the bound; /proc/self/pagemap would give gigabytes)."""
    source = Path("/proc/self/smaps")
    (tmp_path / "proc.yaml").symlink_to(source)
    monkeypatch.setattr(_vcr, "MAX_FILE", 2048)
    assert source.stat().st_size == 0
    assert len(source.read_bytes()) > _vcr.MAX_FILE
    report = await replay_vcr(tmp_path)
    assert report.results == []
    assert report.unreadable == [("proc.yaml", "more than 2048 bytes, over the limit")]


def test_cli_reports_per_provider_and_exits_by_outcome(
    tmp_path: Path, recorded: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good"
    write(good / "own.yaml", cassette(recorded))
    (good / "settings.yaml").write_text("model: gpt-4o\n", "utf-8")  # not a cassette
    assert main(["conformance", "replay-vcr", str(good)]) == 0
    out = capsys.readouterr().out
    assert "10 exchanges of a known wire (10 exact); 1 other interactions left out; " in out
    assert "1 file skipped (not cassettes)" in out
    host = recorded[0]["uri"].split("/")[2]
    assert f"  {host} (openai-chat): 6 exact" in out
    assert f"  {host} (anthropic): 3 exact" in out
    assert f"  {host} (openai-responses): 1 exact" in out

    markdown, report = tmp_path / "r.md", tmp_path / "r.json"
    code = main(
        ["conformance", "replay-vcr", str(good), "--markdown", str(markdown), "--json", str(report)]
    )
    assert code == 0
    assert f"| {host} | openai-chat | 6 | 0 | 0 | 0 | 0 | 0 |" in markdown.read_text("utf-8")
    data = json.loads(report.read_text("utf-8"))
    assert data["format"] == "agentfsm.vcr-replay/1"
    assert data["skipped_files"] == [
        {"file": "settings.yaml", "reason": "not a VCR cassette: no list of interactions"}
    ]
    assert data["deliveries"] == ["whole", "pieces", "loopback"]
    assert {(p["wire"], p["exact"]) for p in data["providers"]} >= {("openai-chat", 6)}

    bad = tmp_path / "bad"
    _garbage(bad, recorded)
    capsys.readouterr()
    assert main(["conformance", "replay-vcr", str(bad), "--markdown"]) == 1
    printed = capsys.readouterr()
    assert "Traceback" not in printed.out + printed.err
    assert "| not-yaml.yaml | | | unreadable file | | not valid YAML" in printed.out
    assert main(["conformance", "replay-vcr", str(tmp_path / "missing")]) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["conformance", "replay-vcr", str(empty)]) == 1
    assert "nothing judged" in capsys.readouterr().err


def test_no_header_or_key_reaches_any_report(
    tmp_path: Path, recorded: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "own.yaml", cassette(recorded, "vcrpy"))
    write(tmp_path / "ruby.yaml", cassette(recorded, "ruby"))
    out = tmp_path / "out"
    out.mkdir()
    for flags in ([], ["--markdown"], ["--json"], ["--markdown", str(out / "r.md")]):
        main(["conformance", "replay-vcr", str(tmp_path), *flags])
    printed = capsys.readouterr()
    text = printed.out + printed.err + (out / "r.md").read_text("utf-8")
    assert KEY not in text
    assert "Bearer" not in text
    assert "set-cookie" not in text.lower()


async def test_deflate_bodies_zlib_wrapped_or_raw_replay_exactly(
    tmp_path: Path, recorded: list[dict[str, Any]]
) -> None:
    plain = recorded[1]["body"]
    raw_deflate = zlib.compressobj(wbits=-15)
    bodies = {
        "zlib": zlib.compress(plain),
        "raw": raw_deflate.compress(plain) + raw_deflate.flush(),
    }
    for name, body in bodies.items():
        content = cassette(recorded[1:2])
        content["interactions"][0]["response"]["body"] = {"string": body}
        content["interactions"][0]["response"]["headers"]["content-encoding"] = ["deflate"]
        write(tmp_path / f"{name}.yaml", content)
    report = await replay_vcr(tmp_path)
    assert [(r.file, r.outcome) for r in report.results] == [
        ("raw.yaml", "exact"),
        ("zlib.yaml", "exact"),
    ]
