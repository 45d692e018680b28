"""The second reading of the Chat Completions wire: a completion body, or a stream of
chunks (tool-call fragments by ``index``, or by id and name where a server sends none)."""

from __future__ import annotations

import json
from typing import Any

from attrs import define, field

from agentfsm.adapters.providers import RecordedResponse

from ._common import (
    LIMITS,
    Answer,
    Bad,
    Failure,
    Large,
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


@define
class _ChatCall:
    """One tool call as a Chat Completions stream's fragments build it."""

    index: int | None
    id: str = ""
    name: str = ""
    text: list[str] = field(factory=list)
    size: int = 0
    """Characters of argument text so far."""
    checked: int = 0
    """Its size when it last was not a whole object (re-read only once it doubled, so many
    fragments cost linear time)."""
    whole: dict[str, Any] | None = None
    """Arguments sent as an object (not JSON text)."""

    def complete(self) -> bool:
        """Whether the argument text forms a whole JSON object."""
        if not self.size or (self.checked and self.size < 2 * self.checked):
            return False
        try:
            if isinstance(json.loads("".join(self.text)), dict):
                return True
        except (ValueError, RecursionError):
            pass
        self.checked = self.size
        return False


def chat_stream(response: RecordedResponse, text: str) -> Answer | Failure:
    said: list[str] = []
    thought: list[str] = []
    model = ident = finish = None
    empty_finish = started = False
    usage: dict[str, Any] = {}
    calls: list[_ChatCall] = []
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
                _chat_fragment(calls, as_object(fragment, "tool_calls[]"))
            reason = as_text(choice.get("finish_reason"), "finish_reason")
            finish = reason or finish
            empty_finish = empty_finish or reason == ""
    answer, reasoning = "".join(said), "".join(thought)
    if not answer and not calls and finish is None:
        return empty_answer(response)
    found = []
    for call in calls:
        if call.name or call.id or call.size or call.whole is not None:
            arguments = call.whole if call.whole is not None else "".join(call.text)
            found.append((call.id, call.name, arguments))
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


def _chat_fragment(calls: list[_ChatCall], fragment: dict[str, Any]) -> None:
    """One tool-call fragment of a stream into ``calls``: by its ``index``; without one, a
    fragment opens a new call when its id (or, without an id, its name) differs from the
    last call's, or when it names the last call's tool again while that call's arguments
    already form a whole object (a second call of the same tool)."""
    function = as_object(fragment.get("function"), "function")
    given_id: str = fragment["id"] if isinstance(fragment.get("id"), str) else ""
    name = as_text(function.get("name"), "name") or ""
    arguments = function.get("arguments")
    index = fragment.get("index")
    at = None
    if isinstance(index, int) and not isinstance(index, bool):
        at = next((n for n, c in enumerate(calls) if c.index == index), None)
        if at is None:
            calls.append(_ChatCall(index))
            at = len(calls) - 1
    elif calls:
        last = calls[-1]
        fresh = (
            (given_id and last.id and given_id != last.id)
            or (not given_id and name and last.name and name != last.name)
            or (name and name == last.name and last.whole is not None)
            or (
                not given_id
                and name
                and name == last.name
                and isinstance(arguments, str)
                and arguments.lstrip().startswith("{")
                and last.complete()
            )
        )
        at = None if fresh else len(calls) - 1
    if at is None:
        calls.append(_ChatCall(None))
        at = len(calls) - 1
    if len(calls) > LIMITS.max_tool_calls:
        raise Large("max_tool_calls")
    call = calls[at]
    call.id = call.id or given_id
    call.name = call.name or name
    if isinstance(arguments, dict):
        call.whole = arguments
    elif isinstance(arguments, str):
        call.text.append(arguments)
        call.size += len(arguments)
    elif arguments is not None:
        raise Bad("function.arguments is not a string")
