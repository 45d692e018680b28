"""New session names: unique stamp and counter, found without listing the folder."""

from __future__ import annotations

import gc
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentfsm.adapters.sessions import SessionStore

from ..helpers import fd_open_on

NOW_NS = 1_789_362_000_123_456_789  # 2026-09-14T05:00:00.123456Z
STAMP = "20260914T050000123456Z"


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The system clock stands still (every handle gets the same stamp)."""
    monkeypatch.setattr(time, "time_ns", lambda: NOW_NS)


def no_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    def listing(*_: object) -> None:
        raise AssertionError("the folder was listed")

    monkeypatch.setattr(Path, "glob", listing)
    monkeypatch.setattr(Path, "iterdir", listing)
    monkeypatch.setattr(os, "scandir", listing)
    monkeypatch.setattr(os, "listdir", listing)


def test_a_new_name_is_created_without_listing_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, frozen: None
) -> None:
    for index in range(50):
        (tmp_path / f"20250101T000000{index:06d}Z-0001.jsonl").touch()
    no_listing(monkeypatch)
    handle = SessionStore(tmp_path).new_handle()
    assert handle.path.name == f"{STAMP}-0001.jsonl"
    assert handle.path.read_bytes() == b""  # created empty, before any write
    handle.write_meta({"event": "a"})
    assert json.loads(handle.path.read_text("ascii"))["meta"] == {"event": "a"}
    handle.close()


def test_a_name_in_use_moves_to_the_next_counter(tmp_path: Path, frozen: None) -> None:
    (tmp_path / f"{STAMP}-0001.jsonl").write_text("another process's session\n", "utf-8")
    (tmp_path / f"{STAMP}-0002-labelled.jsonl").touch()
    handle = SessionStore(tmp_path).new_handle()
    assert handle.path.name == f"{STAMP}-0003.jsonl"
    assert (tmp_path / f"{STAMP}-0001.jsonl").read_text("utf-8") == "another process's session\n"


def test_the_same_stamp_twice_in_a_process_is_checked_against_other_labels(
    tmp_path: Path, frozen: None
) -> None:
    sessions = SessionStore(tmp_path)
    first = sessions.new_handle("one")
    second = sessions.new_handle()
    third = SessionStore(tmp_path).new_handle("one")
    assert [first.path.name, second.path.name, third.path.name] == [
        f"{STAMP}-0001-one.jsonl",
        f"{STAMP}-0002.jsonl",
        f"{STAMP}-0003-one.jsonl",
    ]


def test_a_store_with_a_clock_checks_every_label(tmp_path: Path) -> None:
    moment = datetime(2026, 9, 14, 5, 0, 0, 123456, tzinfo=UTC)
    (tmp_path / f"{STAMP}-0001-from-elsewhere.jsonl").touch()
    handle = SessionStore(tmp_path, clock=lambda: moment).new_handle()
    assert handle.path.name == f"{STAMP}-0002.jsonl"


def test_a_missing_folder_is_created_and_a_file_in_its_place_refused(tmp_path: Path) -> None:
    handle = SessionStore(tmp_path / "a" / "b").new_handle()
    assert handle.path.parent == tmp_path / "a" / "b"
    assert handle.path.is_file()
    (tmp_path / "file").write_text("x", "utf-8")
    with pytest.raises(NotADirectoryError):
        SessionStore(tmp_path / "file").new_handle()


def test_an_unwritable_folder_is_left_to_the_first_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: object, **__: object) -> int:
        raise PermissionError("no")

    with monkeypatch.context() as patch:
        patch.setattr(os, "open", refuse)
        handle = SessionStore(tmp_path).new_handle()
    assert not handle.path.exists()
    handle.write_meta({"event": "a"})  # the first write opens (and creates) it
    assert handle.path.is_file()
    handle.close()


def test_an_unused_handle_closes_its_file_when_collected(tmp_path: Path) -> None:
    handle = SessionStore(tmp_path).new_handle()
    fd, inode = handle._fd, handle.path.stat().st_ino
    assert fd is not None
    assert os.fstat(fd).st_ino == inode
    del handle
    gc.collect()
    assert not fd_open_on(fd, inode)
