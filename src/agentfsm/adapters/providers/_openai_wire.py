"""Chat Completions wire format: requests out, responses and stream chunks in.

The stream accumulator survives the deviations real servers show (see
``CONFORMANCE-NOTES.md`` §2): tool-call deltas without ``index``, ``id``/``name`` repeated
in every chunk, a name split over fragments, empty ids, arguments as an object or a whole
string or many fragments, a first fragment ``""``, no-argument tools, trailing empty deltas,
``choices: []`` chunks, ``finish_reason: "stop"`` with tool calls, usage on every chunk, on
the last one or under ``x_groq``, ``content: null`` versus ``""``, and the deprecated
single ``function_call`` (a body's ``message.function_call``, a stream's
``delta.function_call``), read as a tool call when no ``tool_calls`` come with it.
"""

from __future__ import annotations

import hashlib
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
    utf8_bytes,
)

from ._finish import normalize_finish
from ._json_end import JsonEnd
from ._limits import BadShape, Limits, TooLarge, loads_bounded
from ._shapes import Buffer, as_dict, opt_dict, opt_list, opt_str
from ._think import ThinkSplitter, split_think
from ._usage import merge_usage_fields, openai_usage

__all__ = [
    "OpenAIQuirks",
    "StreamAccumulator",
    "build_request",
    "decode_arguments",
    "normalize_finish_reason",
    "parse_completion",
    "safe_tool_call_id",
    "unique_call_id",
]

MAX_TOOL_CALL_ID = 40


@frozen
class OpenAIQuirks:
    """What a server accepts, when it differs from OpenAI's own API.

    The conformance kit can suggest a profile for an endpoint.
    """

    stream_options: bool = True
    """Send ``stream_options: {"include_usage": true}`` (Groq and some Azure deployments
    reject it)."""
    stream_with_tools: bool = True
    """Stream requests that offer tools; ``False`` sends those unstreamed (llama-cpp-python
    answers a streamed automatic tool choice with an empty 200 stream)."""
    null_assistant_content: bool = True
    """An assistant turn with only tool calls sends ``content: null``; ``False`` sends
    ``""`` (LM Studio and Ollama reject null)."""
    max_tokens_field: str = "max_tokens"
    """``max_tokens``, or ``max_completion_tokens`` for reasoning models."""
    explicit_tool_choice: bool = False
    """Send ``tool_choice: "auto"`` with tools (llama-cpp-python's function-calling chat
    formats leave the tools out of the prompt without it)."""
    tool_string_max_length: int | None = None
    """Give every string in the tools' parameter schemas a ``maxLength`` (at most this):
    llama-cpp-python generates tool arguments under a grammar built from the schema and
    ignores ``max_tokens`` there, so an unbounded string can run to the context window."""
    think_tags: bool = False
    """Read a ``<think>…</think>`` that opens an answer as reasoning, streamed or not
    (Qwen3, DeepSeek-R1 and their distills behind routers that pass the model's text
    through unparsed). An unclosed ``<think>`` makes the whole answer reasoning."""


def cap_strings(schema: Any, limit: int) -> Any:
    """A copy of a JSON schema whose string types all carry ``maxLength <= limit``."""
    if isinstance(schema, list):
        return [cap_strings(item, limit) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: cap_strings(value, limit) for key, value in schema.items()}
    kinds = out.get("type")
    if kinds == "string" or (isinstance(kinds, list) and "string" in kinds):
        given = out.get("maxLength")
        out["maxLength"] = min(given, limit) if isinstance(given, int) else limit
    return out


def safe_tool_call_id(call_id: str) -> str:
    """An id any provider accepts: at most 40 characters, stable for the same input."""
    if 0 < len(call_id) <= MAX_TOOL_CALL_ID:
        return call_id
    return "call_" + hashlib.sha256(utf8_bytes(call_id)).hexdigest()[:24]


def _tool_call_json(call: ToolCall) -> dict[str, Any]:
    return {
        "id": safe_tool_call_id(call.id),
        "type": "function",
        "function": {
            "name": call.name,
            "arguments": json.dumps(call.arguments, ensure_ascii=False),
        },
    }


def build_messages(messages: Sequence[Message], quirks: OpenAIQuirks) -> list[dict[str, Any]]:
    """Messages in Chat Completions form. Tool results whose call is no longer in the history
    (summarized away) are sent as user text, since servers reject orphaned tool messages."""
    out: list[dict[str, Any]] = []
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, SystemMessage):
            out.append({"role": "system", "content": message.content})
        elif isinstance(message, UserMessage):
            if message.images:
                parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
                parts.extend(
                    {
                        "type": "image_url",
                        "image_url": {"url": f"data:{image.media_type};base64,{image.data}"},
                    }
                    for image in message.images
                )
                out.append({"role": "user", "content": parts})
            else:
                out.append({"role": "user", "content": message.content})
        elif isinstance(message, AssistantMessage):
            item: dict[str, Any] = {"role": "assistant"}
            if message.tool_calls:
                item["content"] = message.content or (None if quirks.null_assistant_content else "")
                item["tool_calls"] = [_tool_call_json(c) for c in message.tool_calls]
                open_calls = {safe_tool_call_id(c.id) for c in message.tool_calls}
            else:
                item["content"] = message.content
                open_calls = set()
            out.append(item)
        elif isinstance(message, ToolMessage):
            call_id = safe_tool_call_id(message.tool_call_id)
            if call_id in open_calls:
                out.append({"role": "tool", "tool_call_id": call_id, "content": message.content})
            else:
                out.append(
                    {
                        "role": "user",
                        "content": f"[result of tool call {call_id}]\n{message.content}",
                    }
                )
    return out


def build_request(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    *,
    temperature: float | None,
    max_tokens: int | None,
    stream: bool,
    quirks: OpenAIQuirks,
) -> dict[str, Any]:
    """The JSON body of a ``/chat/completions`` request."""
    body: dict[str, Any] = {"model": model, "messages": build_messages(messages, quirks)}
    if tools:
        if quirks.explicit_tool_choice:
            body["tool_choice"] = "auto"
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters
                    if quirks.tool_string_max_length is None
                    else cap_strings(t.parameters, quirks.tool_string_max_length),
                },
            }
            for t in tools
        ]
    if temperature is not None:
        body["temperature"] = temperature
    if max_tokens is not None:
        body[quirks.max_tokens_field] = max_tokens
    if stream:
        body["stream"] = True
        if quirks.stream_options:
            body["stream_options"] = {"include_usage": True}
    return body


def decode_arguments(
    raw: Any, max_depth: int = Limits.max_json_depth, max_bytes: int | None = None
) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments as a dict, and the raw text when it did not decode to one.

    Accepts an object (some servers send one), a JSON string, or nothing (no-argument tools).
    Text longer than ``max_bytes`` raises ``TooLarge``; nesting past ``max_depth`` raises
    ``BadShape``.
    """
    if isinstance(raw, Mapping):
        return dict(raw), None
    if raw is None:
        return {}, None
    text = raw if isinstance(raw, str) else json.dumps(raw)
    if max_bytes is not None and len(text) > max_bytes:
        raise TooLarge("max_argument_bytes", f"a tool call's arguments exceed {max_bytes} bytes")
    if not text.strip():
        return {}, None
    try:
        value = loads_bounded(text, max_depth)
    except ValueError:
        return {}, text
    if isinstance(value, dict):
        return value, None
    if isinstance(value, str):  # doubly encoded
        inner, bad = decode_arguments(value, max_depth, max_bytes)
        return (inner, None) if bad is None else ({}, text)
    return {}, text


def normalize_finish_reason(reason: str | None, has_tool_calls: bool) -> str | None:
    """``reason`` in the common vocabulary (:data:`~agentfsm.adapters.providers.
    FINISH_REASONS`): ``tool_calls`` whenever calls are present (some servers say ``stop``),
    ``other`` for a reason not known, ``stop`` for an empty one."""
    return normalize_finish(reason, has_tool_calls)[0]


def _text(value: Any) -> str:
    """Message content as text: a string, ``null``, or a list of parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and part.get("type") in (None, "text"):
                parts.append(opt_str(part.get("text"), "content[].text") or "")
        return "".join(parts)
    raise BadShape(f"`content` is a {type(value).__name__}, expected a string or an array")


def _reasoning(holder: Mapping[str, Any]) -> str:
    """Reasoning text of a message or delta (``reasoning_content``, ``reasoning``, or
    Mistral's ``thinking`` parts)."""
    for key in ("reasoning_content", "reasoning"):
        value = holder.get(key)
        if value:
            return opt_str(value, key) or ""
    return _thinking(holder.get("content"))


def _thinking(value: Any) -> str:
    """Reasoning parts of a list content (Mistral's ``thinking`` parts)."""
    if not isinstance(value, list):
        return ""
    out = []
    for part in value:
        if isinstance(part, Mapping) and part.get("type") == "thinking":
            inner = part.get("thinking")
            out.append(_text(inner) if not isinstance(inner, str) else inner)
    return "".join(out)


def unique_call_id(raw_id: Any, index: int, name: str, arguments: str, seen: set[str]) -> str:
    """The id of the ``index``-th tool call of one reply: the provider's own, unless it is
    empty or already taken in this reply (``seen``, which this adds to), then one derived
    from the call's position, name and arguments. Ids within one reply are thus unique."""
    call_id = raw_id if isinstance(raw_id, str) else ""
    salt = 0
    while not call_id or call_id in seen:
        seed = f"{index}:{name}:{arguments}" + (f":{salt}" if salt else "")
        call_id = f"call_{index}_{hashlib.sha256(utf8_bytes(seed)).hexdigest()[:20]}"
        salt += 1
    seen.add(call_id)
    return call_id


def _first_choice(choices: list[Any]) -> Mapping[str, Any]:
    choice = next((c for c in choices if isinstance(c, Mapping) and c.get("index", 0) == 0), None)
    if choice is None and choices:
        choice = as_dict(choices[0], "choices[0]")
    return choice or {}


def parse_completion(
    data: Mapping[str, Any], limits: Limits | None = None, *, think_tags: bool = False
) -> ChatResult:
    """A non-streamed response body (``BadShape``/``TooLarge`` when it breaks the format or
    the bounds); ``think_tags``: see :attr:`OpenAIQuirks.think_tags`."""
    limits = limits if limits is not None else Limits()
    choice = _first_choice(opt_list(data.get("choices"), "choices"))
    message = opt_dict(choice.get("message"), "choices[0].message")
    found: list[tuple[Any, str, Any]] = []
    for item in opt_list(message.get("tool_calls"), "message.tool_calls"):
        raw = as_dict(item, "message.tool_calls[]")
        function = opt_dict(raw.get("function"), "tool_calls[].function")
        name = opt_str(function.get("name"), "function.name") or ""
        found.append((raw.get("id"), name, function.get("arguments")))
        if len(found) > limits.max_tool_calls:
            raise TooLarge(
                "max_tool_calls", f"the reply holds more than {limits.max_tool_calls} tool calls"
            )
    legacy = opt_dict(message.get("function_call"), "message.function_call")
    name = opt_str(legacy.get("name"), "function_call.name") or ""
    if not found and (name or legacy.get("arguments")):
        # The deprecated single call (gpt-4-0613 …); beside tool calls, only their mirror
        # (llama.cpp sends both).
        found.append((None, name, legacy.get("arguments")))
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for index, (raw_id, name, raw_arguments) in enumerate(found):
        arguments, bad = decode_arguments(
            raw_arguments, limits.max_json_depth, limits.max_argument_bytes
        )
        text = bad if bad is not None else json.dumps(arguments, sort_keys=True)
        calls.append(
            ToolCall(
                unique_call_id(raw_id, index, name, text, seen),
                name,
                arguments,
                raw_arguments=bad,
            )
        )
    content = _text(message.get("content"))
    if not content and isinstance(message.get("refusal"), str):
        content = message["refusal"]
    reasoning = _reasoning(message)
    if think_tags:
        content, thought = split_think(content)
        reasoning += thought
    reply = AssistantMessage(content, tool_calls=calls, reasoning=reasoning or None)
    groq = opt_dict(data.get("x_groq"), "x_groq")
    finish, raw_reason = normalize_finish(
        opt_str(choice.get("finish_reason"), "finish_reason"), bool(calls)
    )
    return ChatResult(
        reply,
        openai_usage(opt_dict(data.get("usage"), "usage") or groq.get("usage")),
        finish,
        data.get("model") if isinstance(data.get("model"), str) else None,
        data.get("id") if isinstance(data.get("id"), str) else None,
        raw_reason,
    )


@define
class _PartialCall:
    index: int | None
    id: str = ""
    name: str = ""
    fragments: Buffer = field(factory=Buffer)
    object_args: dict[str, Any] | None = None
    end: JsonEnd = field(factory=JsonEnd)
    """Where the argument text's JSON ends (asked only of calls without an index)."""

    @property
    def given(self) -> bool:
        """Something of the call came: a name, an id or arguments (a fragment carrying none
        makes no call)."""
        return bool(self.name or self.id or self.fragments or self.object_args is not None)

    def complete(self) -> bool:
        """Its arguments are already one whole JSON object."""
        return self.object_args is not None or self.end.whole(self.fragments.text())

    def add(self, raw: Mapping[str, Any], limits: Limits) -> None:
        """One fragment: the first id given is the call's; name and argument pieces are
        appended (a name equal to the whole name so far is a repeat, as servers that send
        the name in every fragment do)."""
        raw_id = raw.get("id")
        if isinstance(raw_id, str) and raw_id and not self.id:
            self.id = raw_id
        function = opt_dict(raw.get("function"), "function")
        name = opt_str(function.get("name"), "function.name") or ""
        if name and name != self.name:
            self.name += name
        arguments = function.get("arguments")
        if isinstance(arguments, Mapping):
            self.object_args = dict(arguments)
        elif isinstance(arguments, str) and arguments:
            if len(self.fragments) + len(arguments) > limits.max_argument_bytes:
                raise TooLarge(
                    "max_argument_bytes",
                    f"a tool call's arguments exceed {limits.max_argument_bytes} bytes",
                )
            self.fragments.append(arguments)
            if self.index is None:
                self.end.feed(arguments)
        elif arguments is not None and not isinstance(arguments, str):
            raise BadShape(
                f"`function.arguments` is a {type(arguments).__name__}, expected a string"
            )


def _opens_another(last: _PartialCall, raw: Mapping[str, Any]) -> bool:
    """Whether a fragment without an index belongs to a call after ``last``: it carries an
    id other than ``last``'s; or, without an id, it names another tool, or names the same
    tool again with arguments that open a JSON value while ``last``'s are already whole (a
    second call of that tool: appended, they would no longer be JSON)."""
    raw_id = raw.get("id") if isinstance(raw.get("id"), str) else ""
    if raw_id:
        return bool(last.id) and raw_id != last.id
    function = opt_dict(raw.get("function"), "function")
    name = opt_str(function.get("name"), "function.name") or ""
    if not name:
        return False
    if name != last.name:
        return bool(last.name)
    arguments = function.get("arguments")
    opens = isinstance(arguments, Mapping) or (
        isinstance(arguments, str) and arguments.lstrip()[:1] in ("{", '"')
    )
    return opens and last.complete()


@define
class StreamAccumulator:
    """Folds Chat Completions stream chunks into one :class:`ChatResult`, within ``limits``
    (``TooLarge``/``BadShape`` when a chunk breaks them).

    Tool-call fragments are keyed by their ``index``, as the wire documents: each index is
    one call, its name and argument pieces appended in order, its first id kept; the calls
    come out in the order of their indexes. A fragment without an index continues the last
    call unless :func:`_opens_another` says it starts the next one. The deprecated
    ``delta.function_call`` pieces make one call, when no tool call came beside them."""

    limits: Limits = field(factory=Limits)
    think_tags: bool = field(default=False, kw_only=True)
    """Split a leading ``<think>…</think>`` of the text into reasoning (see
    :attr:`OpenAIQuirks.think_tags`)."""
    text: Buffer = field(init=False)
    reasoning: Buffer = field(init=False)
    splitter: ThinkSplitter | None = field(default=None, init=False)
    calls: list[_PartialCall] = field(factory=list, init=False)
    by_index: dict[int, _PartialCall] = field(factory=dict, init=False)
    legacy: _PartialCall | None = field(default=None, init=False)
    """The deprecated ``function_call`` being streamed."""
    usage: dict[str, Any] = field(factory=dict, init=False)
    finish_reason: str | None = field(default=None, init=False)
    empty_finish: bool = field(default=False, init=False)
    """A chunk said ``finish_reason: ""`` (read as ``stop`` when no other reason came)."""
    model: str | None = field(default=None, init=False)
    response_id: str | None = field(default=None, init=False)
    chunks: int = field(default=0, init=False)
    saw_choice: bool = field(default=False, init=False)
    budget: list[int] = field(init=False)

    def __attrs_post_init__(self) -> None:
        self.budget = [self.limits.max_body_bytes]
        self.text = Buffer(self.budget)
        self.reasoning = Buffer(self.budget)
        if self.think_tags:
            self.splitter = ThinkSplitter()

    def add(self, chunk: Mapping[str, Any]) -> tuple[str, str]:
        """Fold one chunk in; returns the new (text, reasoning) pieces it carried."""
        self.chunks += 1
        if isinstance(chunk.get("model"), str) and chunk.get("model"):
            self.model = chunk["model"]
        if self.response_id is None and isinstance(chunk.get("id"), str) and chunk.get("id"):
            self.response_id = chunk["id"]
        usage = chunk.get("usage")
        if usage is None:
            usage = opt_dict(chunk.get("x_groq"), "x_groq").get("usage")
        merge_usage_fields(self.usage, opt_dict(usage, "usage"))
        new_text, new_reasoning = "", ""
        for choice in opt_list(chunk.get("choices"), "choices"):
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue  # n > 1: the loop reads the first choice only
            self.saw_choice = True
            delta = opt_dict(choice.get("delta") or choice.get("message"), "choices[].delta")
            piece = _text(delta.get("content"))
            thought = _reasoning(delta)
            if isinstance(delta.get("refusal"), str):
                piece += delta["refusal"]
            if self.splitter is not None and piece:
                piece, tagged = self.splitter.feed(piece)
                thought += tagged
            if piece:
                self.text.append(piece)
                new_text += piece
            if thought:
                self.reasoning.append(thought)
                new_reasoning += thought
            for raw in opt_list(delta.get("tool_calls"), "delta.tool_calls"):
                fragment = as_dict(raw, "delta.tool_calls[]")
                self._slot(fragment).add(fragment, self.limits)
            legacy = opt_dict(delta.get("function_call"), "delta.function_call")
            if legacy:
                if self.legacy is None:
                    self.legacy = self._new_slot(None, listed=False)
                self.legacy.add({"function": legacy}, self.limits)
            finish = opt_str(choice.get("finish_reason"), "finish_reason")
            if finish:
                self.finish_reason = finish
            elif finish == "":
                self.empty_finish = True
        return new_text, new_reasoning

    def _new_slot(self, index: int | None, listed: bool = True) -> _PartialCall:
        count = len(self.calls) + (self.legacy is not None)
        if count >= self.limits.max_tool_calls:
            raise TooLarge(
                "max_tool_calls",
                f"the reply holds more than {self.limits.max_tool_calls} tool calls",
            )
        slot = _PartialCall(index, fragments=Buffer(self.budget))
        if listed:
            self.calls.append(slot)
        return slot

    def _slot(self, raw: Mapping[str, Any]) -> _PartialCall:
        index = raw.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            slot = self.by_index.get(index)
            if slot is None:
                slot = self.by_index[index] = self._new_slot(index)
            return slot
        last = self.calls[-1] if self.calls else None
        if last is None or _opens_another(last, raw):
            return self._new_slot(None)
        return last

    def finish(self) -> tuple[str, str]:
        """The stream ended: the (text, reasoning) held back while a ``<think>`` tag could
        still be forming (nothing without ``think_tags``); :meth:`result` calls it too."""
        if self.splitter is None:
            return "", ""
        text, reasoning = self.splitter.finish()
        if text:
            self.text.append(text)
        if reasoning:
            self.reasoning.append(reasoning)
        return text, reasoning

    def result(self) -> ChatResult:
        """The accumulated answer."""
        self.finish()
        calls: list[ToolCall] = []
        seen: set[str] = set()
        limits = self.limits
        slots = sorted(self.calls, key=lambda s: (s.index is None, s.index or 0))
        slots = [s for s in slots if s.given]
        if self.legacy is not None and not slots:  # beside tool calls, only their mirror
            slots.append(self.legacy)
        for index, slot in enumerate(s for s in slots if s.given):
            if slot.object_args is not None:
                arguments, bad = slot.object_args, None
            else:
                arguments, bad = decode_arguments(
                    slot.fragments.text(), limits.max_json_depth, limits.max_argument_bytes
                )
            text = bad if bad is not None else json.dumps(arguments, sort_keys=True)
            calls.append(
                ToolCall(
                    unique_call_id(slot.id, index, slot.name, text, seen),
                    slot.name,
                    arguments,
                    raw_arguments=bad,
                )
            )
        reply = AssistantMessage(
            self.text.text(), tool_calls=calls, reasoning=self.reasoning.text() or None
        )
        given = self.finish_reason
        if given is None and self.empty_finish:
            given = ""
        finish, raw_reason = normalize_finish(given, bool(calls))
        return ChatResult(
            reply, openai_usage(self.usage), finish, self.model, self.response_id, raw_reason
        )

    @property
    def empty(self) -> bool:
        """Nothing usable arrived: no text, no calls, no finish."""
        return (
            not self.text
            and not any(s.given for s in self.calls)
            and (self.legacy is None or not self.legacy.given)
            and self.finish_reason is None
            and (self.splitter is None or not self.splitter.fed)
        )
