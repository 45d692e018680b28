"""One recorded exchange as a check's corpus invariant sees it.

The corpus tier (:mod:`.corpus`) serves a recorded response to the adapter under test and
hands each check that declares a corpus invariant (``Check.corpus``) a
:class:`RecordedExchange`: what the recorded bytes say (:class:`RecordedReply`) and what the
adapter made of them. The check answers with a :class:`Verdict`, or ``None`` when the
exchange does not exercise it.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from contextlib import suppress
from typing import Any, TypeAlias

from attrs import define, field, frozen

from agentfsm.adapters.providers import ProviderError, RecordedResponse
from agentfsm.engine import ChatResult

from ._context import Wire

__all__ = [
    "CALL_TIMEOUT",
    "CallOutcome",
    "CorpusJudge",
    "RecordedCall",
    "RecordedExchange",
    "RecordedReply",
    "Verdict",
    "ints",
    "on_error",
    "on_success",
    "parse_reply",
    "verdict",
]

CALL_TIMEOUT = 30.0
"""Seconds one replayed call may take; past that it counts as a hang."""

CallOutcome: TypeAlias = ChatResult | Exception | None  # what a call gave; ``None``: it hung


@define
class RecordedCall:
    """One tool call as the recorded bytes carry it."""

    id: str = ""
    name: str = ""
    text: str = ""
    """The argument fragments, concatenated."""
    blank: bool = False
    """A later fragment carries an empty id or name."""

    def arguments(self) -> dict[str, Any] | None:
        """The arguments as a JSON object; ``None`` when they are not one."""
        try:
            value = json.loads(self.text) if self.text.strip() else {}
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


@define
class RecordedReply:
    """What the recorded bytes of one response say."""

    status: int
    streamed: bool = False
    error: str | None = None
    """The error body or event, when the response is a failure."""
    terminal: bool = False
    """The stream ends with ``[DONE]`` or ``message_stop``."""
    finish: list[str] = field(factory=list)
    text: str = ""
    model: str = ""
    calls: dict[Any, RecordedCall] = field(factory=dict)
    no_index: bool = False
    """Tool-call fragments without an ``index``."""
    usages: list[dict[str, Any]] = field(factory=list)
    """One per payload carrying usage."""
    empty_choices_usage: dict[str, Any] | None = None


def parse_reply(response: RecordedResponse, wire: Wire) -> RecordedReply:
    """Read one recorded response the way neither adapter does: straight from the bytes."""
    raw = RecordedReply(response.status)
    text = response.body.decode("utf-8", "replace")
    content_type = {k.lower(): v for k, v in response.headers}.get("content-type", "")
    payloads: list[Any] = []
    if "event-stream" in content_type or re.search(r"^data:", text, re.M):
        raw.streamed = True
        for line in re.split(r"\r\n|\r|\n", text):
            if line.startswith("event:") and line[6:].strip() == "error":
                raw.error = raw.error or "event: error"
            elif line.startswith("data:"):
                raw.terminal = raw.terminal or line[5:].strip() == "[DONE]"
                with suppress(ValueError):
                    payloads.append(json.loads(line[5:]))
    elif text.strip():
        with suppress(ValueError):
            payloads.append(json.loads(text))
    if response.status >= 400:
        raw.error = text or f"HTTP {response.status}"
    elif raw.streamed and not payloads and not raw.terminal:
        raw.error = "an empty 200 stream"  # Q26: never an empty success
    for payload in (p for p in payloads if isinstance(p, dict)):
        if raw.streamed and (payload.get("type") == "error" or payload.get("error")):
            raw.error = json.dumps(payload)
        holders = (payload, payload.get("message"), payload.get("x_groq"))
        raw.usages += [h["usage"] for h in holders if isinstance(h, dict) and h.get("usage")][:1]
        read = {"anthropic": _anthropic, "openai-responses": _responses}.get(wire, _openai)
        read(raw, payload)
    return raw


def _openai(raw: RecordedReply, payload: dict[str, Any]) -> None:
    raw.model = str(payload.get("model") or raw.model)
    choices = payload.get("choices")
    if choices == [] and isinstance(payload.get("usage"), dict):
        raw.empty_choices_usage = payload["usage"]
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            continue
        if choice.get("finish_reason"):
            raw.finish.append(str(choice["finish_reason"]))
        part = choice.get("delta" if raw.streamed else "message")  # some streams send both
        if not isinstance(part, dict):
            continue
        for value in (part.get("content"), part.get("refusal")):
            if isinstance(value, list):  # content parts: only the visible text counts
                parts = [p for p in value if isinstance(p, dict) and p.get("type") == "text"]
                value = "".join(str(p.get("text", "")) for p in parts)
            raw.text += value if isinstance(value, str) else ""
        last: Any = None
        fragments = [f for f in part.get("tool_calls") or [] if isinstance(f, dict)]
        for position, fragment in enumerate(fragments):
            function = fragment.get("function") or {}
            fid, name, args = fragment.get("id"), function.get("name"), function.get("arguments")
            if not raw.streamed:
                key: Any = ("n", len(raw.calls))
            elif "index" in fragment:
                key = ("i", fragment["index"])
            else:
                raw.no_index = True
                key = ("id", fid) if fid else (last or ("n", position))
            call, last = raw.calls.setdefault(key, RecordedCall()), key
            call.blank = call.blank or (bool(call.id or call.name) and "" in (fid, name))
            call.id = call.id or (fid if isinstance(fid, str) else "")
            call.name = call.name or (name if isinstance(name, str) else "")
            call.text += json.dumps(args) if isinstance(args, dict) else str(args or "")


def _anthropic(raw: RecordedReply, payload: dict[str, Any]) -> None:
    kind, delta = payload.get("type"), payload.get("delta")
    blocks: list[tuple[Any, Any]] = []
    message = payload.get("message") if kind == "message_start" else payload
    if isinstance(message, dict) and kind in ("message", "message_start"):
        raw.model = str(message.get("model") or raw.model)
        raw.finish += [str(message["stop_reason"])] if message.get("stop_reason") else []
        blocks = [(("n", i), block) for i, block in enumerate(message.get("content") or [])]
    elif kind == "content_block_start":
        blocks = [(("i", payload.get("index")), payload.get("content_block"))]
    elif kind == "content_block_delta" and isinstance(delta, dict):
        raw.text += str(delta.get("text", "")) if delta.get("type") == "text_delta" else ""
        call = raw.calls.get(("i", payload.get("index")))
        if call is not None and delta.get("type") == "input_json_delta":
            call.text += str(delta.get("partial_json", ""))
    elif kind == "message_delta" and isinstance(delta, dict) and delta.get("stop_reason"):
        raw.finish.append(str(delta["stop_reason"]))
    raw.terminal = raw.terminal or kind == "message_stop"
    for key, block in blocks:
        if isinstance(block, dict) and block.get("type") == "text":
            raw.text += str(block.get("text", ""))
        elif isinstance(block, dict) and block.get("type") == "tool_use":
            ident, name = str(block.get("id", "")), str(block.get("name", ""))
            arguments = json.dumps(block["input"]) if block.get("input") else ""
            raw.calls[key] = RecordedCall(ident, name, arguments)


def _responses_item(raw: RecordedReply, key: Any, item: Any) -> None:
    """One whole output item of a Responses reply: message text, or a function call."""
    if not isinstance(item, dict):
        return
    if item.get("type") == "message":
        for part in item.get("content") or []:
            if isinstance(part, dict) and part.get("type") in ("output_text", "refusal"):
                raw.text += str(part.get("text") or part.get("refusal") or "")
    elif item.get("type") == "function_call":
        arguments = item.get("arguments")
        text = json.dumps(arguments) if isinstance(arguments, dict) else str(arguments or "")
        raw.calls[key] = RecordedCall(str(item.get("call_id", "")), str(item.get("name", "")), text)


def _responses(raw: RecordedReply, payload: dict[str, Any]) -> None:
    """One payload of the OpenAI Responses wire: a response object, or a stream event."""
    kind = str(payload.get("type") or "")
    response = payload.get("response") if kind.startswith("response.") else None
    if not raw.streamed and payload.get("object") == "response":
        response = payload
        for index, item in enumerate(payload.get("output") or []):
            _responses_item(raw, ("n", index), item)
    if isinstance(response, dict):
        raw.model = str(response.get("model") or raw.model)
        if raw.streamed and isinstance(response.get("usage"), dict):
            raw.usages.append(response["usage"])
        status = response.get("status")
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        if status == "failed" or kind == "response.failed":
            raw.error = raw.error or json.dumps(payload)
        elif status == "incomplete":
            raw.finish.append(str(reason or "incomplete"))
        elif status == "completed":
            raw.finish.append("completed")
    raw.terminal = raw.terminal or kind in ("response.completed", "response.incomplete")
    key = ("i", payload.get("output_index"))
    if kind == "response.output_text.delta":
        raw.text += str(payload.get("delta") or "")
    elif kind == "response.output_item.added":
        item = payload.get("item")
        if isinstance(item, dict) and item.get("type") == "function_call":
            _responses_item(raw, key, item)
    elif kind == "response.function_call_arguments.delta" and key in raw.calls:
        raw.calls[key].text += str(payload.get("delta") or "")
    elif kind == "response.output_item.done" and key in raw.calls:
        arguments = (payload.get("item") or {}).get("arguments")
        if not raw.calls[key].text and isinstance(arguments, str):
            raw.calls[key].text = arguments


def ints(obj: Any, *keys: str) -> list[int]:
    """Every integer under one of ``keys``, at any depth (outer ones first)."""
    pairs: list[tuple[Any, Any]] = list(obj.items() if isinstance(obj, dict) else [])
    pairs += enumerate(obj) if isinstance(obj, list) else []
    found = [v for k, v in pairs if k in keys and isinstance(v, int)]
    return found + [n for _, v in pairs for n in ints(v, *keys)]


@frozen
class RecordedExchange:
    """One recorded response, served to the adapter, and what the adapter made of it."""

    reply: RecordedReply
    """What the recorded bytes say."""
    outcome: CallOutcome
    """What the call gave: a result, an exception, or ``None`` when it hung."""
    streamed: str = ""
    """The text deltas the adapter reported, concatenated."""
    requests: int = 1
    """How many requests the adapter sent for it (retries included)."""

    @property
    def hung(self) -> bool:
        return self.outcome is None

    @property
    def crashed(self) -> bool:
        """The adapter raised something other than a :class:`ProviderError`."""
        return isinstance(self.outcome, Exception) and not isinstance(self.outcome, ProviderError)

    @property
    def answered(self) -> bool:
        """The call came back with a result or a :class:`ProviderError`."""
        return not self.hung and not self.crashed

    @property
    def result(self) -> ChatResult | None:
        return self.outcome if isinstance(self.outcome, ChatResult) else None

    @property
    def error(self) -> ProviderError | None:
        return self.outcome if isinstance(self.outcome, ProviderError) else None


@frozen
class Verdict:
    """A check's judgement of one exchange that exercises it."""

    holds: bool
    expected: str
    got: str = ""


CorpusJudge: TypeAlias = Callable[[RecordedExchange], Verdict | None]
"""A check's corpus invariant: a verdict, or ``None`` when the exchange does not exercise it."""


def verdict(holds: bool, expected: str, got: object) -> Verdict:
    """A :class:`Verdict` with ``got`` described briefly (results and errors summarized)."""
    if isinstance(got, ProviderError):
        got = f"ProviderError({got.kind}, status={got.status}, in_stream={got.in_stream})"
    elif isinstance(got, ChatResult):
        text, calls = got.message.content, len(got.message.tool_calls)
        got = f"a success (finish {got.finish_reason!r}, text {text!r:.60}, {calls} calls)"
    described = got if isinstance(got, str) else repr(got)
    if len(described) > 200:
        described = described[:199] + "…"
    return Verdict(holds, expected, described)


def on_error(judge: CorpusJudge) -> CorpusJudge:
    """``judge``, asked only about answered exchanges whose recorded bytes are an error."""

    @functools.wraps(judge)
    def guarded(exchange: RecordedExchange) -> Verdict | None:
        if not exchange.answered or exchange.reply.error is None:
            return None
        return judge(exchange)

    return guarded


def on_success(judge: CorpusJudge) -> CorpusJudge:
    """``judge``, asked only about answered exchanges whose recorded bytes are a success."""

    @functools.wraps(judge)
    def guarded(exchange: RecordedExchange) -> Verdict | None:
        if not exchange.answered or exchange.reply.error is not None:
            return None
        return judge(exchange)

    return guarded
