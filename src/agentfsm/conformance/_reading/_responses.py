"""The second reading of the OpenAI Responses wire: a response object, or its event stream:
the final response's ``output`` when it holds items (the completed response is the
authority), else the output items built from their deltas and replaced by the whole item
when it comes."""

from __future__ import annotations

from typing import Any

import attrs
from attrs import define, evolve, field

from agentfsm.adapters.providers import RecordedResponse
from agentfsm.engine import Usage

from ._common import (
    LIMITS,
    Answer,
    Bad,
    Call,
    Event,
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

__all__ = ["responses_body", "responses_stream"]


def _parts(parts: Any, kinds: tuple[str, ...], key: str) -> str:
    found = [
        p for p in as_array(parts, "content") if isinstance(p, dict) and p.get("type") in kinds
    ]
    return "".join(as_text(p.get(key), key) or "" for p in found)


def _reasoning_item(item: dict[str, Any]) -> dict[str, Any] | None:
    """What a reasoning item gives back to the next request: its encrypted content, id and
    summary texts (nothing without encrypted content)."""
    encrypted = as_text(item.get("encrypted_content"), "encrypted_content")
    if not encrypted:
        return None
    kept: dict[str, Any] = {"type": "reasoning", "encrypted_content": encrypted}
    if isinstance(item.get("id"), str):
        kept["id"] = item["id"]
    summary = [p for p in as_array(item.get("summary"), "summary") if isinstance(p, dict)]
    kept["summary"] = [
        {"type": "summary_text", "text": p["text"]}
        for p in summary
        if isinstance(p.get("text"), str)
    ]
    return kept


_UNFINISHED = ("queued", "in_progress")


def _responses_finish(
    data: dict[str, Any], calls: tuple[Call, ...]
) -> tuple[str | None, str | None]:
    """A response's ``status`` (and ``incomplete_details.reason``) as a finish reason:
    ``completed`` is a stop, ``incomplete`` its reason (or ``incomplete`` itself when it
    gives none), any other status read as a reason; ``queued`` and ``in_progress`` are not
    answers at all."""
    status = as_text(data.get("status"), "status") or "completed"
    if status in _UNFINISHED:
        raise Bad(f"the response is {status}: nothing was generated yet")
    if status == "incomplete":
        details = as_object(data.get("incomplete_details"), "incomplete_details")
        reason = as_text(details.get("reason"), "incomplete_details.reason")
        if reason is None:
            return ("tool_calls" if calls else "other"), "incomplete"
        return finish_of(reason, calls)
    return finish_of("stop" if status == "completed" else status, calls)


def _failure_body(response: dict[str, Any]) -> dict[str, Any]:
    error = response.get("error")
    if not isinstance(error, dict):
        return {"error": {"code": "server_error", "message": "failed without an error"}}
    return {"error": error}


@define
class _Item:
    """One Responses output item: whole (``output_item.done``, or a response's output), and
    what its deltas said."""

    kind: str = "message"
    whole: dict[str, Any] | None = None
    text: list[str] = field(factory=list)
    reasoning: list[str] = field(factory=list)
    arguments: list[str] = field(factory=list)
    call_id: str = ""
    name: str = ""


def _fold_items(items: list[_Item], data: dict[str, Any], usage: Usage | None) -> Answer:
    """Output items into an answer: a message's text (its refusal when it has no text), a
    reasoning item's summary (else its text) and what it gives back, function calls. A part
    the whole item leaves empty is what the item's deltas said."""
    if len(items) > LIMITS.max_blocks:
        raise Large("max_blocks")
    text, reasoning, kept, found = [], [], [], []
    for item in items:
        whole = item.whole or {}
        kind = whole.get("type") if item.whole is not None else item.kind
        if kind == "message":
            content = whole.get("content")
            said = (
                content
                if isinstance(content, str)
                else (
                    _parts(content, ("output_text", "text"), "text")
                    or _parts(content, ("refusal",), "refusal")
                )
            )
            text.append(said or "".join(item.text))
        elif kind == "reasoning":
            summary = _parts(whole.get("summary"), ("summary_text",), "text")
            thought = summary or _parts(whole.get("content"), ("reasoning_text", "text"), "text")
            reasoning.append(thought or "".join(item.reasoning))
            given = _reasoning_item(whole) if item.whole is not None else None
            kept += [given] if given is not None else []
        elif kind == "function_call":
            arguments = whole.get("arguments")
            if not arguments and "".join(item.arguments):
                arguments = "".join(item.arguments)
            call_id = as_text(whole.get("call_id"), "call_id") or item.call_id
            name = as_text(whole.get("name"), "name") or item.name
            found.append((call_id, name, arguments))
        elif item.whole is None:
            text.append("".join(item.text))
    calls = calls_of(found)
    return Answer(
        "".join(text),
        "\n\n".join(r for r in reasoning if r) or None,
        tuple(kept),
        calls,
        *_responses_finish(data, calls),
        usage,
        named(data.get("id")),
        named(data.get("model")),
    )


def _whole_response(data: dict[str, Any], usage: Any, streamed: dict[int, _Item]) -> Answer:
    """A whole response object (a body, or a stream's final response, whose output is the
    answer when it holds items): its output items, the item a stream built at the same
    position standing in for a part one leaves empty; and ``output_text`` (the SDKs'
    convenience field) when it has no message."""
    output = [as_object(i, "output[]") for i in as_array(data.get("output"), "output")]
    items = [attrs.evolve(streamed.get(n, _Item()), whole=i) for n, i in enumerate(output)]
    answer = _fold_items(items, data, openai_usage(usage))
    given = data.get("output_text")
    if isinstance(given, str) and not any(i.get("type") == "message" for i in output):
        return evolve(answer, text=given)
    return answer


def responses_body(response: RecordedResponse, data: dict[str, Any]) -> Answer | Failure:
    if data.get("status") == "failed":
        return failed(response, _failure_body(data))
    if data.get("error") and not data.get("output"):
        return failed(response, data)
    return _whole_response(data, as_object(data.get("usage"), "usage"), {})


_TERMINAL = ("response.completed", "response.incomplete")


def _responses_kind(event: Event) -> str:
    payload = event.payload
    given = payload.get("type") if isinstance(payload, dict) else None
    return str(given or event.kind or "")


def responses_stream(response: RecordedResponse, text: str) -> Answer | Failure:
    meta: dict[str, Any] = {"id": None, "model": None, "status": None}
    usage: dict[str, Any] = {}
    final: dict[str, Any] | None = None
    items: dict[int, _Item] = {}
    opened: list[int] = []
    by_id: dict[str, int] = {}
    said_any = False
    following = [0]  # the index an item without output_index gets: one past the highest

    def item(payload: dict[str, Any], kind: str, opens: bool = False) -> _Item:
        """The item an event is about: by its ``output_index``, else the one its
        ``item_id`` names, else a new one (``opens``) or the last one opened."""
        index = payload.get("output_index")
        if isinstance(index, bool) or (index is not None and not isinstance(index, int)):
            raise Bad("output_index is not an integer")
        item_id = payload.get("item_id", as_object(payload.get("item"), "item").get("id"))
        if index is None and isinstance(item_id, str):
            index = by_id.get(item_id)
        if index is None:
            index = opened[-1] if opened and not opens else following[0]
        if index not in items:
            items[index] = _Item(kind)
            opened.append(index)
            following[0] = max(following[0], index + 1)
            if len(items) > LIMITS.max_blocks:
                raise Large("max_blocks")
        if isinstance(item_id, str) and item_id and "item" in payload:
            by_id[item_id] = index
        return items[index]

    def response_of(payload: dict[str, Any]) -> dict[str, Any]:
        body = as_object(payload.get("response"), "response")
        if isinstance(body.get("model"), str) and body["model"]:
            meta["model"] = body["model"]
        if meta["id"] is None and isinstance(body.get("id"), str):
            meta["id"] = body["id"]
        merge(usage, as_object(body.get("usage"), "usage"))
        return body

    for event in payloads(text, lambda e: _responses_kind(e) in _TERMINAL, "skipped"):
        if isinstance(event, str):
            return malformed(said_any)
        payload = event.payload
        if not isinstance(payload, dict):
            continue
        kind = _responses_kind(event)
        if kind == "error" or event.kind == "error":
            return stream_error(payload, response, said_any)
        if kind == "response.failed":
            failed = as_object(payload.get("response"), "response")
            return stream_error(_failure_body(failed), response, said_any)
        if kind in ("response.created", "response.in_progress", "response.queued"):
            response_of(payload)
        elif kind in _TERMINAL:
            final = response_of(payload)
            meta["status"] = as_text(final.get("status"), "status") or kind.removeprefix(
                "response."
            )
        elif kind in ("response.output_item.added", "response.output_item.done"):
            whole = as_object(payload.get("item"), "item")
            entry = item(payload, "message", opens=kind.endswith("added"))
            entry.kind = as_text(whole.get("type"), "item.type") or "message"
            entry.call_id = entry.call_id or as_text(whole.get("call_id"), "call_id") or ""
            entry.name = entry.name or as_text(whole.get("name"), "name") or ""
            if kind.endswith("done"):
                entry.whole = whole
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            piece = as_text(payload.get("delta"), "delta") or ""
            item(payload, "message").text.append(piece)
            said_any = said_any or bool(piece)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            piece = as_text(payload.get("delta"), "delta") or ""
            item(payload, "reasoning").reasoning.append(piece)
            said_any = said_any or bool(piece)
        elif kind == "response.function_call_arguments.delta":
            piece = as_text(payload.get("delta"), "delta") or ""
            item(payload, "function_call").arguments.append(piece)
    if not items and final is None:
        return empty_answer(response)
    if final is None:
        return Failure("connection", None, not said_any, "a stream cut before its last event")
    data = {**final, "status": meta["status"]}
    data["id"] = named(final.get("id")) or meta["id"]
    data["model"] = named(final.get("model")) or meta["model"]
    if as_array(final.get("output"), "output"):  # the completed response is the authority
        return _whole_response(data, usage or final.get("usage"), items)
    meta["incomplete_details"] = final.get("incomplete_details")
    meta["id"], meta["model"] = data["id"], data["model"]
    return _fold_items([items[i] for i in sorted(items)], meta, openai_usage(usage))
