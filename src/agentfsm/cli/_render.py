"""What ``agentfsm run`` shows: live rendering for people, JSON lines for programs.

Everything printed for people passes through :func:`agentfsm.cli._terminal.sanitize` (streamed
text through a :class:`~agentfsm.cli._terminal.StreamSanitizer`): the model, its tools and the
provider cannot move the cursor, rewrite the summary, set the title or the clipboard. JSON
lines escape every control character.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from agentfsm.engine import (
    AgentEmitter,
    AssistantMessage,
    LoopOutcome,
    dumps,
    encodable,
    printable,
    to_jsonable,
)
from agentfsm.policies import NO_CHECK_COMMAND

from ._shown_once import ShownOnce
from ._terminal import StreamSanitizer, json_safe, sanitize

__all__ = ["HumanRenderer", "JsonRenderer", "QuietRenderer", "Renderer"]


def _args(arguments: dict[str, Any], limit: int = 80) -> str:
    text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_line(text: str, limit: int = 100) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _print(text: str, stream: TextIO | None = None, *, end: str = "\n") -> None:
    """Print ``text`` sanitized for a terminal, as the stream's encoding can take it (lone
    surrogates as escapes)."""
    stream = stream if stream is not None else sys.stdout
    stream.write(printable(sanitize(text), stream) + end)
    stream.flush()


def last_words(outcome: LoopOutcome) -> str | None:
    """What the model said last in a run that did not end ``final`` (``None`` if nothing):
    the text of the latest assistant message of ``outcome.messages`` that has text."""
    for message in reversed(outcome.messages):
        if isinstance(message, AssistantMessage) and message.content.strip():
            return message.content
    return None


class Renderer:
    """Base: subscribe to a run's events; report progress, errors and the outcome."""

    def attach(self, emitter: AgentEmitter) -> None:
        emitter.on("*", self.on_event)

    def on_event(self, event: Any) -> None:
        """Handle one event."""

    def progress(self, line: str) -> None:
        """A setup message (starting the local model …); never on stdout."""
        _print(line, sys.stderr)

    def error(self, message: str) -> None:
        _print(f"error: {message}", sys.stderr)

    def failure(self, error: dict[str, Any]) -> None:
        """A failed run's error (a ``run_end`` ``error`` object), once, on stderr: the
        message, where the calls went when that matters, and a hint."""
        address = error.get("address")
        self.error(str(error["message"]) + (f" (at {address})" if address else ""))
        if error.get("hint"):
            _print(f"hint: {error['hint']}", sys.stderr)

    def summary(self, outcome: LoopOutcome) -> None:
        """After a run that returned an outcome."""

    def finish(self, end: dict[str, Any], outcome: LoopOutcome | None = None) -> None:
        """After the run, whichever way it ended: ``end`` is the ``run_end`` object."""
        if end.get("error"):
            self.failure(end["error"])
        if outcome is not None:
            self.summary(outcome)


class JsonRenderer(Renderer):
    """One JSON object per event on stdout (the cattrs form), nothing else. Lone surrogates
    are written as ``\\uXXXX`` escapes, and all non-ASCII text too when the stream's
    encoding cannot take it, so every line is valid JSON."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def on_event(self, event: Any) -> None:
        line = json_safe(dumps(event))
        if not encodable(line, self.out):
            line = json.dumps(to_jsonable(event), separators=(",", ":"))
        self.out.write(line + "\n")
        self.out.flush()

    def finish(self, end: dict[str, Any], outcome: LoopOutcome | None = None) -> None:
        """The last line: the ``run_end`` object (its error included; nothing on stderr)."""
        line = json_safe(json.dumps(end, separators=(",", ":"), ensure_ascii=False))
        if not encodable(line, self.out):
            line = json.dumps(end, separators=(",", ":"))
        self.out.write(line + "\n")
        self.out.flush()


class QuietRenderer(Renderer):
    """Only the final answer."""

    def summary(self, outcome: LoopOutcome) -> None:
        if outcome.final is not None:
            _print(outcome.final.content)


class HumanRenderer(Renderer):
    """Streamed text as it arrives, tool calls with a spinner, policy events in their own
    style, and a closing summary. Uses ``rich`` when it is installed."""

    def __init__(self, console: Any = None, *, shown_once: ShownOnce | None = None) -> None:
        self._shown_once = shown_once
        """Where the notes printed once per workspace are remembered (``None``: every time)."""
        if console is None:
            try:
                from rich.console import Console
            except ImportError:  # plain text without the cli extra
                console = None
            else:
                console = Console(highlight=False)
        self.console = console
        self._streaming = False
        self._status: Any = None
        self._running: dict[str, str] = {}
        self._text = StreamSanitizer()
        self._thinking = StreamSanitizer()

    # -- output helpers ------------------------------------------------------------------

    def _say(self, text: str, style: str | None = None) -> None:
        self._end_stream()
        if self.console is None:
            _print(text)
        else:
            text = printable(sanitize(text), self.console.file)
            self.console.print(text, style=style, markup=False, highlight=False)

    def _stream(self, piece: str, sanitizer: StreamSanitizer, style: str | None = None) -> None:
        text = sanitizer.feed(piece)  # a sequence split across pieces is removed whole
        self._streaming = True
        if self.console is None:
            _print(text, end="")
        else:
            text = printable(text, self.console.file)
            self.console.print(
                text, end="", style=style, markup=False, highlight=False, soft_wrap=True
            )

    def _end_stream(self) -> None:
        if self._streaming:
            self._streaming = False
            if self.console is None:
                print(flush=True)
            else:
                self.console.print()

    def _spin(self) -> None:
        if self.console is None:
            return
        label = "running " + ", ".join(self._running.values()) if self._running else ""
        label = printable(sanitize(label), self.console.file)
        if self._status is None and self._running:
            self._status = self.console.status(label)
            self._status.start()
        elif self._status is not None and self._running:
            self._status.update(label)
        elif self._status is not None:
            self._status.stop()
            self._status = None

    # -- events -------------------------------------------------------------------------

    def on_event(self, event: Any) -> None:
        kind = event.type
        if kind == "turn_start":
            self._say(f"── turn {event.turn} ──", "dim")
        elif kind == "text_delta":
            self._stream(event.text, self._text)
        elif kind == "thinking_delta":
            self._stream(event.text, self._thinking, "dim italic")
        elif kind == "llm_end":
            self._text.reset()
            self._thinking.reset()
            if not self._streaming and event.result.message.content:
                self._say(event.result.message.content)
            self._end_stream()
        elif kind == "tool_call_start":
            self._say(f"⚙ {event.call.name}({_args(event.call.arguments)})", "bold")
            self._running[event.call.id] = event.call.name
            self._spin()
        elif kind == "tool_call_end":
            self._running.pop(event.call.id, None)
            self._spin()
            result = event.result
            if event.cancelled:
                self._say(f"  ⊘ {event.call.name} not run: {result.error}", "yellow")
            elif result.ok:
                self._say(f"  ✓ {event.call.name}: {_first_line(result.output)}", "green")
            else:
                self._say(f"  ✗ {event.call.name}: {_first_line(result.error or '')}", "red")
        elif kind == "compress_start":
            self._say(f"compressing history ({event.estimated_tokens} tokens) …", "dim")
        elif kind == "compress_end":
            self._say(f"compressed: summary of {event.summary_chars} characters", "dim")
        elif kind == "reminder":
            self._say(f"reminder from {event.policy}: {_first_line(event.text)}", "yellow dim")
        elif kind == "gate":
            self._say(
                f"{event.policy} refused the answer: {_first_line(event.reminder)}", "magenta"
            )
        elif kind == "policy_warn":
            self._say(f"⚠ {event.code or event.policy}: {event.reason}", "yellow")
        elif kind == "policy_note":
            if self._once(event):
                self._say(f"{event.policy}: {event.reason}", "dim")
        elif kind == "redirect":
            self._say(f"↪ redirected after {event.reason}: {event.directions} direction(s)", "cyan")
        elif kind == "redirect_skipped":
            self._say(f"redirection skipped ({event.trigger}): {event.reason}", "cyan dim")
        elif kind == "policy_stop":
            self._say(f"■ stopped by {event.policy}: {event.reason}", "red")
        # ``error`` is not shown: a failure is reported once, by ``finish``, and an
        # interrupted run's summary says ``aborted``.

    def _once(self, event: Any) -> bool:
        """Whether to print a note: the verify gate's "no check command" once per workspace
        (its session folder), every other note every time."""
        if self._shown_once is None or event.reason != NO_CHECK_COMMAND:
            return True
        return self._shown_once.first_time(f"{event.code}:{event.policy}", event.reason)

    def summary(self, outcome: LoopOutcome) -> None:
        self.finish(_outcome_end(outcome), outcome)

    def finish(self, end: dict[str, Any], outcome: LoopOutcome | None = None) -> None:
        self._end_stream()
        if self._status is not None:
            self._status.stop()
            self._status = None
        if end.get("error"):
            self.failure(end["error"])
        if outcome is not None and outcome.stopped_reason == "budget":
            words = last_words(outcome)
            if words is not None:
                self._say(words)  # a capped run's last words
        rows = _summary_rows(end)
        session = f"session: {end.get('session_path') or 'not recorded'}"
        if end.get("session_error"):
            session += f" (incomplete: {end['session_error']})"
        if end.get("html_path"):
            session += f"\npicture: {end['html_path']}"
        if self.console is None:
            for name, value in rows:
                _print(f"{name:>10}: {value}")
            _print(session)
            return
        from rich.table import Table

        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column(style="bold", no_wrap=True)
        table.add_column(overflow="fold")
        for name, value in rows:
            table.add_row(name, printable(sanitize(value), self.console.file))
        self.console.print(table)
        session = printable(sanitize(session), self.console.file)
        self.console.print(session, soft_wrap=True, markup=False, highlight=False)


def _outcome_end(outcome: LoopOutcome) -> dict[str, Any]:
    """The parts of a ``run_end`` object an outcome alone gives."""
    stop = outcome.stop
    return {
        "stopped_reason": outcome.stopped_reason,
        "turns": outcome.turns_used,
        "usage": to_jsonable(outcome.usage),
        "stop": {"policy": stop.policy, "reason": stop.reason} if stop else None,
        "session_path": outcome.session_path,
        "session_error": outcome.session_error,
    }


def _summary_rows(end: dict[str, Any]) -> list[tuple[str, str]]:
    """The summary table of a ``run_end`` object."""
    stop = end.get("stop")
    usage = end.get("usage") or {}
    rows = [
        (
            "stopped",
            str(end["stopped_reason"]) + (f" ({stop['policy']}: {stop['reason']})" if stop else ""),
        ),
        ("turns", str(end["turns"])),
    ]
    if end.get("tool_calls") is not None:
        rows.append(("tool calls", str(end["tool_calls"])))
    rows.append(
        (
            "tokens",
            f"{usage.get('input_tokens', 0)} in (cache read {usage.get('cache_read_tokens', 0)}, "
            f"write {usage.get('cache_write_tokens', 0)}), {usage.get('output_tokens', 0)} out "
            f"(reasoning {usage.get('reasoning_tokens', 0)})",
        )
    )
    if end.get("resumed_from"):
        rows.append(("resumed", f"from {end['resumed_from']}"))
    return rows
