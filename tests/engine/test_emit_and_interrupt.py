"""The emitter's per-type dispatch and interrupts that cancel the calling task."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentfsm.engine.abort import AbortController
from agentfsm.engine.errors import AbortError
from agentfsm.engine.events import AgentEmitter, ErrorEvent, TurnStartEvent
from agentfsm.engine.interrupt import cancel_on_abort


def test_dispatch_follows_subscriptions_in_registration_order() -> None:
    emitter = AgentEmitter()
    seen: list[str] = []
    emitter.on("turn_start", lambda e: seen.append("a"))
    emitter.emit(TurnStartEvent(turn=1))
    off = emitter.on("*", lambda e: seen.append("*"))
    emitter.on("turn_start", lambda e: seen.append("b"))
    emitter.emit(TurnStartEvent(turn=2))
    emitter.emit(ErrorEvent(error=ValueError("x")))
    assert seen == ["a", "a", "*", "b", "*"]
    off()
    off()
    seen.clear()
    emitter.emit(TurnStartEvent(turn=3))
    emitter.emit(ErrorEvent(error=ValueError("x")))
    assert seen == ["a", "b"]


async def test_an_abort_from_another_thread_becomes_abort_error() -> None:
    controller = AbortController()
    task = asyncio.current_task()
    assert task is not None
    threading.Timer(0.05, controller.abort).start()
    with pytest.raises(AbortError):
        await cancel_on_abort(asyncio.sleep(5), controller.signal.add_callback, task, "stop")
    assert task.cancelling() == 0
    await asyncio.sleep(0)  # the task is not left cancelled


async def test_an_outside_cancel_stays_a_cancel() -> None:
    controller = AbortController()

    async def call() -> None:
        task = asyncio.current_task()
        assert task is not None
        await cancel_on_abort(asyncio.sleep(5), controller.signal.add_callback, task, "stop")

    outer = asyncio.ensure_future(call())
    await asyncio.sleep(0.01)
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    controller.abort()  # too late to matter
    assert not controller.signal._callbacks


async def test_a_result_before_the_abort_is_kept() -> None:
    controller = AbortController()
    task = asyncio.current_task()
    assert task is not None

    async def quick() -> int:
        return 7

    assert await cancel_on_abort(quick(), controller.signal.add_callback, task, "stop") == 7
    controller.abort()
    await asyncio.sleep(0.01)  # the late abort cancels nothing
