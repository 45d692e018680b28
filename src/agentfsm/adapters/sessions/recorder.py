"""Recording a run into a session file, driven by the run's events."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from agentfsm.engine.events import (
    AgentEmitter,
    BudgetExhaustedEvent,
    CompressEndEvent,
    GateEvent,
    LlmEndEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from agentfsm.engine.history import tool_message_from_result
from agentfsm.engine.messages import Message, ToolMessage, Usage
from agentfsm.engine.reminders import retry_message
from agentfsm.engine.serialization import to_jsonable

from .records import assistant_record, dumps, json_string, meta_line, tool_record, usage_json
from .store import SessionHandle

__all__ = ["SessionRecorder"]

logger = logging.getLogger("agentfsm.sessions")

_HELD = frozenset({"policy_warn", "policy_note", "redirect_skipped"})
"""Policy events whose records wait for the next record's write (information only)."""

_POLICY_FIELDS = ("policy", "code", "reason", "trigger", "directions", "latency_ms")
"""The fields of a policy event its record keeps (those it has, when not ``None``)."""
_FIELDS_OF: dict[type, tuple[str, ...]] = {}


def _recorded_fields(cls: type) -> tuple[str, ...]:
    """Which of :data:`_POLICY_FIELDS` instances of ``cls`` have (read once per class: asking
    an event for a field its class lacks raises and catches an error each time)."""
    names = _FIELDS_OF.get(cls)
    if names is None:
        present = {a.name for a in attrs.fields(cls)} if attrs.has(cls) else set(_POLICY_FIELDS)
        names = _FIELDS_OF[cls] = tuple(n for n in _POLICY_FIELDS if n in present)
    return names


class SessionRecorder:
    """Appends one run to a :class:`SessionHandle`.

    ``start`` writes ``run_start`` (with the session the run resumed, if it did, and how
    many of the messages that follow come before the run's input) and the seeded
    messages; then, while subscribed,
    ``llm_end`` appends the assistant message, ``tool_call_start`` a small meta record (the
    call id: a reader then knows the tool may have acted if its result never arrives),
    ``tool_call_end`` the tool message (cancelled ones too), ``budget_exhausted`` and
    ``compress_end`` a meta record; ``finish`` writes
    ``run_end`` with the stop reason and the run's usage, then closes the file. Policy
    decisions (warnings, stops, gate refusals, redirections) are recorded as meta records
    too, without reminder or advice texts. Best effort: a write error logs a warning (once
    per run) and never reaches the run. Give it an emitter that carries only this run's
    events: the ``Agent`` gives each run its own, forwarding to ``engine.events``.

    Every record reaches the operating system (so survives a killed process) as soon as it
    is written, with two exceptions. A policy's warning or note, or a redirection it skipped
    (``policy_warn``, ``policy_note``, ``redirect_skipped``: information for
    ``agentfsm trace``) goes out with the next record. And an
    assistant message that asks for tools is held back
    and goes out in one write with the next record, its first call's: ``tool_call_start``,
    or the cancelled ``tool_call_end`` of a call that never runs (the run records every
    call of a reply before it can call the model again). So the reply is on disk before any
    tool runs, before the next model call, and when the run ends, fails or is cancelled
    (``finish``); a handle collected (or open at exit) with it still held writes it then.
    A process killed in between loses that reply, and a resume asks the model again, as it
    does when it finds a reply's calls unanswered.
    """

    def __init__(self, handle: SessionHandle) -> None:
        self.handle = handle
        self._history: Callable[[], Sequence[Message]] | None = None
        self._live: Sequence[Message] = ()
        """The run's history as ``history`` gave it at the start (a list the run appends to),
        or empty."""
        self._unsubscribe: list[Callable[[], None]] = []
        self._warned = False

    def _failed(self, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            logger.warning("agentfsm: session %s not recorded: %s", self.handle.id, exc)

    def _safely(self, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as exc:
            self._failed(exc)

    def start(
        self,
        emitter: AgentEmitter,
        *,
        messages: Sequence[Message],
        input_chars: int,
        history_size: int,
        sandbox: Mapping[str, Any] | None = None,
        history: Callable[[], Sequence[Message]] | None = None,
        seeded: int = 0,
        resumed_from: Path | None = None,
    ) -> None:
        """Write ``run_start`` and ``messages``, then follow ``emitter``.

        ``run_start`` records the sandbox the run's commands use, ``seeded``: how many of
        ``messages`` (the first ones) come before this run's input (the system prompt, the
        frozen context, earlier history), and ``resumed_from``: the session file the history
        was read from (its id and path)."""
        self.handle.runs += 1
        self._history = history  # a compression's record carries the history it left
        if history is not None:
            with contextlib.suppress(Exception):  # a compression reports it, if it still fails
                self._live = history()
        # One write for both, but a record that cannot be written does not keep the other out.
        handle = self.handle
        text = lines = ""
        try:
            meta = _run_start(input_chars, history_size, seeded, resumed_from, sandbox)
            text = handle._meta_line(meta)
        except Exception as exc:
            self._failed(exc)
        if messages:
            try:
                lines = handle._message_lines(messages)
            except Exception as exc:
                self._failed(exc)
        if text or lines:
            try:
                handle._write_text(text + lines)
                if lines:
                    handle.messages.extend(messages)
            except Exception as exc:
                self._failed(exc)
        self._unsubscribe = [
            emitter.on_many(
                (
                    ("llm_end", self._on_llm_end),
                    ("tool_call_start", self._on_tool_call_start),
                    ("tool_call_end", self._on_tool_call_end),
                    ("budget_exhausted", self._on_budget_exhausted),
                    ("compress_end", self._on_compress_end),
                    ("policy_warn", self._on_policy_event),
                    ("policy_note", self._on_policy_event),
                    ("policy_stop", self._on_policy_event),
                    ("gate", self._on_gate),
                    ("redirect", self._on_policy_event),
                    ("redirect_skipped", self._on_policy_event),
                )
            )
        ]

    # The three records of every turn, written with as little work as they need.

    def _on_llm_end(self, event: LlmEndEvent) -> None:
        handle = self.handle
        message = event.result.message
        try:
            line = assistant_record(handle._stamp(), message)
            if message.tool_calls:
                # Held for the first record of its calls: each call gets a record before
                # the run can call the model again (``tool_call_start``, or a cancelled
                # ``tool_call_end`` for one that never runs), or the run ends (``finish``).
                handle._hold(line)
            else:
                handle._write_text(line)
            handle.messages.append(message)
        except Exception as exc:
            self._failed(exc)

    def _on_tool_call_start(self, event: ToolCallStartEvent) -> None:
        handle = self.handle
        turn, call_id = event.turn, event.call.id
        try:
            if type(turn) is int and type(call_id) is str:
                meta = (
                    f'{{"event":"tool_call_start","turn":{turn},"call_id":{json_string(call_id)}}}'
                )
            else:
                meta = dumps({"event": "tool_call_start", "turn": turn, "call_id": call_id})
            handle._write_text(meta_line(handle._stamp(), meta))
        except Exception as exc:
            self._failed(exc)

    def _on_tool_call_end(self, event: ToolCallEndEvent) -> None:
        handle = self.handle
        call, result = event.call, event.result
        try:
            # The run has just appended this call's tool message to its history: when the
            # last message is the one ``tool_message_from_result`` would build (the call's
            # id and the result's output, a success), record that one instead of a copy.
            live = self._live
            message = live[-1] if live else None
            if not (
                type(message) is ToolMessage
                and message.tool_call_id is call.id
                and message.content is result.output
                and message.is_error is False
                and result.ok is True
                and message.role == "tool"
            ):
                message = tool_message_from_result(call, result)
            handle._write_text(tool_record(handle._stamp(), message))
            handle.messages.append(message)
        except Exception as exc:
            self._failed(exc)

    def _on_budget_exhausted(self, event: BudgetExhaustedEvent) -> None:
        meta = {"event": "budget_exhausted", "turns_used": event.turns_used}
        self._safely(lambda: self.handle.write_meta(meta))

    def _on_policy_event(self, event: Any) -> None:
        """Policy decisions, for ``agentfsm trace`` (reminder and advice texts stay out);
        warnings and notes go out with the next record."""
        meta: dict[str, Any] = {"event": event.type, "turn": event.turn}
        for name in _recorded_fields(type(event)):
            value = getattr(event, name, None)
            if value is not None:
                meta[name] = value
        handle = self.handle
        try:
            if event.type in _HELD:
                handle._hold(handle._meta_line(dumps(meta)))
            else:
                handle.write_meta(meta)
        except Exception as exc:
            self._failed(exc)

    def _on_gate(self, event: GateEvent) -> None:
        """The refusal (a meta record) and the neutral user turn the run pushed into its
        history (the reminder reaches the next request only)."""
        self._on_policy_event(event)
        message = retry_message()
        self._safely(lambda: self.handle.write_messages(message))

    def _on_compress_end(self, event: CompressEndEvent) -> None:
        """A meta record; when the compression rewrote the history, with that history (a
        resume then sends what the run would have sent, without compressing again)."""
        meta: dict[str, Any] = {"event": "compress_end", "summary_chars": event.summary_chars}
        history = list(self._history()) if self._history and event.summary_chars > 0 else None
        if history is not None:
            meta["history"] = [to_jsonable(m) for m in history]

        def write() -> None:
            self.handle.write_meta(meta)
            if history is not None:
                self.handle.messages[:] = history

        self._safely(write)

    def finish(
        self,
        stopped_reason: str,
        usage: Usage,
        error: BaseException | None = None,
        policy_state: Mapping[str, Any] | None = None,
    ) -> None:
        """Stop following the run and write ``run_end`` (with the policies' durable state)."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        handle = self.handle
        if policy_state:
            handle.policy_state = dict(policy_state)
        try:
            # {"event": "run_end", "stopped_reason", "usage", "error"?, "policy_state"?}
            text = stopped_reason
            reason = json_string(text) if type(text) is str else dumps(text)
            meta = f'{{"event":"run_end","stopped_reason":{reason},'
            meta += f'"usage":{usage_json(usage)}'
            if error is not None:
                meta += f',"error":{dumps(_error_record(error))}'
            if policy_state:
                meta += f',"policy_state":{dumps(dict(policy_state))}'
            handle._write_text(handle._meta_line(meta + "}"))
        except Exception as exc:
            self._failed(exc)
        try:
            handle.close()  # the next run on this handle opens it again
        except Exception as exc:
            self._failed(exc)


def _run_start(
    input_chars: int,
    history_size: int,
    seeded: int,
    resumed_from: Path | None,
    sandbox: Mapping[str, Any] | None,
) -> str:
    """The JSON of ``{"event": "run_start", "input_chars", "history_size", "seeded",
    "resumed_from"?: {"id", "path"}, "sandbox"?}``."""
    if type(input_chars) is int and type(history_size) is int and type(seeded) is int:
        text = (
            f'{{"event":"run_start","input_chars":{input_chars},'
            f'"history_size":{history_size},"seeded":{seeded}'
        )
    else:
        counts = {"input_chars": input_chars, "history_size": history_size, "seeded": seeded}
        text = dumps({"event": "run_start", **counts})[:-1]
    if resumed_from is not None:
        resumed = {"id": resumed_from.stem, "path": str(resumed_from)}
        text += f',"resumed_from":{dumps(resumed)}'
    if sandbox is not None:
        text += f',"sandbox":{dumps(dict(sandbox))}'
    return text + "}"


def _error_record(error: BaseException) -> dict[str, Any]:
    """``{"name", "message"}`` of a run's error, with its ``kind`` when it has one (a
    ``ProviderError``'s message is already scrubbed of the API key by its adapter)."""
    record: dict[str, Any] = to_jsonable(error)
    kind = getattr(error, "kind", None)
    if isinstance(kind, str):
        record["kind"] = kind
    return record
