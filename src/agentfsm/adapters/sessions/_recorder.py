"""Recording a run into a session file, driven by the run's events."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentfsm.engine import (
    AgentEmitter,
    AgentEvent,
    BudgetExhaustedEvent,
    CompressEndEvent,
    GateEvent,
    LlmEndEvent,
    Message,
    ToolCallEndEvent,
    ToolCallStartEvent,
    Usage,
    retry_message,
    to_jsonable,
    tool_message_from_result,
)

from ._store import SessionHandle

__all__ = ["SessionRecorder"]

logger = logging.getLogger("agentfsm.sessions")

_POLICY_FIELDS = ("policy", "code", "reason", "trigger", "directions", "latency_ms")
"""The fields of a policy event its record keeps (those it has, when not ``None``)."""

_STATES = {
    "turn_start": "turn_start",
    "compress_start": "compress",
    "llm_start": "llm_start",
    "llm_end": "llm_end",
    "tool_call_start": "run_tools",
}
"""The machine state a run is in once it emitted each of these events (``run_end`` of a run
cut short names the last one, so a reader knows the edge the run left by)."""


class SessionRecorder:
    """Appends one run to a :class:`SessionHandle`.

    ``start`` writes ``run_start`` (with the session the run resumed, if it did, and how
    many of the messages that follow come before the run's input) and the seeded
    messages; then, while subscribed,
    ``llm_end`` appends the assistant message, ``tool_call_start`` a small meta record (the
    call id: a reader then knows the tool may have acted if its result never arrives),
    ``tool_call_end`` the tool message (cancelled ones too), ``budget_exhausted`` and
    ``compress_end`` a meta record; ``finish`` writes
    ``run_end`` with the stop reason and the run's usage, then closes the file. An assistant
    message's record also carries its ``turn`` and the call's ``usage`` (when the provider
    reported one); the ``run_end`` of a run that ended ``aborted``, ``failed`` or
    ``cancelled`` names the machine state it was in (``last_state``). Policy
    decisions (warnings, notes, stops, gate refusals, redirections, reminders) are recorded
    as meta records too, without reminder or advice texts. A write that fails never reaches
    the run's loop: the handle keeps the error (:attr:`SessionHandle.error`), the file keeps
    every record before it, whole, and nothing later is written (the ``Agent`` logs one
    warning and reports it as the outcome's ``session_error``). Give it an emitter that
    carries only this run's events: the ``Agent`` gives each run its own, forwarding to
    ``engine.events``.

    Every record reaches the operating system (so survives a killed process) when its event
    is delivered: the assistant reply is on disk before any of its tools runs, a warning as
    soon as the policy gave it.
    """

    def __init__(self, handle: SessionHandle) -> None:
        self.handle = handle
        self._history: Callable[[], Sequence[Message]] | None = None
        self._unsubscribe: list[Callable[[], None]] = []
        self._warned = False
        self._state: str | None = None

    def _safely(self, action: Callable[[], object]) -> None:
        try:
            action()
        except OSError:
            pass  # the handle keeps the error; whoever ran the run reports it once
        except Exception as exc:
            if not self._warned:
                self._warned = True
                logger.warning("agentfsm: session %s not recorded: %s", self.handle.id, exc)

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
        meta: dict[str, Any] = {
            "event": "run_start",
            "input_chars": input_chars,
            "history_size": history_size,
            "seeded": seeded,
        }
        if resumed_from is not None:
            meta["resumed_from"] = {"id": resumed_from.stem, "path": str(resumed_from)}
        if sandbox is not None:
            meta["sandbox"] = dict(sandbox)
        self._safely(lambda: self.handle.write_meta(meta))
        if messages:
            self._safely(lambda: self.handle.write_messages(*messages))
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
                    ("reminder", self._on_policy_event),
                    *(
                        (name, self._on_state)
                        for name in ("turn_start", "compress_start", "llm_start")
                    ),
                )
            )
        ]

    def _on_state(self, event: AgentEvent) -> None:
        self._state = _STATES[event.type]

    def _on_llm_end(self, event: LlmEndEvent) -> None:
        self._state = "llm_end"
        message = event.result.message
        record: dict[str, Any] = {"kind": "message", "message": message, "turn": event.turn}
        if event.result.usage is not None:
            record["usage"] = event.result.usage

        def write() -> None:
            self.handle.write(record)
            self.handle.messages.append(message)

        self._safely(write)

    def _on_tool_call_start(self, event: ToolCallStartEvent) -> None:
        self._state = "run_tools"
        meta = {"event": "tool_call_start", "turn": event.turn, "call_id": event.call.id}
        self._safely(lambda: self.handle.write_meta(meta))

    def _on_tool_call_end(self, event: ToolCallEndEvent) -> None:
        message = tool_message_from_result(event.call, event.result)
        self._safely(lambda: self.handle.write_messages(message))

    def _on_budget_exhausted(self, event: BudgetExhaustedEvent) -> None:
        meta = {"event": "budget_exhausted", "turns_used": event.turns_used}
        self._safely(lambda: self.handle.write_meta(meta))

    def _on_policy_event(self, event: Any) -> None:
        """Policy decisions, for ``agentfsm trace`` (reminder and advice texts stay out)."""
        meta: dict[str, Any] = {"event": event.type, "turn": event.turn}
        for name in _POLICY_FIELDS:
            value = getattr(event, name, None)
            if value is not None:
                meta[name] = value
        self._safely(lambda: self.handle.write_meta(meta))

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
            meta["history"] = history

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
        meta: dict[str, Any] = {
            "event": "run_end",
            "stopped_reason": stopped_reason,
            "usage": usage,
        }
        if error is not None:
            meta["error"] = _error_record(error)
        if stopped_reason in ("aborted", "failed", "cancelled") and self._state is not None:
            meta["last_state"] = self._state
        if policy_state:
            meta["policy_state"] = dict(policy_state)
            self.handle.policy_state = dict(policy_state)
        self._safely(lambda: self.handle.write_meta(meta))
        self._safely(self.handle.close)  # the next run on this handle opens it again


def _error_record(error: BaseException) -> dict[str, Any]:
    """``{"name", "message"}`` of a run's error, with its ``kind`` when it has one (a
    ``ProviderError``'s message is already scrubbed of the API key by its adapter)."""
    record: dict[str, Any] = to_jsonable(error)
    kind = getattr(error, "kind", None)
    if isinstance(kind, str):
        record["kind"] = kind
    return record
