"""One abort mechanism: ``interrupt`` ends an awaited call on abort or timeout, for every
kind of signal, and the providers' transport and the toolbox go through it."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from agentfsm.adapters.providers._transport import race
from agentfsm.adapters.tools import ToolBox, tool
from agentfsm.engine._abort import AbortController, AbortSignal
from agentfsm.engine._errors import AbortError
from agentfsm.engine._interrupt import Interrupter, interrupt
from agentfsm.engine._messages import ToolCall


class WaitOnly:
    """A signal that takes no callbacks: it can only be waited for."""

    def __init__(self, signal: AbortSignal) -> None:
        self._signal = signal

    @property
    def aborted(self) -> bool:
        return self._signal.aborted

    async def wait(self) -> None:
        await self._signal.wait()


class FlagOnly:
    """A signal that can only be read."""

    aborted = False


def _signals(controller: AbortController) -> list[object]:
    return [controller.signal, WaitOnly(controller.signal)]


@pytest.mark.parametrize("kind", [0, 1], ids=["callbacks", "wait-only"])
async def test_an_abort_from_another_thread_ends_the_call(kind: int) -> None:
    controller = AbortController()
    signal = _signals(controller)[kind]
    threading.Timer(0.05, controller.abort).start()
    started = time.monotonic()
    with pytest.raises(AbortError, match="stop"):
        await interrupt(asyncio.sleep(5), signal, None, "stop", timeout=10)
    assert time.monotonic() - started < 2
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0


@pytest.mark.parametrize("kind", [0, 1], ids=["callbacks", "wait-only"])
async def test_the_timeout_ends_the_call_with_timeout_error(kind: int) -> None:
    controller = AbortController()
    with pytest.raises(TimeoutError):
        await interrupt(asyncio.sleep(5), _signals(controller)[kind], None, "x", timeout=0.05)
    controller.abort()  # too late to matter
    await asyncio.sleep(0.01)


@pytest.mark.parametrize("kind", [0, 1], ids=["callbacks", "wait-only"])
async def test_an_aborted_signal_does_not_run_the_call(kind: int) -> None:
    controller = AbortController()
    controller.abort()
    ran: list[int] = []

    async def call() -> None:
        ran.append(1)

    with pytest.raises(AbortError):
        await interrupt(call(), _signals(controller)[kind], None, "x", timeout=1)
    assert ran == []


async def test_a_flag_only_signal_bounds_by_the_timeout_alone() -> None:
    assert await interrupt(asyncio.sleep(0, 3), FlagOnly(), None, "x") == 3
    with pytest.raises(TimeoutError):
        await interrupt(asyncio.sleep(5), FlagOnly(), None, "x", timeout=0.05)


async def test_the_runs_interrupter_serves_a_bounded_call() -> None:
    controller = AbortController()
    interrupter = Interrupter.arm(controller.signal)
    assert interrupter is not None
    try:
        with pytest.raises(TimeoutError):
            await interrupt(asyncio.sleep(5), controller.signal, interrupter, "x", timeout=0.05)
        asyncio.get_running_loop().call_later(0.05, controller.abort)
        with pytest.raises(AbortError, match="cut"):
            await interrupt(asyncio.sleep(5), controller.signal, interrupter, "cut", timeout=10)
        assert interrupter.interrupted
    finally:
        interrupter.close()


@pytest.mark.parametrize("kind", [0, 1], ids=["callbacks", "wait-only"])
async def test_a_providers_step_ends_in_the_engines_abort_error(kind: int) -> None:
    controller = AbortController()
    asyncio.get_running_loop().call_later(0.05, controller.abort)
    with pytest.raises(AbortError):
        await race(asyncio.sleep(5), _signals(controller)[kind], 10)  # type: ignore[arg-type]
    with pytest.raises(TimeoutError):
        await race(asyncio.sleep(5), None, 0.05)


@pytest.mark.parametrize("kind", [0, 1], ids=["callbacks", "wait-only"])
async def test_a_tool_is_cancelled_through_the_same_mechanism(kind: int) -> None:
    finished: list[int] = []

    @tool
    async def slow() -> str:
        """Sleeps."""
        await asyncio.sleep(5)
        finished.append(1)
        return "done"

    controller = AbortController()
    box = ToolBox([slow])
    asyncio.get_running_loop().call_later(0.05, controller.abort)
    started = time.monotonic()
    signal = _signals(controller)[kind]
    result = await box.run(ToolCall("c1", "slow", {}), signal=signal)  # type: ignore[arg-type]
    assert time.monotonic() - started < 2
    assert not result.ok
    assert finished == []
