"""What ``agentfsm run`` reports when a run ends: one ``run_end`` summary (stop reason, the
run's own turns and tool calls, usage, session, lineage, error), whichever way it ended.

A failure is explained once: its kind and message (scrubbed of the API key), the
``host:port`` the calls went to when the provider could not be reached, and a hint where
one helps (a refused key names ``--api-key-env`` and the variable the key was read from,
never its value).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from attrs import define, frozen

from agentfsm.adapters.providers import redact
from agentfsm.agent import RunStop
from agentfsm.engine import (
    AgentEmitter,
    LlmEndEvent,
    LoopOutcome,
    ToolCallStartEvent,
    Usage,
    error_name,
    to_jsonable,
)

__all__ = ["Endpoint", "RunTally", "describe_failure", "run_end"]

_UNREACHABLE = ("connection", "timeout")


@frozen
class Endpoint:
    """Where a run's chat calls go, to explain their failures. Holds the name of the
    variable the API key came from, never the key."""

    provider: str
    base_url: str | None = None
    key_env: str | None = None
    """The environment variable the key was read from (``None``: none was read)."""
    key_sent: bool = False
    """Whether a key was sent."""

    def address(self) -> str | None:
        """``host:port`` of the base URL (never its path, query or credentials)."""
        if not self.base_url:
            return None
        try:
            parts = urlsplit(self.base_url)
            host, port = parts.hostname, parts.port
        except ValueError:
            return None
        if not host:
            return None
        if port is None:
            port = 443 if parts.scheme == "https" else 80
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def hint(self, kind: str, address: str | None) -> str | None:
        """What to try next after a failure of ``kind``."""
        if kind == "auth":
            if self.key_sent and self.key_env:
                return (
                    f"the provider refused the API key read from ${self.key_env}; check it, "
                    "or name the variable that holds the right key with --api-key-env VAR"
                )
            return (
                "no API key was sent; name the environment variable that holds it with "
                "--api-key-env VAR"
            )
        if kind in _UNREACHABLE and address is not None:
            return f"is a server listening at {address}, and is --base-url right?"
        return None


def describe_failure(
    error: BaseException, endpoint: Endpoint | None, secrets: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The ``error`` object of ``run_end``: ``kind`` (the provider's error kind, else the
    exception's name), ``name``, ``message`` (scrubbed of ``secrets``), ``address``
    (``host:port``, when the provider could not be reached) and ``hint`` (or ``None``)."""
    if isinstance(error, asyncio.CancelledError):
        return {
            "kind": "interrupted",
            "name": "CancelledError",
            "message": "interrupted",
            "address": None,
            "hint": None,
        }
    kind = getattr(error, "kind", None)
    kind = kind if isinstance(kind, str) else error_name(error)
    address = endpoint.address() if endpoint is not None and kind in _UNREACHABLE else None
    hint = endpoint.hint(kind, address) if endpoint is not None else None
    message = " ".join(str(error).split())[:2000] or error_name(error)
    return {
        "kind": kind,
        "name": error_name(error),
        "message": redact(message, secrets),
        "address": address,
        "hint": hint,
    }


@define
class RunTally:
    """The run's own counts, from its events and its ``stop`` hook (a failed run has no
    outcome to read them from)."""

    turns: int = 0
    """Chat calls answered."""
    tool_calls: int = 0
    """Tool calls that started: one the model asked for that never ran (no turn left to
    read its result, an interrupt; shown as "not run") is not counted."""
    stop: RunStop | None = None
    """What the ``stop`` hook was given."""

    def attach(self, emitter: AgentEmitter) -> None:
        emitter.on("llm_end", self._on_llm_end)
        emitter.on("tool_call_start", self._on_tool_call_start)

    def _on_llm_end(self, event: LlmEndEvent) -> None:
        self.turns += 1

    def _on_tool_call_start(self, event: ToolCallStartEvent) -> None:
        self.tool_calls += 1

    def on_stop(self, stop: RunStop) -> None:
        """The ``stop`` hook."""
        self.stop = stop


def run_end(
    *,
    stopped_reason: str,
    exit_code: int,
    tally: RunTally,
    outcome: LoopOutcome | None = None,
    session: Path | None = None,
    resumed_from: Path | None = None,
    error: dict[str, Any] | None = None,
    session_error: str | None = None,
) -> dict[str, Any]:
    """The ``run_end`` object: the last line of ``--json`` and what the summary shows."""
    usage = outcome.usage if outcome is not None else None
    if usage is None:
        usage = tally.stop.usage if tally.stop is not None else Usage()
    stop = outcome.stop if outcome is not None else None
    return {
        "type": "run_end",
        "stopped_reason": stopped_reason,
        "exit_code": exit_code,
        "turns": outcome.turns_used if outcome is not None else tally.turns,
        "tool_calls": tally.tool_calls,
        "usage": to_jsonable(usage),
        "stop": {"policy": stop.policy, "reason": stop.reason} if stop is not None else None,
        "session_id": session.stem if session is not None else None,
        "session_path": str(session) if session is not None else None,
        "session_error": session_error or (outcome.session_error if outcome else None),
        "resumed_from": resumed_from.stem if resumed_from is not None else None,
        "error": error,
    }
