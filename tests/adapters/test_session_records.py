"""Session record text: each line is the record unstructured (``to_jsonable``) then
``json.dumps(..., separators=(",", ":"))`` (ASCII), its UTC timestamp first, for every
message, every field value (lone surrogates, U+2028, non-ASCII, empty text, odd argument
values, wrong field types, subclasses); a record that cannot be encoded is not written.
"""

from __future__ import annotations

import collections
import datetime
import enum
import json
import math
import threading
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfsm import (
    Agent,
    AssistantMessage,
    ChatResult,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    Usage,
    UserMessage,
)
from agentfsm.adapters.sessions import SessionRecorder, SessionStore
from agentfsm.adapters.sessions._store import SessionHandle, utc_timestamp
from agentfsm.engine._events import AgentEmitter, ToolCallStartEvent
from agentfsm.engine._messages import ImagePart
from agentfsm.engine._serialization import to_jsonable
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

generic = json.JSONEncoder(separators=(",", ":")).encode
"""What session records are encoded with."""

TEXTS = [
    "",
    "plain",
    'quote " backslash \\ slash /',
    "line\nbreak\ttab\r\x00\x1f\x7f",
    "caf\u00e9 \u4e2d\u6587 \U0001f600",
    "\u2028\u2029",
    "lone \udcff low",
    "\ud800",
    "pair \ud83d\ude00 halves",
    "\ufeff\uffff",
]


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Mode(enum.StrEnum):
    FAST = "fast"


class Text(str):
    pass


class Number(float):
    pass


Pair = collections.namedtuple("Pair", "left right")


class LoudMessage(AssistantMessage):
    """A subclass: the generic path decides what it looks like."""


@attrs.frozen
class Note:
    text: str


texts = st.one_of(st.sampled_from(TEXTS), st.text(max_size=12))
scalars = st.one_of(
    texts,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
odd_values = st.sampled_from(
    [
        (1, 2),
        Pair(1, "two"),
        Colour.RED,
        Level.HIGH,
        Mode.FAST,
        Text("sub\u2028"),
        Number(2.5),
        collections.OrderedDict(b=1, a=2),
        {1: "int key", None: "none key", 2.5: "float key", False: "bool key"},
        {"set"},
        frozenset(),
        b"\x00bytes",
        datetime.datetime(2026, 9, 14, 5, 0, tzinfo=datetime.UTC),
        Usage(1, 2),
        Note("attrs"),
        object(),
        math.nan,
        -0.0,
        1e300,
    ]
)
values = st.recursive(
    st.one_of(scalars, odd_values),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(texts, inner, max_size=3),
    ),
    max_leaves=8,
)
arguments = st.one_of(
    st.dictionaries(texts, values, max_size=4),
    st.sampled_from([{}, {"a": {"b": [1, {"c": None}]}}, [1, 2], "text", None]),
)
maybe_texts = st.one_of(st.none(), texts)
odd_fields = st.one_of(texts, st.sampled_from([None, 1, 2.5, True, Text("x"), b"b", ["l"]]))

tool_calls = st.builds(
    ToolCall,
    id=odd_fields,
    name=texts,
    arguments=arguments,
    raw_arguments=st.one_of(maybe_texts, st.just(7)),
)
images = st.builds(ImagePart, media_type=texts, data=odd_fields)
messages = st.one_of(
    st.builds(SystemMessage, content=odd_fields),
    st.builds(UserMessage, content=odd_fields, images=st.lists(images, max_size=3)),
    st.builds(
        AssistantMessage,
        content=odd_fields,
        tool_calls=st.lists(tool_calls, max_size=3),
        reasoning=st.one_of(maybe_texts, st.just(3)),
    ),
    st.builds(
        LoudMessage,
        content=texts,
        tool_calls=st.lists(tool_calls, max_size=2),
        reasoning=maybe_texts,
    ),
    st.builds(
        ToolMessage,
        tool_call_id=odd_fields,
        content=odd_fields,
        is_error=st.sampled_from([True, False, 0, 1, None]),
    ),
)


def outcome(produce: Any) -> tuple[str, Any]:
    """The text ``produce()`` gives, or the type of what it raised."""
    try:
        return ("text", produce())
    except Exception as error:
        return ("raised", type(error))


STAMP = "2026-09-14T05:00:00.123Z"
MOMENT = datetime.datetime(2026, 9, 14, 5, 0, 0, 123456, tzinfo=datetime.UTC)


def written_lines(tmp_path: Path, *messages: Message) -> tuple[str, ...] | type[Exception]:
    """The lines one ``write_messages`` call puts in a new file, or the type of what it
    raised (then the file must stay empty)."""
    path = tmp_path / "s.jsonl"
    path.unlink(missing_ok=True)
    handle = SessionHandle(path, clock=lambda: MOMENT)
    try:
        handle.write_messages(*messages)
    except Exception as error:
        assert not path.exists() or path.read_bytes() == b""
        return type(error)
    finally:
        handle.close()
    return tuple(path.read_text("ascii").splitlines())


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages)
def test_every_message_is_written_as_the_generic_path_writes_it(
    tmp_path_factory: pytest.TempPathFactory, message: Message
) -> None:
    expected = outcome(
        lambda: generic({"ts": STAMP, "kind": "message", "message": to_jsonable(message)})
    )
    got = written_lines(tmp_path_factory.mktemp("m"), message)
    if expected[0] == "raised":
        assert isinstance(got, type)  # the generic path raised: nothing is written either
    else:
        assert got == (expected[1],)


@pytest.mark.parametrize("text", TEXTS)
def test_each_text_of_each_field_in_every_message_class(tmp_path: Path, text: str) -> None:
    call = ToolCall(text, text, {text: text, "n": [text, 1.5, None]}, raw_arguments=text)
    each: list[Message] = [
        SystemMessage(text),
        UserMessage(text, images=(ImagePart(text, text), ImagePart("image/png", ""))),
        AssistantMessage(text, tool_calls=(call, call), reasoning=text),
        AssistantMessage(text),
        ToolMessage(text, text, is_error=True),
        ToolMessage(text, text),
    ]
    lines = written_lines(tmp_path, *each)
    assert lines == tuple(
        generic({"ts": STAMP, "kind": "message", "message": to_jsonable(m)}) for m in each
    )
    if "\ud83d\ude00" not in text:  # two halves side by side read back as their character
        for line in lines:
            assert json.loads(line)["message"]["content"] == text  # the same string back
        assert "\u2028" not in line  # U+2028 is an escape, not a raw line separator


@settings(max_examples=200, deadline=None)
@given(st.builds(Usage, *(st.one_of(st.integers(), st.floats(), st.booleans()),) * 5))
def test_usage_in_run_end_is_written_as_the_generic_path_writes_it(
    tmp_path_factory: pytest.TempPathFactory, usage: Usage
) -> None:
    handle = SessionStore(tmp_path_factory.mktemp("u")).new_handle()
    recorder = SessionRecorder(handle)
    recorder.start(AgentEmitter(), messages=[], input_chars=0, history_size=0)
    recorder.finish("final", usage)
    end = handle.path.read_text("ascii").splitlines()[-1]
    assert (
        end.split(",", 1)[1]
        == generic(
            {
                "kind": "meta",
                "meta": {
                    "event": "run_end",
                    "stopped_reason": "final",
                    "usage": to_jsonable(usage),
                },
            }
        )[1:]
    )


def test_tool_call_start_record_of_any_call_id(tmp_path: Path) -> None:
    handle = SessionStore(tmp_path).new_handle()
    emitter = AgentEmitter()
    recorder = SessionRecorder(handle)
    recorder.start(emitter, messages=[], input_chars=0, history_size=0)
    ids: list[Any] = ["c1", "\udcff\u2028\u00e9", "", 7, Text("sub")]
    for call_id in ids:
        emitter.emit(ToolCallStartEvent(turn=2, call=ToolCall(call_id, "t")))
    emitter.emit(ToolCallStartEvent(turn=True, call=ToolCall("c", "t")))
    recorder.finish("final", Usage())
    lines = handle.path.read_text("ascii").splitlines()[1:-1]
    expected = [
        {"event": "tool_call_start", "turn": turn, "call_id": call_id}
        for turn, call_id in [*((2, i) for i in ids), (True, "c")]
    ]
    assert [line.split(",", 1)[1] for line in lines] == [
        generic({"kind": "meta", "meta": meta})[1:] for meta in expected
    ]


def expected_line(line: str, messages: list[Message]) -> str:
    """``line`` as the generic path wrote it: its record rebuilt with the same ``ts``, a
    message record from the message written (``to_jsonable``)."""
    record = json.loads(line)
    if record["kind"] == "message":
        record["message"] = to_jsonable(messages.pop(0))
    return generic(record)


async def test_a_recorded_run_is_the_generic_encoding_line_by_line(tmp_path: Path) -> None:
    odd = "\udcff \u2028 caf\u00e9 \U0001f600"
    chat = ScriptedChat(
        [
            ChatResult(
                AssistantMessage(
                    odd,
                    tool_calls=(
                        ToolCall("c1", "echo", {"text": odd, "n": [1, 2.5, None, True]}),
                        ToolCall("c2", "echo", {}, raw_arguments="{not json"),
                    ),
                    reasoning=odd,
                ),
                Usage(10, 5, 2, 1, 3),
            ),
            tool_reply(("echo", {"text": ""})),
            "done " + odd,
            "again",
        ]
    )
    results: list[ToolResult | str] = [ToolResult(True, odd), ToolResult(False, "", "bad"), "x"]

    def echo(**_: object) -> ToolResult | str:
        return results.pop(0)

    tools = ScriptedTools({"echo": echo})
    handle = SessionStore(tmp_path).new_handle()
    agent = Agent(chat, tools, system_prompt="sys " + odd)
    await agent.run(
        [UserMessage(odd, images=(ImagePart("image/png", "AAAA"),))],
        session=handle,
    )
    await agent.run("again " + odd, session=handle)
    raw = handle.path.read_bytes()
    assert raw.isascii()
    lines = raw.decode("ascii").splitlines()
    written = list(handle.messages)
    assert [expected_line(line, written) for line in lines] == lines
    assert not written
    records = [json.loads(line) for line in lines]
    ends = [r["meta"] for r in records if r["kind"] == "meta" and r["meta"]["event"] == "run_end"]
    assert ends[0]["usage"] == to_jsonable(Usage(10, 5, 2, 1, 3))
    assert len(ends) == 2


def test_run_start_and_run_end_records_of_every_shape(tmp_path: Path) -> None:
    class Failure(Exception):
        kind = "rate_limit"

    odd = "\udcff\u2028\u00e9"
    handle = SessionStore(tmp_path).new_handle()
    shapes: list[tuple[Any, Usage, BaseException | None, dict[str, Any] | None]] = [
        ("final", Usage(1, 2, 3, 4, 5), None, None),
        ("failed " + odd, Usage(1.5, True), Failure(odd), {"policy": {odd: [1, None]}}),  # type: ignore[arg-type]
        ("aborted", Usage(), KeyboardInterrupt(), {}),
    ]
    for reason, usage, error, state in shapes:
        recorder = SessionRecorder(handle)
        recorder.start(
            AgentEmitter(),
            messages=[UserMessage(odd)],
            input_chars=3,
            history_size=0,
            sandbox={"kind": odd},
            resumed_from=tmp_path / f"{odd}.jsonl",
        )
        recorder.finish(reason, usage, error, state)
    lines = handle.path.read_text("ascii").splitlines()
    written = list(handle.messages)
    assert [expected_line(line, written) for line in lines] == lines
    ends = [json.loads(line)["meta"] for line in lines[2::3]]
    assert [list(end) for end in ends] == [
        ["event", "stopped_reason", "usage"],
        ["event", "stopped_reason", "usage", "error", "policy_state"],
        ["event", "stopped_reason", "usage", "error"],
    ]
    assert ends[1]["error"] == {"name": "Failure", "message": odd, "kind": "rate_limit"}


def test_a_records_stamp_is_the_utc_millisecond_it_is_written_in(tmp_path: Path) -> None:
    """``ts`` is :func:`utc_timestamp` of the moment of the write, to the millisecond
    (truncated), across threads writing at once."""
    from datetime import UTC, datetime, timedelta, timezone

    assert utc_timestamp(datetime(2026, 5, 28, 20, 26, 40, 999_999, UTC)) == (
        "2026-05-28T20:26:40.999Z"
    )
    east = timezone(timedelta(hours=2))
    assert utc_timestamp(datetime(2026, 1, 1, 1, 0, 0, 1000, east)) == "2025-12-31T23:00:00.001Z"
    handle = SessionHandle(tmp_path / "s.jsonl")
    bounds: list[tuple[str, str]] = []

    def write(index: int) -> None:
        for _ in range(200):
            before = utc_timestamp()
            handle.write_meta({"event": "tick", "thread": index})
            bounds.append((before, utc_timestamp()))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    handle.close()
    stamps = [json.loads(line)["ts"] for line in handle.path.read_text("ascii").splitlines()]
    assert len(stamps) == 800
    assert all(len(s) == 24 and s.endswith("Z") for s in stamps)
    earliest, latest = min(b for b, _ in bounds), max(a for _, a in bounds)
    assert all(earliest <= s <= latest for s in stamps)
