"""Scripted conversations for :class:`FakeProviderServer`, answered on all three wires.

A scenario reads each request (OpenAI Chat Completions, Anthropic Messages or OpenAI
Responses, streamed or not) and answers the way a model would: with text, tool calls, or
both, cut at the request's ``max_tokens`` (``max_output_tokens``) with the wire's own
``length`` finish. It keeps no state between requests; what it says depends on the
conversation the request carries, so many runs, one after another or at the same time,
each get the whole scenario. Prompt tokens are counted from the conversation's text and
tools (a word piece a token), not from the body's bytes, so the same conversation costs
the same streamed or not, as a string or as text blocks.

- ``echo``: answers with the last user message (the prompt).
- ``tools``: lists the workspace (``list_dir``), reads its first file (``read_file``), then
  answers with what it saw; a tool the request does not offer is skipped. It also answers
  the conformance kit's tools: ``get_weather`` for each city a weather question names
  (one call when ``parallel_tool_calls`` is false), ``get_time`` for a question about
  the time, then an answer quoting the results; a named ``tool_choice`` calls that tool,
  ``none`` answers in text. "Reply with the single word X" answers ``X``.
- a script (:func:`load_script`): a list of turns; the reply to a request is the turn
  numbered by how many assistant turns its conversation already has (so each new run starts
  at the first turn), wrapping around after the last.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ._conversation import (
    Conversation,
    ScriptTurn,
    error_reply,
    has_key,
    overflow,
    read,
    render,
)
from ._fake_server import RecordedRequest, Reply, ReplyHandler

__all__ = ["SCENARIOS", "ScriptTurn", "load_script", "scenario_handler"]

SCENARIOS = ("echo", "tools")
"""The built-in scenarios."""

MAX_SCRIPT_BYTES = 10 * 1024 * 1024
"""The largest script file read."""


# -- scenarios -------------------------------------------------------------------------


def _echo(conversation: Conversation) -> ScriptTurn:
    return ScriptTurn(conversation.last_user or "(an empty prompt)")


_CITY = re.compile(r"\bin ([A-Z][\w-]*|[^\x00-\x7f\s?.,!\"]+)")
_ONE_WORD = re.compile(r"reply with the single word (\S+?)[.!]?$", re.IGNORECASE)
KIT_TOOLS = ("get_weather", "get_time")
"""The conformance kit's tools, which the ``tools`` scenario calls."""


def _kit_turn(conversation: Conversation) -> ScriptTurn | None:
    """The ``tools`` scenario's answer to the conformance kit's questions (``None``: not one)."""
    results = [text for name, text in conversation.since_user if name in KIT_TOOLS]
    if results:
        return ScriptTurn(" ".join(results))
    word = _ONE_WORD.search(conversation.last_user.strip())
    offered = [name for name in KIT_TOOLS if name in conversation.tools]
    choice = conversation.tool_choice
    if not offered or choice == "none":
        return ScriptTurn(word.group(1)) if word else None
    prompt = conversation.last_user
    named = choice if choice in offered else None
    if choice == "required" and named is None:
        named = offered[0]
    asks = "time" if "time" in prompt.lower() else "weather" if "weather" in prompt.lower() else ""
    if named == "get_time" or (named is None and asks == "time" and "get_time" in offered):
        return ScriptTurn("", (("get_time", {}),))
    if named == "get_weather" or (named is None and asks == "weather" and "get_weather" in offered):
        cities = list(dict.fromkeys(_CITY.findall(prompt))) or ["Paris"]
        calls = tuple(("get_weather", {"city": city}) for city in cities)
        return ScriptTurn("", calls if conversation.parallel else calls[:1])
    return ScriptTurn(word.group(1)) if word else None


def _first_file(listing: str) -> str | None:
    for line in listing.splitlines():
        name = line.strip()
        if name and not name.endswith("/") and not name.startswith(("(", "[", "…")):
            return name
    return None


def _tools(conversation: Conversation) -> ScriptTurn:
    kit = _kit_turn(conversation)
    if kit is not None:
        return kit
    results = dict(conversation.since_user)
    step = conversation.assistant_since_user
    if step == 0 and "list_dir" not in results and "list_dir" in conversation.tools:
        return ScriptTurn("Let me look at the workspace.", (("list_dir", {"path": "."}),))
    listing = results.get("list_dir", "")
    first = _first_file(listing)
    can_read = first is not None and "read_file" in conversation.tools
    if step == 1 and can_read and "read_file" not in results:
        return ScriptTurn(f"Reading {first}.", (("read_file", {"path": first, "limit": 20}),))
    count = len([line for line in listing.splitlines() if line.strip()])
    entries = f"{count} entr{'y' if count == 1 else 'ies'}"
    if "read_file" in results:
        lines = results["read_file"].strip().splitlines()
        opening = re.sub(r"^\s*\d+\s+", "", lines[0])[:200] if lines else "(empty)"
        return ScriptTurn(
            f"The workspace has {entries}; {first} begins with: {opening}\n"
            f"(You asked: {conversation.last_user[:500]})"
        )
    if listing:
        return ScriptTurn(f"The workspace has {entries} and no file I could read.")
    return ScriptTurn(f"No tools to look with. You asked: {conversation.last_user[:500]}")


def _scripted(turns: Sequence[ScriptTurn]) -> Callable[[Conversation], ScriptTurn]:
    def reply(conversation: Conversation) -> ScriptTurn:
        return turns[conversation.assistant_turns % len(turns)]

    return reply


def load_script(path: str | Path) -> tuple[ScriptTurn, ...]:
    """The turns of a JSON script file: a list of turns, or ``{"turns": [...]}``; each turn
    is ``{"text": "..."}``, ``{"tool_calls": [{"name": "...", "arguments": {...}}]}`` or
    both.

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not such a script (the message says where).
    """
    file = Path(path)
    with file.open("rb") as handle:
        data = handle.read(MAX_SCRIPT_BYTES + 1)
    if len(data) > MAX_SCRIPT_BYTES:
        raise ValueError(f"{file}: larger than {MAX_SCRIPT_BYTES} bytes")
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{file}: not JSON ({error})") from None
    turns = document.get("turns") if isinstance(document, dict) else document
    if not isinstance(turns, list) or not turns:
        raise ValueError(f'{file}: expected a non-empty list of turns, or {{"turns": [...]}}')
    return tuple(_turn(file, index, turn) for index, turn in enumerate(turns))


def _turn(file: Path, index: int, turn: Any) -> ScriptTurn:
    where = f"{file}: turn {index + 1}"
    if not isinstance(turn, dict) or not set(turn) <= {"text", "tool_calls"}:
        raise ValueError(f'{where}: expected an object with "text" and/or "tool_calls"')
    text = turn.get("text", "")
    if not isinstance(text, str):
        raise ValueError(f'{where}: "text" must be a string')
    calls: list[tuple[str, dict[str, Any]]] = []
    raw_calls = turn.get("tool_calls", [])
    if not isinstance(raw_calls, list):
        raise ValueError(f'{where}: "tool_calls" must be a list')
    for call in raw_calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ValueError(f'{where}: each tool call needs a "name" string')
        arguments = call.get("arguments", {})
        if not isinstance(arguments, dict):
            raise ValueError(f'{where}: the "arguments" of {call["name"]} must be an object')
        calls.append((call["name"], arguments))
    if not text and not calls:
        raise ValueError(f'{where}: give "text", "tool_calls" or both')
    return ScriptTurn(text, tuple(calls))


def scenario_handler(
    scenario: str | Sequence[ScriptTurn],
    *,
    api_key: str | None = None,
    context_window: int | None = None,
) -> ReplyHandler:
    """A :attr:`FakeProviderServer.handler` that plays ``scenario`` on all three wires:
    ``"echo"``, ``"tools"`` or script turns (:func:`load_script`). Requests to
    ``…/chat/completions`` get OpenAI Chat Completions replies, ``…/messages`` Anthropic
    ones and ``…/responses`` OpenAI Responses ones, streamed when the request asks;
    ``GET …/models`` lists one model; anything else is a 404 naming the path. A
    ``temperature`` out of range or a ``max_tokens`` that is not a positive integer is a
    400. With ``api_key``, a request without that key (``Authorization: Bearer`` or
    ``x-api-key``) is a 401. With ``context_window``, a prompt of more tokens than that is
    a 400 in the wire's words for an overflow (``context_length_exceeded``, Anthropic's
    ``prompt is too long``).

    Raises:
        ValueError: an unknown scenario name, or no turns.
    """
    play: Callable[[Conversation], ScriptTurn]
    if isinstance(scenario, str):
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {scenario!r} (known: {', '.join(SCENARIOS)})")
        play = _echo if scenario == "echo" else _tools
    else:
        if not scenario:
            raise ValueError("a script needs at least one turn")
        play = _scripted(tuple(scenario))

    def handler(request: RecordedRequest) -> Reply:
        if request.method == "GET" and request.path.split("?", 1)[0].rstrip("/").endswith(
            "/models"
        ):
            return Reply.json({"object": "list", "data": [{"id": "fake", "object": "model"}]})
        if api_key is not None and not has_key(request, api_key):
            return error_reply(401, "fake-server: invalid API key", "authentication_error")
        try:
            conversation = read(request)
        except ValueError as error:
            return error_reply(400, f"fake-server: {error}")
        if conversation is None:
            return error_reply(404, f"fake-server: no such endpoint {request.path[:200]!r}")
        if context_window is not None and conversation.prompt_tokens > context_window:
            return overflow(conversation, context_window)
        return render(conversation, play(conversation))

    return handler
