"""A session message with a field of the wrong type is passed over, never converted.

cattrs alone turns ``null`` into ``"None"`` for a string field and ``"no"`` into ``True``
for a boolean; a resumed run would then send ``"None"`` as a tool call's id. Each case
below writes one such message between good ones; the reader must leave it out, count it
in the file's one warning, and a resume must not send it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from agentfsm import Agent
from agentfsm.adapters.sessions import read_session
from agentfsm.engine import to_jsonable
from agentfsm.testing import ScriptedChat

CALL = {"id": "c1", "name": "read_file", "arguments": {"path": "a"}}
WRONG = {
    "tool call id null": {"role": "assistant", "content": "", "tool_calls": [{**CALL, "id": None}]},
    "tool call name 5": {"role": "assistant", "content": "", "tool_calls": [{**CALL, "name": 5}]},
    "arguments a string": {
        "role": "assistant",
        "content": "",
        "tool_calls": [{**CALL, "arguments": "path"}],
    },
    "assistant content null": {"role": "assistant", "content": None},
    "assistant content 5": {"role": "assistant", "content": 5},
    "reasoning a list": {"role": "assistant", "content": "x", "reasoning": ["r"]},
    "user content null": {"role": "user", "content": None},
    "user content true": {"role": "user", "content": True},
    "image media_type null": {
        "role": "user",
        "content": "see",
        "images": [{"media_type": None, "data": "AAAA"}],
    },
    "tool is_error 'no'": {"role": "tool", "tool_call_id": "c0", "content": "x", "is_error": "no"},
    "tool is_error 0": {"role": "tool", "tool_call_id": "c0", "content": "x", "is_error": 0},
    "tool_call_id 5": {"role": "tool", "tool_call_id": 5, "content": "x"},
    "tool content null": {"role": "tool", "tool_call_id": "c0", "content": None},
    "system content 1.5": {"role": "system", "content": 1.5},
}


def line(message: object) -> str:
    return json.dumps({"kind": "message", "message": message}) + "\n"


@pytest.mark.parametrize("case", sorted(WRONG))
async def test_a_wrong_typed_message_is_passed_over(
    tmp_path: Path, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "20260101T000000Z-0001.jsonl"
    text = (
        json.dumps({"kind": "meta", "meta": {"event": "run_start"}})
        + "\n"
        + line({"role": "user", "content": "hello"})
        + line({"role": "assistant", "content": "", "tool_calls": [{**CALL, "id": "c0"}]})
        + line({"role": "tool", "tool_call_id": "c0", "content": "ok"})
        + line(WRONG[case])
        + line({"role": "assistant", "content": "done"})
    )
    path.write_text(text, "utf-8")
    with caplog.at_level(logging.WARNING, "agentfsm.sessions"):
        log = read_session(path)
    assert [m.content for m in log.messages] == ["hello", "", "ok", "done"], case
    assert any("skipped 1 unreadable" in r.getMessage() for r in caplog.records), case
    chat = ScriptedChat(["again"])
    await Agent(chat, session_dir=tmp_path).run("more", resume=path.stem)
    sent = json.dumps([to_jsonable(m) for m in chat.requests[0].messages])
    assert '"None"' not in sent, case
    assert '"True"' not in sent, case
    assert [m.content for m in chat.requests[0].messages] == ["hello", "", "ok", "done", "more"]


def test_every_case_was_tried() -> None:
    print(f"\nwrong-typed session messages tried: {len(WRONG)}")
    assert len(WRONG) == 14
