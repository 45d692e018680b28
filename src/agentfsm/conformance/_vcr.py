"""Reading users' cassettes: the exchanges of the wires the project speaks.

Two formats. A VCR.py cassette is YAML (``interactions: [{request: {method, uri, body,
headers}, response: {status: {code, message}, headers, body: {string: …}}}]``), the format
vcrpy writes and pydantic-ai, LangChain, Mirascope and LiteLLM record with. A response body
may be a string, bytes (``!!binary``, base64 in the file), Ruby VCR's ``base64_string``, or
pydantic-ai's ``parsed_body`` (the JSON body, parsed); older vcrpy versions wrote httpx
responses as ``{status_code, headers, content}``, the content decoded. A HAR file
(``*.har``: ``{"log": {"entries": [{request: {method, url}, response: {status, headers:
[{name, value}], content: {mimeType, text, encoding}}}]}}``) is what Polly.JS records with
(Mirascope's TypeScript tests); its ``content.text`` is the body (``encoding: base64`` for
bytes), and its ``mimeType`` stands for a ``content-type`` header the entry lacks.

Bodies are kept as the server sent them: stored as bytes (``!!binary``, ``base64_string``,
HAR's base64) and still in the coding their ``content-encoding`` header names (gzip bytes
open with its magic number; a deflate body does not read as JSON or an event stream), they
keep the header, and each reader undoes the coding itself. A body stored as text, or bytes
no longer in their coding, was decoded by its recorder: the header is dropped, the bytes
replayed as they are.

Exchanges are picked by the path of their request (:data:`VCR_WIRES`). Request headers
(where keys live) are never read; response headers are kept for the replay only, and
reports never print them. A file that parses but is no cassette (a YAML file without
``interactions``, a ``.har`` without ``log.entries``) is :attr:`Cassette.skipped`, not an
error. A recorded body that disagrees with its own ``content-length`` is marked not
:attr:`~agentfsm.adapters.providers._replay.RecordedResponse.whole` (the recorder cut or
lost part of it).

Everything here is bounded: a file over :data:`MAX_FILE` bytes is not read, YAML is loaded
with the safe loader, and a structure that expands (YAML aliases) past :data:`MAX_NODES`
nodes is refused. A YAML file is only built into values once its shape says it is a
cassette (a mapping with ``interactions``): any other (several documents, tags of other
tools such as CloudFormation's ``!Ref``, dates that do not exist) is skipped, not an error.
No message here holds a header's value.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from attrs import frozen

from agentfsm.adapters.providers import RecordedResponse

__all__ = [
    "MAX_FILE",
    "MAX_NODES",
    "SUFFIXES",
    "VCR_WIRES",
    "Cassette",
    "CassetteError",
    "NotACassette",
    "VcrExchange",
    "cassette_files",
    "read_cassette",
    "request_wire",
]

VCR_WIRES: tuple[tuple[str, str], ...] = (
    ("/chat/completions", "openai-chat"),
    ("/v1/messages", "anthropic"),
    ("/responses", "openai-responses"),
)
"""Request path ending -> the wire it speaks, first match wins."""

MAX_FILE = 32 * 1024 * 1024
"""Bytes of one cassette file; a larger file is reported, not read."""
MAX_NODES = 2_000_000
"""Nodes one cassette may hold once its YAML aliases are expanded."""

_DROP = {"content-length", "transfer-encoding", "connection"}


class CassetteError(ValueError):
    """A cassette, or one of its exchanges, cannot be read (the message says why, in one
    line, and holds no header)."""


@frozen
class VcrExchange:
    """One request-response pair of a cassette whose request path speaks a known wire."""

    file: Path
    index: int
    """The interaction's position in the cassette."""
    host: str
    """The request's host (and port when the URI gives one): the provider in reports."""
    wire: str
    response: RecordedResponse | None
    """The response, ready to replay; ``None`` when it cannot be read (see ``problem``)."""
    problem: str = ""


@frozen
class Cassette:
    """What one cassette file holds."""

    file: Path
    exchanges: tuple[VcrExchange, ...] = ()
    other: int = 0
    """Interactions whose request path speaks none of :data:`VCR_WIRES`."""
    problem: str = ""
    """Why the file could not be read at all (empty when it could)."""
    skipped: str = ""
    """Why the file, read, is not a cassette (empty when it is one)."""


class NotACassette(Exception):
    """A file that parses but holds no recorded exchanges in either format."""


def request_wire(uri: str) -> str | None:
    """The wire a request URI's path speaks (see :data:`VCR_WIRES`), else ``None`` (also for
    a URI that does not parse)."""
    try:
        path = urlsplit(uri).path.rstrip("/")
    except ValueError:
        return None
    return next((wire for end, wire in VCR_WIRES if path.endswith(end)), None)


SUFFIXES = (".yaml", ".yml", ".har")
"""The files read as cassettes: VCR.py's YAML, and HAR."""


def cassette_files(folder: Path) -> list[Path]:
    """Every ``*.yaml``, ``*.yml`` and ``*.har`` file under ``folder``, at any depth,
    sorted."""
    found = [p for suffix in SUFFIXES for p in folder.rglob(f"*{suffix}")]
    return sorted(p for p in found if p.is_file())


def _host(uri: str) -> str:
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        return "(no host)"
    host = parts.hostname or "(no host)"
    return f"{host}:{port}" if port is not None else host


def _nodes(value: Any, budget: list[int]) -> None:
    """Count ``value``'s nodes into ``budget`` (shared ones each time they are reached);
    raise once it runs out, so an alias bomb is refused before anything walks it."""
    stack = [value]
    while stack:
        item = stack.pop()
        budget[0] -= 1
        if budget[0] < 0:
            raise CassetteError(f"more than {MAX_NODES} values once its YAML aliases expand")
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _headers(raw: Any) -> list[tuple[str, str]]:
    """Header pairs from a mapping of names to a value or a list of values."""
    out: list[tuple[str, str]] = []
    for name, value in raw.items() if isinstance(raw, dict) else ():
        for item in value if isinstance(value, list) else [value]:
            out.append((str(name), str(item)))
    return out


def _text_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate stays as its bytes


def _raw_body(response: dict[str, Any]) -> tuple[bytes, bool]:
    """The body's bytes, and whether they are as the server sent them (bytes or base64,
    which a content encoding applies to); a text body was stored decoded."""
    if "parsed_body" in response:  # pydantic-ai: the JSON body, parsed
        return _text_bytes(json.dumps(response["parsed_body"], ensure_ascii=False)), False
    body = response.get("body") if "body" in response else response.get("content")
    if isinstance(body, dict):
        if "base64_string" in body:  # Ruby VCR
            try:
                return base64.b64decode(str(body["base64_string"]), validate=False), True
            except (binascii.Error, ValueError) as error:
                raise CassetteError(f"a base64 body that does not decode: {error}") from None
        body = body.get("string", "")
    if body is None:
        return b"", False
    if isinstance(body, bytes):
        return body, True
    if isinstance(body, str):
        return _text_bytes(body), False
    raise CassetteError(f"a body of type {type(body).__name__}")


_DECODED = re.compile(rb"\A(\xef\xbb\xbf)?\s*([{\[]|(data|event|id|retry)?:)")
"""The opening of a body already out of its coding: JSON, or an event stream."""


def _still_encoded(data: bytes, codings: list[str]) -> bool:
    """Whether stored bytes are still in the coding applied last: gzip bytes open with its
    magic number; those of another coding do not read as a JSON body or an event stream."""
    if codings[-1] in ("gzip", "x-gzip"):
        return data.startswith(b"\x1f\x8b")
    return _DECODED.match(data[:64]) is None


def _status(code: Any) -> int:
    if isinstance(code, bool) or not isinstance(code, int | str):
        raise CassetteError("a response without a status code")
    try:
        number = int(code)
    except ValueError:
        raise CassetteError(f"a status code {str(code)[:20]!r}") from None
    if not 100 <= number <= 599:
        raise CassetteError(f"a status code {number}")
    return number


def _recorded(
    status: int, pairs: list[tuple[str, str]], body: bytes, as_sent: bool
) -> RecordedResponse:
    """The response to replay. Its ``content-encoding`` stays only beside bytes still in
    that coding: a body stored as text (``as_sent`` false), or bytes a recorder decoded
    and left under the header, are replayed without it."""
    codings = [
        c.strip().lower()
        for k, v in pairs
        if k.lower() == "content-encoding"
        for c in v.split(",")
        if c.strip() and c.strip().lower() != "identity"
    ]
    keep = as_sent and bool(codings) and _still_encoded(body, codings)
    kept = tuple(
        (k, v)
        for k, v in pairs
        if k.lower() not in _DROP and (keep or k.lower() != "content-encoding")
    )
    return RecordedResponse(status, kept, body)


def _vcr_response(raw: Any) -> RecordedResponse:
    if not isinstance(raw, dict):
        raise CassetteError("no response")
    status = raw.get("status", raw.get("status_code"))  # older vcrpy httpx: status_code
    number = _status(status.get("code") if isinstance(status, dict) else status)
    body, as_sent = _raw_body(raw)
    return _recorded(number, _headers(raw.get("headers")), body, as_sent)


def _har_response(raw: Any) -> RecordedResponse:
    if not isinstance(raw, dict):
        raise CassetteError("no response")
    number = _status(raw.get("status"))
    given = raw.get("headers")
    headers: list[Any] = given if isinstance(given, list) else []
    pairs = [
        (str(h.get("name")), str(h.get("value")))
        for h in headers
        if isinstance(h, dict) and h.get("name") is not None
    ]
    stored = raw.get("content")
    content: dict[str, Any] = stored if isinstance(stored, dict) else {}
    mime = content.get("mimeType")
    if isinstance(mime, str) and mime and not any(k.lower() == "content-type" for k, _ in pairs):
        pairs.append(("content-type", mime))
    text = content.get("text")
    if text is None:
        body = b""
    elif not isinstance(text, str):
        raise CassetteError(f"a body of type {type(text).__name__}")
    elif content.get("encoding") == "base64":
        try:
            body = base64.b64decode(text, validate=False)
        except (binascii.Error, ValueError) as error:
            raise CassetteError(f"a base64 body that does not decode: {error}") from None
    else:
        body = _text_bytes(text)
    # Base64 holds the bytes (Polly's node-http adapter keeps gzip bodies as sent); text is
    # the body decoded.
    return _recorded(number, pairs, body, content.get("encoding") == "base64")


def _load(file: Path) -> Any:
    """The file's YAML (``.yaml``, ``.yml``) or JSON (``.har``), bounded."""
    try:
        size = file.stat().st_size
    except OSError as error:
        raise CassetteError(f"cannot be read: {error.strerror}") from None
    if size > MAX_FILE:
        raise CassetteError(f"{size} bytes, over the limit of {MAX_FILE}")
    try:
        # Read to the bound, never past it: a file may hold more than its size says (a link
        # to a file of /proc, a file still growing).
        with file.open("rb") as stream:
            data = stream.read(MAX_FILE + 1)
        if len(data) > MAX_FILE:
            raise CassetteError(f"more than {MAX_FILE} bytes, over the limit")
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CassetteError(f"cannot be read as UTF-8 text: {error}") from None
    if file.suffix == ".har":
        try:
            data = json.loads(text)
        except ValueError:
            raise CassetteError("not valid JSON") from None
        except RecursionError:
            raise CassetteError("JSON nested too deeply") from None
        return data
    return _yaml(text)


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The safe loader, reading a tag it does not know as the plain value under it and a
    timestamp as its text (a cassette has neither; other YAML files do)."""


def _plain(loader: Any, node: Any) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_scalar(node)


_Loader.add_constructor(None, _plain)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _plain)


def _yaml(text: str) -> Any:
    """A YAML cassette's values; :class:`NotACassette` for a file whose shape is no
    cassette's (nothing in it is built), :class:`CassetteError` for one that is not YAML
    or whose values cannot be built."""
    loader = _Loader(text)
    try:
        if not loader.check_node():
            raise NotACassette("an empty YAML file, not a VCR cassette")
        node = loader.get_node()
        if loader.check_node():
            raise NotACassette("several YAML documents, not a VCR cassette")
        if not _has_interactions(node):
            raise NotACassette("not a VCR cassette: no list of interactions")
        data = loader.construct_document(node)
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise CassetteError(f"not valid YAML{line}") from None
    except RecursionError:
        raise CassetteError("YAML nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as error:
        raise CassetteError(f"a YAML value that cannot be built ({type(error).__name__})") from None
    finally:
        loader.dispose()
    _nodes(data, [MAX_NODES])
    return data


def _has_interactions(node: Any) -> bool:
    """Whether a YAML document is a mapping with an ``interactions`` key."""
    return isinstance(node, yaml.MappingNode) and any(
        isinstance(key, yaml.ScalarNode) and key.value == "interactions" for key, _ in node.value
    )


Entry = tuple[Any, Callable[[Any], RecordedResponse], Any]
"""(request URI, the reader of its response, the response as stored)."""


def _entries(file: Path, data: Any) -> list[Entry]:
    """Each interaction's request URI and its response, in either format."""
    if file.suffix == ".har":
        log = data.get("log") if isinstance(data, dict) else None
        entries = log.get("entries") if isinstance(log, dict) else None
        if not isinstance(entries, list):
            raise NotACassette("not a HAR recording: no log.entries")
        out: list[Entry] = []
        for entry in entries:
            request = entry.get("request") if isinstance(entry, dict) else None
            url = request.get("url") if isinstance(request, dict) else None
            out.append((url, _har_response, entry.get("response") if request else None))
        return out
    interactions = data.get("interactions") if isinstance(data, dict) else None
    if not isinstance(interactions, list):
        raise NotACassette("not a VCR cassette: no list of interactions")
    out = []
    for interaction in interactions:
        request = interaction.get("request") if isinstance(interaction, dict) else None
        uri = request.get("uri") if isinstance(request, dict) else None
        out.append((uri, _vcr_response, interaction.get("response") if request else None))
    return out


def _exchanges(file: Path, entries: list[Entry]) -> Iterator[VcrExchange | None]:
    """One exchange per interaction of a known wire; ``None`` for the others."""
    for index, (uri, reader, raw) in enumerate(entries):
        wire = request_wire(uri) if isinstance(uri, str) else None
        if wire is None or not isinstance(uri, str):
            yield None
            continue
        try:
            response = reader(raw)
        except CassetteError as error:
            yield VcrExchange(file, index, _host(uri), wire, None, str(error))
        except RecursionError:
            yield VcrExchange(file, index, _host(uri), wire, None, "a body nested too deeply")
        else:
            yield VcrExchange(file, index, _host(uri), wire, response)


def read_cassette(file: Path) -> Cassette:
    """The exchanges of one cassette; a file that cannot be read comes back with its
    ``problem``, one that is not a cassette with why it was ``skipped`` (never an
    exception)."""
    try:
        entries = _entries(file, _load(file))
    except CassetteError as error:
        return Cassette(file, problem=str(error))
    except NotACassette as error:
        return Cassette(file, skipped=str(error))
    found = list(_exchanges(file, entries))
    exchanges = tuple(e for e in found if e is not None)
    return Cassette(file, exchanges, len(found) - len(exchanges))
