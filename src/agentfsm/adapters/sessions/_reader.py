"""The one reader of session files: each record typed once, folded into runs and turns that
resume, ``agentfsm trace``, ``sessions list|show`` and the run's picture all use.

The lines come from :mod:`._lines` (bounded; unusable lines skipped). A ``message`` record
whose message reads back belongs to its run: the seeded context, the input, or a turn (the
reply, its calls' results, messages after them). A ``meta`` record is metadata of any
shape; one whose ``meta`` is an object naming its ``event`` (a string) starts or ends a run
or marks an event of a turn; other metadata and any other line is passed over. A meta field
of the wrong type reads as missing; a message with a field of the wrong type is passed over
(never converted), counted in the file's one warning. Strings read back exactly as written,
lone surrogates included: whatever prints them makes them safe for its medium.
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Callable, Collection, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from attrs import define, field

from agentfsm.engine import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
    structure_message,
    to_jsonable,
    tool_message_from_result,
    unrecorded_result,
)

from ._lines import ReadBudget, iter_session_records, warn_skipped
from ._resolve import SessionNotFound
from ._runs import CallTrace, MetaRecord, RunTrace, TurnTrace, parse_moment, text_of

__all__ = [
    "MAX_CHAIN",
    "SessionLog",
    "answer_open_tool_calls",
    "drop_trailing_user_messages",
    "read_session",
    "read_session_chain",
    "read_session_messages",
    "trace_session",
]

logger = logging.getLogger("agentfsm.sessions")

MAX_CHAIN = 64
"""Most session files followed back through ``resumed_from``."""

_TURN_EVENTS = {"tool_call_start", "budget_exhausted", "compress_end", "policy_warn", "gate"} | {
    "policy_note",
    "policy_stop",
    "redirect",
    "redirect_skipped",
    "reminder",
}
"""The meta events of a turn (each belongs to the turn it names, else the latest one)."""


def _ints(value: Any) -> dict[str, int] | None:
    """The integer entries of a recorded usage object, else ``None``."""
    if not isinstance(value, dict):
        return None
    return {str(key): count for key, count in value.items() if type(count) is int}


def _message(data: Any) -> Message | None:
    """The message ``data`` unstructures, if it is one (of the four roles) and every field it
    gives has the field's type: a wrong-typed field is never converted (``null`` to
    ``"None"``, ``"no"`` to ``True``), the record is passed over. Checked by reading the
    message back out: what was given must come back as it was."""
    try:
        message = structure_message(data)
    except Exception:
        return None
    return message if _as_given(data, to_jsonable(message)) else None


def _as_given(given: Any, read: Any) -> bool:
    """``read`` holds ``given`` unchanged: equal values of the same types, for every key
    both objects have (a key ``given`` lacks took its default; one ``read`` lacks is not a
    field)."""
    if isinstance(given, dict):
        return isinstance(read, dict) and all(
            _as_given(given[key], read[key]) for key in given.keys() & read.keys()
        )
    if isinstance(given, list):
        return (
            isinstance(read, list | tuple)
            and len(given) == len(read)
            and all(map(_as_given, given, read))
        )
    return type(given) is type(read) and (given == read or given != given)  # NaN is NaN


def drop_trailing_user_messages(
    messages: list[Message], *, keep: Callable[[Message], bool] | None = None
) -> list[Message]:
    """Drop every user message at the end (a failed or aborted run can stack several).

    With ``keep``, dropping stops at the first user message (from the end) it accepts: the
    Agent keeps its frozen session context that way.
    """
    end = len(messages)
    while end and isinstance(messages[end - 1], UserMessage):
        if keep is not None and keep(messages[end - 1]):
            break
        end -= 1
    return messages[:end]


def answer_open_tool_calls(
    messages: Iterable[Message], started: Collection[str] = ()
) -> list[Message]:
    """``messages`` with every assistant tool call answered and no stray tool message.

    A call with no tool message before the next assistant or user message gets a failed
    result, placed after the results that did arrive: a call whose id is in ``started``
    (its tool had begun) says the tool may have acted, the others that it did not run. A tool
    message that answers no open call of the preceding assistant message (an orphan, or a
    second answer) is dropped. Providers reject either, so the result is a valid history.
    """
    out: list[Message] = []
    open_calls: list[ToolCall] = []

    def close() -> None:
        for call in open_calls:
            out.append(tool_message_from_result(call, unrecorded_result(call.id in started)))
        open_calls.clear()

    for message in messages:
        if isinstance(message, ToolMessage):
            call = next((c for c in open_calls if c.id == message.tool_call_id), None)
            if call is not None:
                open_calls.remove(call)
                out.append(message)
            continue
        close()
        out.append(message)
        if isinstance(message, AssistantMessage):
            open_calls.extend(message.tool_calls)
    close()
    return out


_ENTRY_CHECKS: dict[str, Callable[[dict[Any, Any]], bool]] = {
    "prune_tool_results": lambda entry: all(
        isinstance(key, str) and (value is None or isinstance(value, str))
        for key, value in entry.items()
    ),
}
"""Shape checks of the policy state entries whose shape is known (the built-in policies')."""


def _policy_state(recorded: Any, where: str) -> dict[str, Any] | None:
    """The entries of a recorded ``policy_state`` that have the shape policies keep
    (``None``, with a logged warning, when it is not an object)."""
    if not isinstance(recorded, dict):
        kind = type(recorded).__name__
        logger.warning("agentfsm: session %s: ignoring policy_state of type %s", where, kind)
        return None
    kept: dict[str, Any] = {}
    for name, entry in recorded.items():
        check = _ENTRY_CHECKS.get(name)
        if isinstance(name, str) and isinstance(entry, dict) and (check is None or check(entry)):
            kept[name] = entry
        else:
            logger.warning(
                "agentfsm: session %s: ignoring malformed policy state %.80r", where, name
            )
    return kept


@define
class SessionLog:
    """A session file read back: its runs and the transcript it holds."""

    path: Path
    """The file."""
    runs: list[RunTrace] = field(factory=list)
    """Its runs, in order."""
    messages: list[Message] = field(factory=list)
    """Every message it recorded, in order (those before any run's start included)."""
    compacted: list[Message] = field(factory=list)
    """The history the last compression left, then every message recorded after it (all
    of :attr:`messages` when nothing was compressed)."""
    started_calls: set[str] = field(factory=set)
    """The ids of the tool calls whose tool began."""
    policy_state: dict[str, Any] = field(factory=dict)
    """The policies' durable state, from the last ``run_end`` that recorded one."""
    last: dict[str, MetaRecord] = field(factory=dict)
    """The last record of each meta event (``provider``, ``run_end`` …)."""
    complete: bool = True
    """The whole file was read (``False`` when ``read_session(max_bytes=...)`` stopped
    before its end)."""

    @property
    def id(self) -> str:
        """The session's id (its file name without ``.jsonl``)."""
        return self.path.stem

    def transcript(
        self, *, keep: Callable[[Message], bool] | None = None, compressed: bool = False
    ) -> list[Message]:
        """The history to resume from (see :func:`read_session_messages`)."""
        messages = self.compacted if compressed else self.messages
        return drop_trailing_user_messages(
            answer_open_tool_calls(messages, self.started_calls), keep=keep
        )


class _Fold:
    """Builds a :class:`SessionLog` as the records of its file stream past."""

    def __init__(self, path: Path) -> None:
        self.log = SessionLog(path)
        self.run: RunTrace | None = None
        self.skip = 0  # seeded messages still to come
        self.calls: dict[str, CallTrace] = {}  # this run's calls by id
        self.numbered: dict[int, TurnTrace] = {}
        self.stamp: datetime | None = None

    def start(self, meta: MetaRecord) -> RunTrace:
        """A new run, with what ``run_start`` says. Before ``seeded`` was recorded, a file's
        first run wrote the prior history (``history_size`` messages) before its own."""
        seeded = meta.count("seeded")
        if seeded is None and not self.log.runs:
            seeded = meta.count("history_size")
        sandbox, parent = meta.fields.get("sandbox"), meta.fields.get("resumed_from")
        parent = parent if isinstance(parent, dict) else {}
        run = RunTrace(
            len(self.log.runs) + 1,
            session=self.log.id,
            sandbox=sandbox if isinstance(sandbox, dict) else None,
            resumed_from=text_of(parent, "id"),
            seeded=seeded or 0,
            started=meta.ts,
        )
        self.log.runs.append(run)
        self.run, self.skip, self.calls, self.numbered = run, run.seeded, {}, {}
        self.stamp = parse_moment(meta.ts)
        return run

    def turn(self, run: RunTrace, number: int | None = None) -> TurnTrace:
        """The run's turn ``number``, or with ``None`` the turn now open (made if needed)."""
        latest = run.timeline[-1] if run.timeline else None
        if number is None:
            if latest is not None and latest.reply is None:
                return latest
            number = latest.number + 1 if latest is not None else 1
        found = self.numbered.get(number)
        if found is None:
            found = self.numbered[number] = TurnTrace(number)
            run.timeline.append(found)
        return found

    def elapsed(self, turn: TurnTrace, stamp: str | None) -> None:
        """Count the time since the run's previous record towards ``turn``."""
        moment = parse_moment(stamp)
        if moment is not None and self.stamp is not None:
            elapsed = int((moment - self.stamp).total_seconds() * 1000)
            turn.ms = (turn.ms or 0) + max(elapsed, 0)
        if moment is not None:
            self.stamp = moment

    def meta(self, meta: MetaRecord) -> None:
        self.log.last[meta.event] = meta
        if meta.event == "run_start" or self.run is None:  # a file without run_start: one run
            run = self.start(meta if meta.event == "run_start" else MetaRecord("", {}, meta.ts))
            if meta.event == "run_start":
                return
        else:
            run = self.run
        if meta.event == "run_end":
            self.end(run, meta)
        elif meta.event in _TURN_EVENTS:
            self.turn_event(run, meta)

    def end(self, run: RunTrace, meta: MetaRecord) -> None:
        run.finished = True
        run.stopped_reason = meta.text("stopped_reason")
        run.usage = _ints(meta.fields.get("usage")) or {}
        run.last_state = meta.text("last_state")
        run.ended = meta.ts
        error = meta.fields.get("error")
        if isinstance(error, dict):
            texts = {key: text_of(error, key) for key in ("name", "kind", "message")}
            run.error = {key: text for key, text in texts.items() if text is not None} or None
        if run.last_state in ("turn_start", "compress", "llm_start"):  # a turn without records
            turn = self.turn(run)
            turn.compressed = turn.compressed or run.last_state == "compress"
        if "policy_state" in meta.fields:
            state = _policy_state(meta.fields["policy_state"], self.log.id)
            self.log.policy_state = self.log.policy_state if state is None else state

    def turn_event(self, run: RunTrace, meta: MetaRecord) -> None:
        number = meta.count("turn")
        if meta.event == "tool_call_start":
            call_id = meta.text("call_id")
            if call_id is not None:
                self.log.started_calls.add(call_id)
                if call_id in self.calls:
                    self.calls[call_id].started = True
            return
        if meta.event == "budget_exhausted" and number is None and run.timeline:
            turn = run.timeline[-1]
        else:
            turn = self.turn(run, number)
        turn.events.append(meta)
        if meta.event == "compress_end":
            turn.compressed = True
            self.compression(meta)
        self.elapsed(turn, meta.ts)

    def compression(self, meta: MetaRecord) -> None:
        """The history a ``compress_end`` record carries (if every entry reads back)
        replaces the compacted transcript."""
        entries = meta.fields.get("history")
        if not isinstance(entries, list):
            return
        history = [_message(entry) for entry in entries]
        if any(message is None for message in history):
            logger.warning("agentfsm: ignoring a compress_end record with an unreadable history")
            return
        self.log.compacted = [message for message in history if message is not None]

    def message(self, message: Message, record: dict[str, Any]) -> None:
        self.log.messages.append(message)
        self.log.compacted.append(message)
        run = self.run
        if run is None:
            return
        if self.skip:  # seeded: the system prompt, or history recorded with an earlier run
            self.skip -= 1
            run.context.append(message)
            return
        stamp = record.get("ts") if isinstance(record.get("ts"), str) else None
        if isinstance(message, AssistantMessage):
            number = record.get("turn")
            turn = self.turn(run, number if type(number) is int and number >= 0 else None)
            if turn.reply is not None:  # a second reply without turn numbers
                turn = self.turn(run, turn.number + 1)
            turn.reply = message
            turn.usage = _ints(record.get("usage"))
            turn.calls = [CallTrace(call) for call in message.tool_calls]
            self.calls.update((call.call.id, call) for call in turn.calls)
            self.elapsed(turn, stamp)
        elif isinstance(message, ToolMessage) and run.timeline:
            turn = run.timeline[-1]
            call = next(
                (c for c in turn.calls if c.call.id == message.tool_call_id and c.result is None),
                None,
            )
            if call is not None:
                call.result = message
            else:
                turn.after.append(message)
            self.elapsed(turn, stamp)
        elif not run.timeline:
            run.input.append(message)
        else:
            run.timeline[-1].after.append(message)


def read_session(path: str | Path, *, max_bytes: int | None = None) -> SessionLog:
    """The session file ``path`` read back: its runs, turns and transcript.

    Lenient: unusable lines are skipped (counted in one logged warning), fields of the
    wrong type read as missing. With ``max_bytes``, only the lines within about that many
    bytes from the start are read (:attr:`SessionLog.complete` says whether that was all).
    A missing file raises ``FileNotFoundError``; a FIFO, device or over-large file
    :class:`~agentfsm.adapters.sessions.SessionNotFound` (the bounds:
    :data:`~agentfsm.adapters.sessions.MAX_SESSION_BYTES`,
    :data:`~agentfsm.adapters.sessions.MAX_LINE_BYTES`,
    :data:`~agentfsm.adapters.sessions.MAX_JSON_DEPTH`).
    """
    budget = ReadBudget() if max_bytes is None else ReadBudget(bytes=max(max_bytes, 1))
    return _read(Path(path), budget)


def _read(path: Path, budget: ReadBudget, *, follow: bool = True) -> SessionLog:
    fold = _Fold(path)
    fold.log.complete = _size(path) <= budget.bytes
    before = budget.skipped
    for record in iter_session_records(path, follow=follow, budget=budget, warn=False):
        if not isinstance(record, dict):
            continue
        stamp = record.get("ts") if isinstance(record.get("ts"), str) else None
        kind = record.get("kind")
        if kind == "message":
            message = _message(record.get("message"))
            if message is not None:
                fold.message(message, record)
            else:
                budget.skipped += 1
        elif kind == "meta":
            meta = record.get("meta")
            if isinstance(meta, dict) and isinstance(meta.get("event"), str):
                fold.meta(MetaRecord(meta["event"], meta, stamp))
    warn_skipped(path, budget.skipped - before)
    return fold.log


def _parent(log: SessionLog) -> Path | None:
    """The session file the first run of ``log`` resumed: the file of that id in the same
    folder, if it is a regular file there (not a symlink). A recorded path is never
    followed: a file may come from elsewhere and name any file."""
    ident = log.runs[0].resumed_from if log.runs else None
    if not ident or ident.startswith(".") or any(c in ident for c in "/\\\0"):
        return None
    sibling = log.path.parent / f"{ident}.jsonl"
    try:
        return sibling if stat.S_ISREG(sibling.lstat().st_mode) else None
    except (OSError, ValueError):
        return None


def read_session_chain(path: str | Path) -> list[SessionLog]:
    """The session file ``path`` and those it was resumed from, read back, oldest first.

    Each earlier file is found by the id its successor's first ``run_start`` names
    (``resumed_from``), in the same folder only, and read only if it is a regular file there
    (no symlink, opened without following one). The chain ends at a file seen twice, one
    that cannot be read, after :data:`MAX_CHAIN` files, or before a file that does not fit
    in what is left of one file's bounds (:data:`MAX_SESSION_BYTES`, and the containers of
    :class:`~._lines.ReadBudget`): the files of a chain together are read as one would be.
    Raises like :func:`read_session` for ``path`` itself."""
    budget = ReadBudget()  # shared: the chain reads what one file may
    chain = [_read(Path(path), budget)]
    seen = {Path(path).resolve()}
    while len(chain) < MAX_CHAIN:
        parent = _parent(chain[0])
        if parent is None or parent.resolve() in seen or _size(parent) > budget.bytes:
            break
        try:
            chain.insert(0, _read(parent, budget, follow=False))
        except (OSError, SessionNotFound):
            break  # an earlier session that cannot be read ends the chain
        seen.add(parent.resolve())
    return chain


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def trace_session(path: str | Path) -> list[RunTrace]:
    """The runs of a session file, in order (raises like :func:`read_session`)."""
    return read_session(path).runs


def read_session_messages(
    path: str | Path,
    *,
    keep: Callable[[Message], bool] | None = None,
    compressed: bool = False,
) -> list[Message]:
    """The transcript of a session file, ready to resume: its messages (of the four known
    roles; meta records, unknown roles and unusable lines skipped), strings exactly as written.

    A killed or cancelled run's unanswered tool calls read back answered by a failed result
    saying whether the tool had started (a ``tool_call_start`` record), so may have acted;
    tool messages answering no call are dropped (:func:`answer_open_tool_calls`); then every
    trailing user message (``keep`` as in :func:`drop_trailing_user_messages`), so reading
    what this returns back in gives the same list. By default pre-compression messages are
    replayed (a later turn compresses again); with ``compressed=True`` (what
    ``Agent(resume=...)`` uses) the history a ``compress_end`` record left replaces what came
    before it, so the resumed run sends what the recorded run would have. Raises like
    :func:`read_session`."""
    return read_session(path).transcript(keep=keep, compressed=compressed)
