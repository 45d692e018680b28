"""OpenAI Responses wire format: requests out, response objects and stream events in.

Requests are stateless (``store: false``): the whole history goes in ``input`` every time,
and reasoning comes back as ``reasoning`` items whose ``encrypted_content`` the next request
carries (see :attr:`~agentfsm.engine._messages.AssistantMessage.reasoning_items`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from attrs import define, field, frozen

from agentfsm.engine import (
    AssistantMessage,
    ChatResult,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)

from ._finish import normalize_finish
from ._limits import BadShape, Limits, TooLarge
from ._openai_wire import decode_arguments, safe_tool_call_id, unique_call_id
from ._shapes import Buffer, as_dict, opt_dict, opt_list, opt_str
from ._usage import merge_usage_fields, openai_usage

__all__ = [
    "ResponseAccumulator",
    "ResponsesQuirks",
    "TERMINAL_EVENTS",
    "build_request",
    "failure_body",
    "finish_reason",
    "parse_response",
]

TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")
"""Stream events that end a response (``response.failed`` as an error)."""


@frozen
class ResponsesQuirks:
    """What a Responses server accepts, when it differs from OpenAI's own API."""

    encrypted_reasoning: bool = True
    """Ask for ``include: ["reasoning.encrypted_content"]`` and send reasoning items back
    (``False`` for servers that reject the field)."""
    stream_with_tools: bool = True
    """Stream requests that offer tools; ``False`` sends those unstreamed."""
    explicit_tool_choice: bool = False
    """Send ``tool_choice: "auto"`` with tools (servers in front of llama.cpp leave the tools
    out of the prompt without it)."""


def _reasoning_input(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """A kept reasoning item as the next request sends it: summary and encrypted content,
    without the id (with ``store: false`` the server looks up no stored item)."""
    encrypted = item.get("encrypted_content")
    if not isinstance(encrypted, str) or not encrypted:
        return None
    summary = [
        {"type": "summary_text", "text": part["text"]}
        for part in item.get("summary") or ()
        if isinstance(part, Mapping) and isinstance(part.get("text"), str)
    ]
    return {"type": "reasoning", "summary": summary, "encrypted_content": encrypted}


def _user_item(message: UserMessage) -> dict[str, Any]:
    if not message.images:
        return {"role": "user", "content": message.content}
    parts: list[dict[str, Any]] = [{"type": "input_text", "text": message.content}]
    parts.extend(
        {"type": "input_image", "image_url": f"data:{image.media_type};base64,{image.data}"}
        for image in message.images
    )
    return {"role": "user", "content": parts}


def build_input(
    messages: Sequence[Message], quirks: ResponsesQuirks
) -> tuple[str | None, list[dict[str, Any]]]:
    """The ``instructions`` (the leading system messages) and the ``input`` items.

    Tool results whose call is no longer in the history (summarized away) are sent as user
    text, since the server rejects a ``function_call_output`` without its call."""
    leading: list[str] = []
    items: list[dict[str, Any]] = []
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, SystemMessage):
            if not items:
                leading.append(message.content)
            else:
                items.append({"role": "system", "content": message.content})
        elif isinstance(message, UserMessage):
            items.append(_user_item(message))
        elif isinstance(message, AssistantMessage):
            if quirks.encrypted_reasoning:
                for kept in message.reasoning_items:
                    reasoning = _reasoning_input(kept)
                    if reasoning is not None:
                        items.append(reasoning)
            if message.content:
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": message.content}],
                    }
                )
            open_calls = set()
            for call in message.tool_calls:
                call_id = safe_tool_call_id(call.id)
                open_calls.add(call_id)
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call_id,
                        "name": call.name,
                        "arguments": json.dumps(call.arguments, ensure_ascii=False),
                    }
                )
        elif isinstance(message, ToolMessage):
            call_id = safe_tool_call_id(message.tool_call_id)
            if call_id in open_calls:
                items.append(
                    {"type": "function_call_output", "call_id": call_id, "output": message.content}
                )
            else:
                text = f"[result of tool call {call_id}]\n{message.content}"
                items.append({"role": "user", "content": text})
    return ("\n\n".join(leading) if leading else None), items


def build_request(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    *,
    temperature: float | None,
    max_tokens: int | None,
    stream: bool,
    quirks: ResponsesQuirks | None = None,
) -> dict[str, Any]:
    """The JSON body of a ``/responses`` request."""
    quirks = quirks if quirks is not None else ResponsesQuirks()
    instructions, items = build_input(messages, quirks)
    body: dict[str, Any] = {"model": model, "input": items, "store": False}
    if instructions is not None:
        body["instructions"] = instructions
    if tools:
        if quirks.explicit_tool_choice:
            body["tool_choice"] = "auto"
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                "strict": False,
            }
            for t in tools
        ]
    if quirks.encrypted_reasoning:
        body["include"] = ["reasoning.encrypted_content"]
    if temperature is not None:
        body["temperature"] = temperature
    if max_tokens is not None:
        body["max_output_tokens"] = max_tokens
    if stream:
        body["stream"] = True
    return body


_UNFINISHED = ("queued", "in_progress")
"""Statuses of a response still being generated (a background response): nothing to use."""


def finish_reason(
    status: str | None, incomplete: str | None, has_calls: bool
) -> tuple[str | None, str | None]:
    """(normalized, raw) finish reason of a response's ``status`` and
    ``incomplete_details.reason``, through :func:`normalize_finish` as on the other wires:
    ``completed`` is ``stop`` (``tool_calls`` with calls), ``incomplete`` reads its reason
    (``max_output_tokens`` is ``length``, ``content_filter`` stays; an unknown reason, or
    none, is ``other`` with the raw string kept), any other status is read as a reason
    itself. ``queued`` and ``in_progress`` are :class:`BadShape` (code
    ``unfinished_response``): nothing was generated yet, and the loop cannot wait for it."""
    if status in _UNFINISHED:
        raise BadShape(
            f"the response is {status!r}: nothing was generated yet (a background response;"
            " the adapter asks for the finished answer and does not poll)",
            code="unfinished_response",
        )
    if status == "incomplete":
        if incomplete is None:  # no reason given: the status itself is kept
            return ("tool_calls" if has_calls else "other"), "incomplete"
        return normalize_finish(incomplete, has_calls)
    if status == "completed":
        return normalize_finish("stop", has_calls)
    return normalize_finish(status, has_calls)


def failure_body(response: Mapping[str, Any]) -> dict[str, Any]:
    """A ``failed`` response's ``error`` in the ``{"error": {...}}`` shape errors are read
    from (a failure without one is a ``server_error``)."""
    error = response.get("error")
    if not isinstance(error, Mapping):
        error = {"code": "server_error", "message": "the response failed without an error"}
    return {"error": dict(error)}


def _too_many(limits: Limits) -> TooLarge:
    return TooLarge(
        "max_tool_calls", f"the reply holds more than {limits.max_tool_calls} tool calls"
    )


@define
class _Item:
    """One output item as the stream builds it."""

    kind: str
    text: Buffer
    reasoning: Buffer
    arguments: Buffer
    id: str = ""
    call_id: str = ""
    name: str = ""
    counted: bool = False
    """Counted against ``Limits.max_tool_calls``."""
    done: Mapping[str, Any] | None = None
    """The whole item, once ``response.output_item.done`` gave it."""


def _texts(parts: Any, kinds: tuple[str, ...], key: str, where: str) -> str:
    out = []
    for part in opt_list(parts, where):
        if isinstance(part, Mapping) and part.get("type") in kinds:
            out.append(opt_str(part.get(key), f"{where}[].{key}") or "")
    return "".join(out)


def _kept(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a reasoning item keeps for the next request (``None``: nothing to send back)."""
    encrypted = opt_str(item.get("encrypted_content"), "reasoning.encrypted_content")
    if not encrypted:
        return None
    kept: dict[str, Any] = {"type": "reasoning", "encrypted_content": encrypted}
    if isinstance(item.get("id"), str):
        kept["id"] = item["id"]
    kept["summary"] = [
        {"type": "summary_text", "text": part["text"]}
        for part in opt_list(item.get("summary"), "reasoning.summary")
        if isinstance(part, Mapping) and isinstance(part.get("text"), str)
    ]
    return kept


@define
class _Folded:
    """Output items folded into the parts of an answer."""

    limits: Limits
    text: list[str] = field(factory=list)
    reasoning: list[str] = field(factory=list)
    kept: list[dict[str, Any]] = field(factory=list)
    calls: list[ToolCall] = field(factory=list)
    seen: set[str] = field(factory=set)

    def call(self, raw_id: str, name: str, arguments: Any) -> None:
        limits = self.limits
        if len(self.calls) >= limits.max_tool_calls:
            raise _too_many(limits)
        decoded, bad = decode_arguments(arguments, limits.max_json_depth, limits.max_argument_bytes)
        text = bad if bad is not None else json.dumps(decoded, sort_keys=True)
        call_id = unique_call_id(raw_id, len(self.calls), name, text, self.seen)
        self.calls.append(ToolCall(call_id, name, decoded, raw_arguments=bad))

    def item(self, item: Mapping[str, Any], streamed: _Item | None = None) -> None:
        """Fold one whole output item in (unknown types are skipped). What ``streamed``
        gathered from the item's deltas stands in for a part the whole item leaves empty."""
        kind = item.get("type")
        if kind == "message":
            content = item.get("content")
            if isinstance(content, str):
                text = content
            else:
                text = _texts(content, ("output_text", "text"), "text", "message.content")
                text = text or _texts(content, ("refusal",), "refusal", "message.content")
            self.text.append(text or (streamed.text.text() if streamed is not None else ""))
        elif kind == "reasoning":
            summary = _texts(item.get("summary"), ("summary_text",), "text", "reasoning.summary")
            content = _texts(
                item.get("content"), ("reasoning_text", "text"), "text", "reasoning.content"
            )
            thought = summary or content
            self.reasoning.append(thought or (streamed.reasoning.text() if streamed else ""))
            kept = _kept(item)
            if kept is not None:
                self.kept.append(kept)
        elif kind == "function_call":
            call_id = opt_str(item.get("call_id"), "function_call.call_id") or ""
            name = opt_str(item.get("name"), "function_call.name") or ""
            name = name or (streamed.name if streamed is not None else "")
            arguments = item.get("arguments")
            if streamed is not None and not arguments and streamed.arguments:
                arguments = streamed.arguments.text()
            self.call(call_id or (streamed.call_id if streamed else ""), name, arguments)

    def result(
        self, data: Mapping[str, Any], usage: Mapping[str, Any] | None, status: str | None
    ) -> ChatResult:
        reply = AssistantMessage(
            "".join(self.text),
            tool_calls=self.calls,
            reasoning="\n\n".join(r for r in self.reasoning if r) or None,
            reasoning_items=self.kept,
        )
        details = opt_dict(data.get("incomplete_details"), "incomplete_details")
        reason = opt_str(details.get("reason"), "incomplete_details.reason")
        finish, raw = finish_reason(status, reason, bool(self.calls))
        return ChatResult(
            reply,
            openai_usage(usage),
            finish,
            data.get("model") if isinstance(data.get("model"), str) else None,
            data.get("id") if isinstance(data.get("id"), str) else None,
            raw,
        )


def parse_response(data: Mapping[str, Any], limits: Limits | None = None) -> ChatResult:
    """A response object (``BadShape``/``TooLarge`` when it breaks the format or the
    bounds). A ``failed`` response is not an answer: check :func:`failure_body` first."""
    return _fold_response(data, limits if limits is not None else Limits(), {})


def _fold_response(
    data: Mapping[str, Any], limits: Limits, streamed: Mapping[int, _Item]
) -> ChatResult:
    """A response object's output items folded into an answer; ``streamed`` (by position)
    stands in for a part an item leaves empty."""
    output = opt_list(data.get("output"), "output")
    calls = sum(1 for i in output if isinstance(i, Mapping) and i.get("type") == "function_call")
    if calls > limits.max_tool_calls:
        raise _too_many(limits)
    if len(output) > limits.max_blocks:
        raise TooLarge("max_blocks", f"the reply holds more than {limits.max_blocks} items")
    folded = _Folded(limits)
    for position, item in enumerate(output):
        folded.item(as_dict(item, "output[]"), streamed.get(position))
    text = data.get("output_text")
    if not folded.text and isinstance(text, str):  # the SDKs' convenience field
        folded.text.append(text)
    status = opt_str(data.get("status"), "status") or "completed"
    return folded.result(data, opt_dict(data.get("usage"), "usage"), status)


def _index(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadShape(f"`output_index` is a {type(value).__name__}, expected an integer")
    return value


@define
class ResponseAccumulator:
    """Folds Responses stream events into one :class:`ChatResult`, within ``limits``.

    The terminal event's ``response.output`` is the answer when it holds items (the item
    an event stream built at the same position stands in for a part a final item leaves
    empty); otherwise each output item is built from its deltas and replaced by the whole
    item ``response.output_item.done`` carries."""

    limits: Limits = field(factory=Limits)
    items: dict[int, _Item] = field(factory=dict, init=False)
    order: list[int] = field(factory=list, init=False)
    by_id: dict[str, int] = field(factory=dict, init=False)
    usage: dict[str, Any] = field(factory=dict, init=False)
    final: Mapping[str, Any] | None = field(default=None, init=False)
    """The response object of the terminal event."""
    status: str | None = field(default=None, init=False)
    model: str | None = field(default=None, init=False)
    response_id: str | None = field(default=None, init=False)
    calls: int = field(default=0, init=False)
    next_index: int = field(default=0, init=False)
    """The index an item without ``output_index`` gets: one past the highest so far."""
    budget: list[int] = field(init=False)

    def __attrs_post_init__(self) -> None:
        self.budget = [self.limits.max_body_bytes]

    def _response(self, data: Mapping[str, Any]) -> Mapping[str, Any]:
        response = opt_dict(data.get("response"), "response")
        if isinstance(response.get("model"), str) and response["model"]:
            self.model = response["model"]
        if self.response_id is None and isinstance(response.get("id"), str):
            self.response_id = response["id"]
        merge_usage_fields(self.usage, opt_dict(response.get("usage"), "response.usage"))
        return response

    def _slot(
        self, data: Mapping[str, Any], kind: str = "", new: bool = False
    ) -> tuple[int, _Item]:
        """The item an event is about: by ``output_index``, else by ``item_id``, else a new
        one (``new``) or the latest one."""
        index = _index(data.get("output_index"))
        item_id = data.get("item_id", opt_dict(data.get("item"), "item").get("id"))
        if index is None and isinstance(item_id, str):
            index = self.by_id.get(item_id)
        if index is None:
            index = self.order[-1] if self.order and not new else self.next_index
        entry = self.items.get(index)
        if entry is None:
            if len(self.items) >= self.limits.max_blocks:
                bound = self.limits.max_blocks
                raise TooLarge("max_blocks", f"the reply holds more than {bound} items")
            entry = _Item(
                kind or "message", Buffer(self.budget), Buffer(self.budget), Buffer(self.budget)
            )
            self.items[index] = entry
            self.order.append(index)
            self.next_index = max(self.next_index, index + 1)
        return index, entry

    def _item(self, data: Mapping[str, Any], kind: str = "") -> _Item:
        return self._slot(data, kind)[1]

    def _start(self, data: Mapping[str, Any], raw: Mapping[str, Any], new: bool) -> _Item:
        kind = opt_str(raw.get("type"), "item.type") or "message"
        index, entry = self._slot(data, kind, new)
        entry.kind = kind
        item_id = opt_str(raw.get("id"), "item.id")
        if item_id:
            entry.id = item_id
            self.by_id[item_id] = index
        call_id = opt_str(raw.get("call_id"), "item.call_id")
        if kind == "function_call" and not entry.counted:
            entry.counted = True
            self.calls += 1
            if self.calls > self.limits.max_tool_calls:
                raise _too_many(self.limits)
        entry.call_id = entry.call_id or call_id or ""
        entry.name = entry.name or (opt_str(raw.get("name"), "item.name") or "")
        return entry

    def add(self, kind: str, data: Mapping[str, Any]) -> tuple[str, str]:
        """Fold one event in; returns the new (text, reasoning) pieces it carried."""
        if kind in ("response.created", "response.in_progress", "response.queued"):
            self._response(data)
        elif kind in TERMINAL_EVENTS:
            self.final = self._response(data)
            status = opt_str(self.final.get("status"), "response.status")
            self.status = status or kind.removeprefix("response.")
        elif kind == "response.output_item.added":
            self._start(data, opt_dict(data.get("item"), "item"), new=True)
        elif kind == "response.output_item.done":
            raw = opt_dict(data.get("item"), "item")
            self._start(data, raw, new=False).done = raw
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            piece = opt_str(data.get("delta"), "delta") or ""
            self._item(data).text.append(piece)
            return piece, ""
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            piece = opt_str(data.get("delta"), "delta") or ""
            self._item(data, "reasoning").reasoning.append(piece)
            return "", piece
        elif kind == "response.function_call_arguments.delta":
            piece = opt_str(data.get("delta"), "delta") or ""
            entry = self._item(data, "function_call")
            if len(entry.arguments) + len(piece) > self.limits.max_argument_bytes:
                raise TooLarge(
                    "max_argument_bytes",
                    f"a tool call's arguments exceed {self.limits.max_argument_bytes} bytes",
                )
            entry.arguments.append(piece)
        return "", ""

    def result(self) -> ChatResult:
        """The accumulated answer."""
        folded = _Folded(self.limits)
        final = self.final if self.final is not None else {}
        if opt_list(final.get("output"), "response.output"):
            data = {**final, "status": self.status, "usage": self.usage or final.get("usage")}
            data.update({"model": self.model, "id": self.response_id, **_meta(final)})
            return _fold_response(data, self.limits, self.items)
        for index in sorted(self.order):  # the output's order, whatever the events' order
            entry = self.items[index]
            if entry.done is not None:
                folded.item(entry.done, entry)
            elif entry.kind == "function_call":
                folded.call(entry.call_id, entry.name, entry.arguments.text())
            elif entry.kind == "reasoning":
                folded.reasoning.append(entry.reasoning.text())
            else:
                folded.text.append(entry.text.text())
        data = {"model": self.model, "id": self.response_id, **_meta(final)}
        return folded.result(data, self.usage, self.status)

    @property
    def empty(self) -> bool:
        """Nothing usable arrived: no item and no terminal event."""
        return not self.order and self.final is None


def _meta(final: Mapping[str, Any]) -> dict[str, Any]:
    """What the final response says of itself: its id and model (those of earlier events
    stand when it gives none), and why it is incomplete."""
    out: dict[str, Any] = {}
    if final.get("incomplete_details") is not None:
        out["incomplete_details"] = final["incomplete_details"]
    for key in ("model", "id"):
        if isinstance(final.get(key), str) and final[key]:
            out[key] = final[key]
    return out
