"""Session record text: the direct formatters write exactly what the generic path wrote.

The generic path is ``to_jsonable`` then ``json.dumps(..., separators=(",", ":"))`` (ASCII);
the formatters must give the same text for every message, every field value (lone
surrogates, U+2028, non-ASCII, empty text, odd argument values, wrong field types,
subclasses) and raise what the generic path raises.
"""

from __future__ import annotations

import collections
import datetime
import enum
import json
import math
from functools import partial
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
from agentfsm.adapters.sessions.records import (
    assistant_record,
    dumps,
    message_json,
    tool_record,
    usage_json,
)
from agentfsm.engine.events import AgentEmitter, ToolCallStartEvent
from agentfsm.engine.messages import ImagePart
from agentfsm.engine.serialization import to_jsonable
from agentfsm.testing import ScriptedChat, ScriptedTools, tool_reply

generic = json.JSONEncoder(separators=(",", ":")).encode
"""What session records were encoded with before the direct formatters."""

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


def same_as_generic(fast: Any, value: Any) -> None:
    expected = outcome(lambda: generic(to_jsonable(value)))
    got = outcome(lambda: fast(value))
    if expected[0] == "raised":
        assert got[0] == "raised"  # the generic path raised: nothing is written either way
    else:
        assert got == expected


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages)
def test_every_message_is_written_as_the_generic_path_wrote_it(message: Message) -> None:
    same_as_generic(message_json, message)
    stamp = "2026-09-14T05:00:00.123Z"
    expected = outcome(
        lambda: generic({"ts": stamp, "kind": "message", "message": to_jsonable(message)}) + "\n"
    )
    records: list[Any] = [assistant_record, tool_record]
    for record in records:  # the recorder's lines, given any message
        got = outcome(partial(record, stamp, message))
        assert got == expected or (expected[0] == "raised" and got[0] == "raised")


@pytest.mark.parametrize("text", TEXTS)
def test_each_text_of_each_field_in_every_message_class(text: str) -> None:
    call = ToolCall(text, text, {text: text, "n": [text, 1.5, None]}, raw_arguments=text)
    each: list[Message] = [
        SystemMessage(text),
        UserMessage(text, images=(ImagePart(text, text), ImagePart("image/png", ""))),
        AssistantMessage(text, tool_calls=(call, call), reasoning=text),
        AssistantMessage(text),
        ToolMessage(text, text, is_error=True),
        ToolMessage(text, text),
    ]
    for message in each:
        written = message_json(message)
        assert written == generic(to_jsonable(message))
        assert written.isascii()


@settings(max_examples=200, deadline=None)
@given(st.builds(Usage, *(st.one_of(st.integers(), st.floats(), st.booleans()),) * 5))
def test_usage_is_written_as_the_generic_path_wrote_it(usage: Usage) -> None:
    same_as_generic(usage_json, usage)


def test_dumps_is_the_generic_encoder_and_raises_its_errors() -> None:
    for value in [{"a": [1, 2.5, None, True]}, "\udcff\u2028", [math.inf], {3: Text("x")}]:
        assert dumps(value) == generic(value)
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match="Circular reference"):
        dumps(loop)
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps({"x": object()})
    assert dumps({"after": "errors"}) == '{"after":"errors"}'


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


def test_a_records_stamp_is_the_millisecond_it_is_written_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``ts`` is ``utc_timestamp`` of now, to the millisecond (truncated), however the cache of
    the current millisecond and second is hit: across millisecond and second boundaries, and
    back in time (a clock set back)."""
    from datetime import UTC, datetime

    from agentfsm.adapters.sessions import store

    def expected(seconds: float) -> str:
        return store.utc_timestamp(datetime.fromtimestamp(seconds, UTC))

    moments = [
        1_780_000_000.0,
        1_780_000_000.0004,
        1_780_000_000.0011,
        1_780_000_000.5,
        1_780_000_000.9994,
        1_780_000_000.99951,
        1_780_000_001.0,
        1_780_000_001.0009,
        1_779_999_000.25,  # set back
        1_779_999_000.2501,
        2_000_000_000.123,
    ]
    for moment in moments:
        monkeypatch.setattr(store, "_time", lambda moment=moment: moment)
        stamp = store._now_stamp()
        # the float's own rounding may put a moment a hair off its decimal value: compare
        # with the moments a microsecond around it
        assert stamp in {expected(moment - 1e-6), expected(moment), expected(moment + 1e-6)}, moment
    monkeypatch.setattr(store, "_time", lambda: 1_780_000_000.0004)
    assert store._now_stamp() == "2026-05-28T20:26:40.000Z"
    monkeypatch.undo()
    for _ in range(2000):  # the real clock
        before = store.utc_timestamp(datetime.now(UTC))
        stamp = store._now_stamp()
        assert before <= stamp <= store.utc_timestamp(datetime.now(UTC))
