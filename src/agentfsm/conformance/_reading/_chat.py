"""The second reading of the Chat Completions wire: a completion body, or a stream of
chunks (tool-call fragments by ``index``, or by id, name and where their JSON ends where a
server sends none), and the deprecated single ``function_call``."""

from __future__ import annotations

import json
import re
from typing import Any

from attrs import define, field

from agentfsm.adapters.providers import RecordedResponse

from ._common import (
    LIMITS,
    Answer,
    Bad,
    Failure,
    Large,
    Unsettled,
    as_array,
    as_object,
    as_text,
    calls_of,
    empty_answer,
    failed,
    finish_of,
    malformed,
    merge,
    named,
    openai_usage,
    payloads,
    stream_error,
)

__all__ = ["chat_body", "chat_stream"]


def _content_text(content: Any) -> str:
    """Chat Completions content: a string, ``null`` or a list of parts (text parts count)."""
    if content is None or isinstance(content, str):
        return content or ""
    parts = []
    for part in as_array(content, "content"):
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and part.get("type") in (None, "text"):
            parts.append(as_text(part.get("text"), "content[].text") or "")
    return "".join(parts)


def _chat_reasoning(holder: dict[str, Any]) -> str:
    """``reasoning_content`` or ``reasoning`` (the first given), else Mistral's ``thinking``
    content parts."""
    for key in ("reasoning_content", "reasoning"):
        if holder.get(key):
            return as_text(holder[key], key) or ""
    content = holder.get("content")
    parts = [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []
    thinking = [p.get("thinking") for p in parts if p.get("type") == "thinking"]
    return "".join(t if isinstance(t, str) else _content_text(t) for t in thinking)


def _first_choice(data: dict[str, Any]) -> dict[str, Any]:
    choices = as_array(data.get("choices"), "choices")
    for choice in choices:
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            return choice
    return as_object(choices[0], "choices[0]") if choices else {}


def _legacy(holder: dict[str, Any]) -> dict[str, Any]:
    return as_object(holder.get("function_call"), "function_call")


def chat_body(response: RecordedResponse, data: dict[str, Any]) -> Answer | Failure:
    if "error" in data and not data.get("choices"):
        return failed(response, data)
    choice = _first_choice(data)
    message = as_object(choice.get("message"), "message")
    found = []
    for call in as_array(message.get("tool_calls"), "tool_calls"):
        function = as_object(as_object(call, "tool_calls[]").get("function"), "function")
        found.append(
            (call.get("id"), as_text(function.get("name"), "name") or "", function.get("arguments"))
        )
    legacy = _legacy(message)
    name = as_text(legacy.get("name"), "function_call.name") or ""
    if not found and (name or legacy.get("arguments")):
        found.append((None, name, legacy.get("arguments")))
    calls = calls_of(found)
    text = _content_text(message.get("content"))
    if not text and isinstance(message.get("refusal"), str):
        text = message["refusal"]
    reasoning = _chat_reasoning(message)
    finish = finish_of(as_text(choice.get("finish_reason"), "finish_reason"), calls)
    usage = data.get("usage") or as_object(data.get("x_groq"), "x_groq").get("usage")
    return Answer(
        text,
        reasoning or None,
        (),
        calls,
        *finish,
        openai_usage(as_object(usage, "usage")),
        named(data.get("id")),
        named(data.get("model")),
    )


class _Shape:
    """Whether argument text, given piece by piece, is so far one whole JSON object (or a
    JSON string holding one) and nothing after it but white space. Only brackets, quotes
    and backslashes are visited, each once; the text is parsed once, when its value
    closes."""

    def __init__(self) -> None:
        self.opened = self.closed = self.spoilt = False
        self.nesting = 0
        self.quoted = self.escaped = self.quoted_top = False
        self.verdict: bool | None = None

    def add(self, piece: str) -> None:
        position = 0
        while position < len(piece) and not self.spoilt:
            if not self.opened or self.closed:
                rest = piece[position:].lstrip()
                if not rest:
                    return
                if self.closed or rest[0] not in '{"':
                    self.spoilt = True
                    return
                self.opened = True
                self.quoted = self.quoted_top = rest[0] == '"'
                self.nesting = 0 if self.quoted else 1
                position = len(piece) - len(rest) + 1
                continue
            for mark in _MARKS.finditer(piece, position):
                at = mark.start()
                if self.escaped:
                    self.escaped = False
                    if at == position:  # the mark is the character escaped
                        position = at + 1
                        continue
                char = mark.group()
                if self.quoted:
                    if char == "\\":
                        self.escaped = True
                    elif char == '"':
                        self.quoted = False
                        self.closed = self.quoted_top
                elif char == '"':
                    self.quoted = True
                elif char in "{[":
                    self.nesting += 1
                elif char in "}]":
                    self.nesting -= 1
                    self.closed = self.nesting == 0
                position = at + 1
                if self.closed:
                    break
            else:
                if self.escaped and position < len(piece):
                    self.escaped = False  # the character escaped was no mark
                return

    def whole(self, text: str) -> bool:
        if not self.closed or self.spoilt:
            return False
        if self.verdict is None:
            try:
                value = json.loads(text)
                value = json.loads(value) if isinstance(value, str) else value
            except (ValueError, RecursionError):
                value = None
            self.verdict = isinstance(value, dict)
        return self.verdict


_MARKS = re.compile(r'[{}\[\]"\\]')


@define
class _ChatCall:
    """One tool call as a Chat Completions stream's fragments build it."""

    index: int | None
    id: str = ""
    name: str = ""
    text: list[str] = field(factory=list)
    size: int = 0
    whole: dict[str, Any] | None = None
    """Arguments sent as an object (not JSON text)."""
    shape: _Shape = field(factory=_Shape)

    def complete(self) -> bool:
        return self.whole is not None or self.shape.whole("".join(self.text))

    def given(self) -> bool:
        return bool(self.name or self.id or self.size or self.whole is not None)

    def add(self, given_id: str, name: str, arguments: Any) -> None:
        self.id = self.id or given_id
        if name and name != self.name:  # a whole name repeated is a repeat, not a part
            self.name += name
        if isinstance(arguments, dict):
            self.whole = arguments
        elif isinstance(arguments, str):
            self.text.append(arguments)
            self.size += len(arguments)
            if self.size > LIMITS.max_argument_bytes:
                raise Large("max_argument_bytes")
            self.shape.add(arguments)
        elif arguments is not None:
            raise Bad("function.arguments is not a string")


@define
class _Calls:
    """A stream's tool calls: by ``index``, as the wire documents it; without one, a
    fragment continues the last call unless it gives another id, or (without an id) names
    another tool, or names the same tool with arguments opening a second JSON value after
    a whole one."""

    indexed: dict[int, _ChatCall] = field(factory=dict)
    plain: list[_ChatCall] = field(factory=list)
    legacy: _ChatCall | None = None

    def count(self) -> None:
        if len(self.indexed) + len(self.plain) + (self.legacy is not None) > LIMITS.max_tool_calls:
            raise Large("max_tool_calls")

    def fragment(self, fragment: dict[str, Any]) -> None:
        function = as_object(fragment.get("function"), "function")
        given_id: str = fragment["id"] if isinstance(fragment.get("id"), str) else ""
        name = as_text(function.get("name"), "name") or ""
        arguments = function.get("arguments")
        index = fragment.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            if self.plain:
                raise Unsettled("tool-call fragments with and without an index in one reply")
            call = self.indexed.get(index)
            if call is None:
                call = self.indexed[index] = _ChatCall(index)
                self.count()
            elif given_id and call.id and given_id != call.id:
                raise Unsettled(f"two ids given to the tool call at index {index}")
            call.add(given_id, name, arguments)
            return
        if self.indexed:
            raise Unsettled("tool-call fragments with and without an index in one reply")
        last = self.plain[-1] if self.plain else None
        if last is None or self._opens(last, given_id, name, arguments):
            last = _ChatCall(None)
            self.plain.append(last)
            self.count()
        last.add(given_id, name, arguments)

    @staticmethod
    def _opens(last: _ChatCall, given_id: str, name: str, arguments: Any) -> bool:
        if given_id:
            return bool(last.id) and given_id != last.id
        if name and last.name and name != last.name:
            return True
        opening = isinstance(arguments, dict) or (
            isinstance(arguments, str) and arguments.lstrip()[:1] in ("{", '"')
        )
        if not opening or not last.complete():
            return False
        if not name:
            raise Unsettled(
                "a tool-call fragment without index, id or name opens a second JSON value "
                "after a whole call: another call, or arguments that are not JSON"
            )
        return name == last.name

    def found(self) -> list[tuple[Any, str, Any]]:
        """(id, name, arguments) of each call something of which came, in index order; the
        deprecated single call when no other came."""
        calls = [self.indexed[i] for i in sorted(self.indexed)] + self.plain
        if not any(c.given() for c in calls) and self.legacy is not None:
            calls = [self.legacy]
        return [
            (c.id, c.name, c.whole if c.whole is not None else "".join(c.text))
            for c in calls
            if c.given()
        ]


def chat_stream(response: RecordedResponse, text: str) -> Answer | Failure:
    said: list[str] = []
    thought: list[str] = []
    model = ident = finish = None
    empty_finish = started = False
    usage: dict[str, Any] = {}
    calls = _Calls()
    for event in payloads(text, lambda _event: False, "ends"):
        if isinstance(event, str):
            return malformed(started)
        payload = event.payload
        if event.kind == "error" or (isinstance(payload, dict) and payload.get("error")):
            return stream_error(payload, response, started)
        if not isinstance(payload, dict):
            continue
        model = (
            payload["model"]
            if isinstance(payload.get("model"), str) and payload["model"]
            else model
        )
        if ident is None and isinstance(payload.get("id"), str) and payload["id"]:
            ident = payload["id"]
        given = payload.get("usage")
        if given is None:
            given = as_object(payload.get("x_groq"), "x_groq").get("usage")
        merge(usage, as_object(given, "usage"))
        for choice in as_array(payload.get("choices"), "choices"):
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = as_object(choice.get("delta") or choice.get("message"), "delta")
            refusal = delta.get("refusal")
            pieces = [_content_text(delta.get("content")), _chat_reasoning(delta)]
            pieces[0] += refusal if isinstance(refusal, str) else ""
            said.append(pieces[0])
            thought.append(pieces[1])
            started = started or any(pieces)
            for fragment in as_array(delta.get("tool_calls"), "tool_calls"):
                calls.fragment(as_object(fragment, "tool_calls[]"))
            legacy = _legacy(delta)
            if legacy:
                if calls.legacy is None:
                    calls.legacy = _ChatCall(None)
                    calls.count()
                name = as_text(legacy.get("name"), "function_call.name") or ""
                calls.legacy.add("", name, legacy.get("arguments"))
            reason = as_text(choice.get("finish_reason"), "finish_reason")
            finish = reason or finish
            empty_finish = empty_finish or reason == ""
    answer, reasoning = "".join(said), "".join(thought)
    found = calls.found()
    if not answer and not found and finish is None:
        return empty_answer(response)
    tools = calls_of(found)
    return Answer(
        answer,
        reasoning or None,
        (),
        tools,
        *finish_of("" if finish is None and empty_finish else finish, tools),
        openai_usage(usage),
        ident,
        model,
    )
