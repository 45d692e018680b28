"""The emitter's per-type dispatch and interrupts that cancel the calling task."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentfsm.engine._abort import AbortController
from agentfsm.engine._errors import AbortError
from agentfsm.engine._events import AgentEmitter, ErrorEvent, TurnStartEvent
from agentfsm.engine._interrupt import (
    Interrupter,
    activate,
    active_interrupter,
    cancel_on_abort,
    deactivate,
    interrupt,
)


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


def test_on_many_subscribes_each_pair_and_one_call_takes_all_back() -> None:
    emitter = AgentEmitter()
    seen: list[str] = []
    emitter.on("turn_start", lambda e: seen.append("before"))
    off = emitter.on_many(
        (
            ("turn_start", lambda e: seen.append("many:turn")),
            ("error", lambda e: seen.append("many:error")),
            ("*", lambda e: seen.append("many:*")),
        )
    )
    emitter.on("turn_start", lambda e: seen.append("after"))
    emitter.emit(TurnStartEvent(turn=1))
    emitter.emit(ErrorEvent(error=ValueError("x")))
    assert seen == ["before", "many:turn", "many:*", "after", "many:error", "many:*"]
    assert len(emitter) == 5
    off()
    off()  # harmless
    assert len(emitter) == 2
    seen.clear()
    emitter.emit(TurnStartEvent(turn=2))
    emitter.emit(ErrorEvent(error=ValueError("x")))
    assert seen == ["before", "after"]
    # The same handler subscribed by on() and by on_many() are two registrations.
    handler = seen.append
    seen.clear()
    emitter.on("turn_start", lambda e: handler("on"))
    emitter.on_many([("turn_start", lambda e: handler("many"))])()
    emitter.emit(TurnStartEvent(turn=3))
    assert seen == ["before", "after", "on"]


def test_a_star_handler_reaches_types_first_subscribed_after_it_in_order() -> None:
    emitter = AgentEmitter()
    seen: list[str] = []
    emitter.on("*", lambda e: seen.append("star-1"))
    emitter.on("error", lambda e: seen.append("error"))  # a type first subscribed after "*"
    emitter.on("*", lambda e: seen.append("star-2"))
    emitter.emit(ErrorEvent(error=ValueError("x")))
    emitter.emit(TurnStartEvent(turn=1))  # no handler of its own: only the "*" ones
    assert seen == ["star-1", "error", "star-2", "star-1", "star-2"]


def test_on_many_taken_back_after_another_subscription_keeps_that_one() -> None:
    emitter = AgentEmitter()
    seen: list[str] = []
    off = emitter.on_many([("turn_start", lambda e: seen.append("many"))])
    emitter.on("turn_start", lambda e: seen.append("later"))
    off()
    emitter.emit(TurnStartEvent(turn=1))
    assert seen == ["later"]
    seen.clear()
    off_alone = emitter.on_many([("turn_start", lambda e: seen.append("alone"))])
    off_alone()  # nothing changed in between: the subscriptions are those from before
    off_alone()
    emitter.emit(TurnStartEvent(turn=2))
    assert seen == ["later"]


def test_two_on_many_calls_with_one_pairs_object_are_two_registrations() -> None:
    emitter = AgentEmitter()
    seen: list[object] = []
    pairs = (("turn_start", seen.append),)  # a constant a caller reuses
    off_first = emitter.on_many(pairs)
    off_second = emitter.on_many(pairs)
    emitter.emit(TurnStartEvent(turn=1))
    assert len(seen) == 2
    off_first()  # takes back its own registration only
    emitter.emit(TurnStartEvent(turn=2))
    assert len(seen) == 3
    off_second()
    emitter.emit(TurnStartEvent(turn=3))
    assert len(seen) == 3


def test_every_ancestor_gets_a_childs_events_the_farthest_first() -> None:
    """A grandparent's subscribers, with ``"*"`` and with a type, see a grandchild's events
    though the parent between them has no subscriber of its own."""
    grandparent = AgentEmitter()
    parent = AgentEmitter(parent=grandparent)
    child = AgentEmitter(parent=parent)
    seen: list[tuple[str, str]] = []
    grandparent.on("*", lambda e: seen.append(("grandparent *", e.type)))
    grandparent.on("turn_start", lambda e: seen.append(("grandparent", e.type)))
    child.on("turn_start", lambda e: seen.append(("child", e.type)))
    assert child.has_subscribers
    assert len(parent) == 0
    child.emit(TurnStartEvent(turn=1))
    child.emit(ErrorEvent(error=ValueError("x")))
    assert seen == [
        ("grandparent *", "turn_start"),
        ("grandparent", "turn_start"),
        ("child", "turn_start"),
        ("grandparent *", "error"),
    ]
    seen.clear()
    parent.on("turn_start", lambda e: seen.append(("parent", e.type)))
    child.emit(TurnStartEvent(turn=2))
    assert seen == [
        ("grandparent *", "turn_start"),
        ("grandparent", "turn_start"),
        ("parent", "turn_start"),
        ("child", "turn_start"),
    ]


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


# -- the run's interrupter: armed once, each call a counter ---------------------------------


async def test_the_interrupter_turns_an_abort_during_a_call_into_abort_error() -> None:
    controller = AbortController()
    interrupter = Interrupter.arm(controller.signal)
    assert interrupter is not None
    assert len(controller.signal._callbacks) == 1
    assert await interrupter.call(asyncio.sleep(0, 3), "stop") == 3  # cheap calls, no new arming
    assert len(controller.signal._callbacks) == 1
    threading.Timer(0.05, controller.abort).start()
    with pytest.raises(AbortError, match="stop"):
        await interrupter.call(asyncio.sleep(5), "stop")
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0
    assert not interrupter.serves(controller.signal)  # later calls go the aborted-signal way
    interrupter.close()
    assert not controller.signal._callbacks


async def test_an_abort_between_calls_cancels_nothing() -> None:
    controller = AbortController()
    interrupter = Interrupter.arm(controller.signal)
    assert interrupter is not None
    controller.abort()
    await asyncio.sleep(0.01)  # the callback ran with no call in flight
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0
    assert not interrupter.interrupted
    with pytest.raises(AbortError):  # a call after the abort is cut at once
        await interrupt(asyncio.sleep(5), controller.signal, interrupter, "late")


async def test_nested_calls_the_inner_converts_and_the_outer_still_reports_the_abort() -> None:
    controller = AbortController()
    interrupter = Interrupter.arm(controller.signal)
    assert interrupter is not None
    inner_saw: list[str] = []

    async def tool() -> str:
        try:
            await interrupter.call(asyncio.sleep(5), "inner")
        except AbortError as exc:
            inner_saw.append(str(exc))
            return "cancelled result"  # the toolbox answers instead of raising
        return "slept"

    threading.Timer(0.05, controller.abort).start()
    with pytest.raises(AbortError, match="outer"):
        await interrupter.call(tool(), "outer")
    assert inner_saw == ["inner"]
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0


async def test_a_call_that_swallows_the_interrupt_still_ends_in_abort_error() -> None:
    controller = AbortController()
    interrupter = Interrupter.arm(controller.signal)
    assert interrupter is not None

    async def stubborn() -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            return "swallowed"
        return "slept"

    threading.Timer(0.05, controller.abort).start()
    with pytest.raises(AbortError):
        await interrupter.call(stubborn(), "stop")
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0


async def test_an_outside_cancel_through_the_interrupter_stays_a_cancel() -> None:
    controller = AbortController()

    async def run() -> None:
        interrupter = Interrupter.arm(controller.signal)
        assert interrupter is not None
        try:
            await interrupter.call(asyncio.sleep(5), "stop")
        finally:
            interrupter.close()

    outer = asyncio.ensure_future(run())
    await asyncio.sleep(0.01)
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert not controller.signal._callbacks


async def test_the_interrupter_serves_only_its_own_task_and_signal() -> None:
    controller, other = AbortController(), AbortController()
    interrupter = Interrupter.arm(controller.signal)
    assert interrupter is not None
    token = activate(interrupter)
    try:
        assert active_interrupter(controller.signal) is interrupter
        assert active_interrupter(other.signal) is None

        async def elsewhere() -> Interrupter | None:
            return active_interrupter(controller.signal)  # another task: arm per call there

        assert await asyncio.ensure_future(elsewhere()) is None
    finally:
        deactivate(token)
        interrupter.close()
    assert active_interrupter(controller.signal) is None
