"""Where a request goes: one rule from a base URL to the endpoint, for every wire.

Every caller that turns a base URL into a request URL (``OpenAIChat``, ``AnthropicChat``,
the conformance kit's raw probes and ``conformance probe``) goes through :func:`endpoint_url`,
so a base URL that works for one works for all of them (``OpenAIResponses`` too).

The rule, after trailing slashes are dropped:

- a path ending in a version segment (``/v1``, ``/openai/v1``, ``/api/v1``, ``/v4``) is the
  API root: the endpoint (``/chat/completions``, ``/messages``, ``/responses``) is appended;
- no path at all (``http://127.0.0.1:4000``) is the server root: ``/v1`` comes first;
- any other path is read the way that wire's own SDK reads it: the OpenAI SDK (for both
  OpenAI wires) takes it as the API root (Gemini's ``/v1beta/openai``, GitHub Models'
  ``/inference``), the Anthropic SDK as the server root that ``/v1/messages`` goes under
  (DeepSeek's ``/anthropic``, OpenRouter's ``/api``).

A query string (Azure's ``?api-version=…``) stays at the end.
"""

from __future__ import annotations

import functools
import re
from typing import Literal, TypeAlias

import httpx

__all__ = ["ENDPOINT_PATHS", "WIRE_FLAGS", "WireName", "endpoint_url", "missing_endpoint"]

WireName: TypeAlias = Literal["openai-chat", "anthropic", "openai-responses"]

ENDPOINT_PATHS: dict[WireName, str] = {
    "openai-chat": "/chat/completions",
    "anthropic": "/messages",
    "openai-responses": "/responses",
}
"""The endpoint of each wire, below its API root."""

_VERSION = re.compile(r"v\d+[a-z0-9]*", re.IGNORECASE)


@functools.lru_cache(maxsize=256)
def endpoint_url(base_url: str, wire: WireName) -> str:
    """The URL a request of ``wire`` goes to for ``base_url`` (see the module's rule).

    Worked out once per base URL and wire (the adapters ask for it on every request, and
    parsing a URL whose host is an IP address goes through ``ipaddress``, pure Python).

    >>> endpoint_url("http://127.0.0.1:4000", "anthropic")
    'http://127.0.0.1:4000/v1/messages'
    >>> endpoint_url("http://127.0.0.1:4000/v1/", "openai-chat")
    'http://127.0.0.1:4000/v1/chat/completions'
    """
    url = httpx.URL(base_url)
    path = url.raw_path.split(b"?", 1)[0].decode("ascii").rstrip("/")
    last = path.rsplit("/", 1)[-1]
    if not _VERSION.fullmatch(last) and (not path or wire == "anthropic"):
        path += "/v1"
    query = url.query.decode("ascii")
    root = str(url.copy_with(path="/", query=None, fragment=None)).rstrip("/")
    return f"{root}{path}{ENDPOINT_PATHS[wire]}" + (f"?{query}" if query else "")


WIRE_FLAGS: dict[WireName, str] = {
    "openai-chat": "chat",
    "anthropic": "anthropic",
    "openai-responses": "responses",
}
"""The ``--wire`` value of ``agentfsm run`` for each wire."""


def missing_endpoint(base_url: str, wire: WireName) -> str:
    """What a 404 from the endpoint of ``wire`` under ``base_url`` tells: the endpoint is
    missing (or the model is unknown), and the ``--wire`` values that use the others."""

    def path(of: WireName) -> str:
        return httpx.URL(endpoint_url(base_url, of)).path

    others = " or ".join(
        f"--wire {WIRE_FLAGS[other]} ({path(other)})" for other in WIRE_FLAGS if other != wire
    )
    return (
        f"404 for POST {path(wire)}: this server has no such endpoint (or no such model); "
        f"if it speaks another wire, try {others}"
    )
