#!/usr/bin/env python3
"""Import a folder of recorded provider exchanges into agentfsm's wire-fixture format.

    python scripts/import_wire.py [--source ../shared/wire] [--dest DIR]

(``--dest`` defaults to ``src/agentfsm/conformance/corpus_data``, the bundled corpus.)

The source folder holds one folder per provider with three kinds of file, described by its
``MANIFEST.md``: ``*.yaml`` cassettes (``fixture``/``source``/``interactions``), ``*.sse``
raw ``text/event-stream`` bodies and ``*.jsonl`` stream payloads (one SSE ``data:`` payload
a line). For each file one JSON fixture is written to ``DEST/<provider>/<name>.json`` (the
format is ``agentfsm.wire-fixture/1``, described in docs/conformance.md), and
``DEST/index.json`` lists them all with the SHA-256 of each fixture file.

Recorded bodies are kept exactly: as text when they are valid UTF-8, else base64. The
source of every file (repository, path, full commit), its redactions and its other
transformations are kept as fields. ``.sse`` and ``.jsonl`` files record nothing but a
body, so their source, API and scenario come from the manifest's index tables.

The output is deterministic: running the script twice writes byte-identical files, and
fixture files of an earlier run that the source no longer has are removed. Apart from
PyYAML (a dependency of agentfsm itself) only the standard library is used.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

FIXTURE_FORMAT = "agentfsm.wire-fixture/1"
INDEX_FORMAT = "agentfsm.wire-index/1"
SUFFIXES = (".yaml", ".sse", ".jsonl")
DEFAULT_SOURCE = Path(__file__).resolve().parents[1] / ".." / "shared" / "wire"
DEFAULT_DEST = (
    Path(__file__).resolve().parents[1] / "src" / "agentfsm" / "conformance" / "corpus_data"
)

_SSE_ASSUMED = "status and headers not recorded by the source: 200 and text/event-stream assumed"
_JSONL_FRAMING = (
    "body is one SSE data payload a line, the framing stripped by the source recorder; a "
    "replay sends each line as 'data: <line>' followed by a blank line, then 'data: [DONE]'"
)


class SourceError(Exception):
    """The source folder cannot be imported as it is."""


@dataclass
class ManifestRow:
    """One row of a provider table of ``MANIFEST.md``."""

    repository: str
    path: str
    commit: str
    api: str
    scenario: str
    streaming: bool
    genuineness: str
    quirks: list[str] = field(default_factory=list)


def _cell(text: str) -> str:
    text = text.strip()
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == "`" else text


def read_manifest(text: str) -> dict[str, ManifestRow]:
    """The manifest's index rows by ``provider/file``, full commits and quirks filled in."""
    rows: dict[str, ManifestRow] = {}
    commits: dict[str, list[str]] = {}
    provider = ""
    section = ""
    current_quirks: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip().lower()
            continue
        if line.startswith("### "):
            provider = line[4:].strip()
            continue
        if section == "index" and line.startswith("| `"):
            cells = line.strip().strip("|").split("|")
            if len(cells) != 8:
                raise SourceError(f"manifest row with {len(cells)} cells: {line[:80]}")
            name, repo, path, commit, api, scenario, stream, genuine = (_cell(c) for c in cells)
            rows[f"{provider}/{name}"] = ManifestRow(
                repo, path, commit, api, scenario, stream == "yes", genuine
            )
        elif section.startswith("full commit"):
            found = re.match(r"\* (\S+) @ `([0-9a-f]{40})`", line)
            if found:
                commits.setdefault(found[1], []).append(found[2])
        elif section.startswith("quirks digest"):
            file_line = re.match(r"\* `([^`]+)`\s*$", line)
            if file_line:
                current_quirks = rows[file_line[1]].quirks if file_line[1] in rows else None
            elif line.startswith("  * ") and current_quirks is not None:
                current_quirks.append(line[4:].strip())
    for row in rows.values():
        full = [c for c in commits.get(row.repository, []) if c.startswith(row.commit)]
        if len(full) == 1 and len(row.commit) >= 7:
            row.commit = full[0]
    return rows


def encode_body(data: bytes | None) -> dict[str, str] | None:
    """A body as data: UTF-8 text when it decodes, else base64."""
    if data is None:
        return None
    try:
        return {"encoding": "utf-8", "text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"encoding": "base64", "base64": base64.b64encode(data).decode("ascii")}


def _headers(raw: Any) -> list[list[str]] | None:
    """Recorded headers as ``[name, value]`` pairs in recorded order (``None``: not recorded)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise SourceError(f"headers are not a mapping: {raw!r:.80}")
    pairs: list[list[str]] = []
    for name, value in raw.items():
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, str):
                raise SourceError(f"header {name!r} has a non-string value {item!r}")
            pairs.append([str(name), item])
    return pairs


def _text_body(raw: Any) -> bytes | None:
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise SourceError(f"a body is not a string: {type(raw).__name__}")
    return raw.encode("utf-8")


def split_transformations(items: Iterable[str]) -> tuple[list[str], list[str]]:
    """``redacted: a, b`` entries become redactions ``[a, b]``; the rest stays as it is."""
    redactions: list[str] = []
    others: list[str] = []
    for item in items:
        if item.startswith("redacted:"):
            redactions.extend(p.strip() for p in item[len("redacted:") :].split(",") if p.strip())
        else:
            others.append(item)
    return redactions, others


def _interaction(raw: Mapping[str, Any]) -> dict[str, Any]:
    request = raw.get("request")
    response = raw.get("response") or {}
    out: dict[str, Any] = {}
    if "source_interaction_index" in raw:
        out["source_index"] = raw["source_interaction_index"]
    if "recorded_at" in raw:
        out["recorded_at"] = raw["recorded_at"]
    if request is None:
        out["request"] = None
    else:
        out["request"] = {
            "method": request.get("method"),
            "uri": request.get("uri"),
            "headers": _headers(request.get("headers")),
            "body": encode_body(_text_body(request.get("body"))),
        }
        if "body_note" in request:
            out["request"]["note"] = request["body_note"]
    status = response.get("status")
    code = status.get("code") if isinstance(status, Mapping) else status
    if not isinstance(code, int):
        raise SourceError(f"a response status is not a number: {code!r}")
    out["response"] = {
        "status": int(code),
        "reason": response.get("status_message"),
        "headers": _headers(response.get("headers")),
        "framing": "http",
        "body": encode_body(_text_body(response.get("body"))),
    }
    if "body_note" in response:
        out["response"]["note"] = response["body_note"]
    return out


def _from_yaml(relative: str, data: Mapping[str, Any]) -> dict[str, Any]:
    meta = data.get("fixture") or {}
    src = data.get("source") or {}
    redactions, transformations = split_transformations(src.get("transformations") or [])
    source: dict[str, Any] = {
        "repository": src.get("repo"),
        "path": src.get("path"),
        "commit": src.get("commit"),
        "kind": src.get("kind", "cassette"),
        "format": src.get("format"),
        "interactions": src.get("interactions"),
    }
    for extra in ("url", "date", "corroboration"):
        if extra in src:
            source[extra] = src[extra]
    return {
        "provider": str(meta.get("provider", relative.split("/")[0])),
        "api": str(meta.get("api", "unknown")),
        "streaming": bool(meta.get("streaming", False)),
        "scenario": meta.get("scenario"),
        "genuineness": meta.get("genuineness"),
        "evidence": list(meta.get("evidence") or []),
        "quirks": list(meta.get("quirks") or []),
        "source": source,
        "redactions": redactions,
        "transformations": transformations,
        "interactions": [_interaction(i) for i in data.get("interactions") or []],
    }


def _from_body(relative: str, body: bytes, row: ManifestRow | None) -> dict[str, Any]:
    if row is None:
        raise SourceError(f"{relative}: a response-only file needs a row in MANIFEST.md")
    jsonl = relative.endswith(".jsonl")
    source = {
        "repository": row.repository,
        "path": row.path,
        "commit": row.commit,
        "kind": "stream-payloads" if jsonl else "stream-body",
        "format": None,
        "interactions": None,
    }
    response = {
        "status": 200,
        "reason": None,
        "headers": [["content-type", "text/event-stream"]],
        "framing": "sse-data-lines" if jsonl else "http",
        "body": encode_body(body),
        "note": _JSONL_FRAMING if jsonl else _SSE_ASSUMED,
    }
    return {
        "provider": relative.split("/")[0],
        # The file records a body only: the API the manifest names is an attribution.
        "api": "unknown",
        "api_attributed": row.api,
        "streaming": True,
        "scenario": row.scenario,
        "genuineness": row.genuineness,
        "evidence": [],
        "quirks": row.quirks,
        "source": source,
        "redactions": [],
        "transformations": [],
        "interactions": [{"request": None, "response": response}],
    }


def fixture_wire(provider: str, api: str) -> str | None:
    """Which of the project's adapters reads a fixture (as ``replay.fixture_wire`` decides)."""
    if provider == "anthropic" or api == "messages":
        return "anthropic"
    if api == "responses":
        return "openai-responses"
    if provider == "gemini" or api not in ("chat.completions", "unknown"):
        return None
    return "openai-chat"


def _in_stream_error(body: dict[str, str] | None) -> bool:
    text = (body or {}).get("text", "")
    return bool(re.search(r'^event: error|^data: \{"error"|"type":\s*"error"', text, re.M))


def tags(fixture: Mapping[str, Any]) -> tuple[str, list[str]]:
    """The fixture's kind (``error``/``stream``/``completion``) and its tags."""
    responses = [i["response"] for i in fixture["interactions"]]
    name = fixture["id"].split("/", 1)[1]
    found: set[str] = {"stream" if fixture["streaming"] else "non-stream"}
    if any(r["status"] >= 400 for r in responses):
        found.add("http-error")
    if fixture["streaming"] and any(
        r["status"] < 400 and _in_stream_error(r["body"]) for r in responses
    ):
        found.add("stream-error")
    if all(i["request"] is None for i in fixture["interactions"]):
        found.add("response-only")
    if len(responses) > 1:
        found.add("multi-response")
    for word, tag in (
        ("tool", "tools"),
        ("function", "tools"),
        ("reasoning", "reasoning"),
        ("thinking", "reasoning"),
        ("cache", "cache"),
        ("cached", "cache"),
        ("refusal", "refusal"),
    ):
        if word in name.lower():
            found.add(tag)
    genuineness = str(fixture.get("genuineness") or "")
    for origin in ("user-reported", "log-derived"):
        if genuineness.startswith(origin):
            found.add(origin)
    kind = (
        "error"
        if found & {"http-error", "stream-error"}
        else ("stream" if fixture["streaming"] else "completion")
    )
    return kind, sorted(found)


def convert(relative: str, raw: bytes, manifest: Mapping[str, ManifestRow]) -> dict[str, Any]:
    """One source file (``provider/name.ext``) as a fixture."""
    stem = relative.rsplit(".", 1)[0]
    if relative.endswith(".yaml"):
        data = yaml.safe_load(raw.decode("utf-8"))
        if not isinstance(data, Mapping):
            raise SourceError(f"{relative}: not a YAML mapping")
        body = _from_yaml(relative, data)
    else:
        body = _from_body(relative, raw, manifest.get(relative))
    fixture: dict[str, Any] = {"format": FIXTURE_FORMAT, "id": stem}
    for key, value in body.items():
        if key == "streaming":
            fixture["wire"] = fixture_wire(body["provider"], body["api"])
        fixture[key] = value
    fixture["imported_from"] = {"file": relative, "sha256": hashlib.sha256(raw).hexdigest()}
    return fixture


_PAIR = re.compile(r'\[\n\s+("(?:[^"\\\n]|\\.)*"),\n\s+("(?:[^"\\\n]|\\.)*")\n\s+\]')


def dump(data: Any) -> bytes:
    """The one JSON layout of every written file: indented, a header pair on one line."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return (_PAIR.sub(r"[\1, \2]", text) + "\n").encode("utf-8")


def source_files(source: Path) -> list[str]:
    found = sorted(
        p.relative_to(source).as_posix()
        for p in source.glob("*/*")
        if p.is_file() and p.suffix in SUFFIXES
    )
    if not found:
        raise SourceError(f"no recorded files (*/*{', */*'.join(SUFFIXES)}) in {source}")
    return found


def build(source: Path) -> dict[str, bytes]:
    """Every output file (relative path → bytes), index included."""
    manifest_file = source / "MANIFEST.md"
    manifest = read_manifest(manifest_file.read_text("utf-8")) if manifest_file.is_file() else {}
    out: dict[str, bytes] = {}
    entries: list[dict[str, Any]] = []
    for relative in source_files(source):
        fixture = convert(relative, (source / relative).read_bytes(), manifest)
        file = f"{fixture['id']}.json"
        out[file] = dump(fixture)
        kind, found = tags(fixture)
        entries.append(
            {
                "id": fixture["id"],
                "file": file,
                "provider": fixture["provider"],
                "api": fixture.get("api_attributed", fixture["api"]),
                "wire": fixture["wire"],
                "streaming": fixture["streaming"],
                "kind": kind,
                "tags": found,
                "responses": len(fixture["interactions"]),
                "repository": fixture["source"]["repository"],
                "commit": fixture["source"]["commit"],
                "sha256": hashlib.sha256(out[file]).hexdigest(),
            }
        )
    providers: dict[str, int] = {}
    for entry in entries:
        providers[entry["provider"]] = providers.get(entry["provider"], 0) + 1
    index = {
        "format": INDEX_FORMAT,
        "fixture_format": FIXTURE_FORMAT,
        "count": len(entries),
        "providers": dict(sorted(providers.items())),
        "exchanges": entries,
    }
    out["index.json"] = dump(index)
    return out


def write(dest: Path, files: Mapping[str, bytes]) -> tuple[int, int]:
    """Write ``files`` under ``dest``; remove the fixtures of an earlier run no longer made.

    Returns (files written or changed, files removed)."""
    dest.mkdir(parents=True, exist_ok=True)
    changed = removed = 0
    for relative, data in sorted(files.items()):
        target = dest / relative
        if target.is_file() and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        changed += 1
    for stale in sorted(dest.glob("*/*.json")):
        if stale.relative_to(dest).as_posix() not in files:
            stale.unlink()
            removed += 1
            if not any(stale.parent.iterdir()):
                stale.parent.rmdir()
    return changed, removed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, metavar="DIR")
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, metavar="DIR")
    args = parser.parse_args(argv)
    source: Path = args.source
    if not source.is_dir():
        print(f"import_wire: no source folder {source}", file=sys.stderr)
        return 2
    try:
        files = build(source)
    except (SourceError, yaml.YAMLError, KeyError, TypeError, ValueError) as error:
        print(f"import_wire: {error}", file=sys.stderr)
        return 1
    changed, removed = write(args.dest, files)
    print(
        f"import_wire: {len(files) - 1} fixtures and index.json in {args.dest} "
        f"({changed} written, {removed} removed)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
