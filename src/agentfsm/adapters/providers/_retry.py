"""Retries in one place: the tenacity policy every adapter uses.

Only retryable errors are retried (rate limits, overload, server errors, connection
problems, timeouts), never once output was streamed. A provider's ``Retry-After`` (or
``retry-after-ms``, or "try again in Ns") sets the delay, capped; otherwise the delay grows
exponentially with jitter. Backoff sleeps end at once when the signal is aborted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from attrs import frozen
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_exponential_jitter

from agentfsm.engine import SupportsAbort

from ._errors import ProviderError
from ._limits import Deadline
from ._spans import ERROR_TYPE, RETRY_EVENT, span_event

__all__ = ["RetryPolicy", "call_with_retries"]

logger = logging.getLogger("agentfsm.providers")

T = TypeVar("T")


@frozen
class RetryPolicy:
    """How many attempts, and how long to wait between them."""

    max_attempts: int = 4
    """Attempts in all (the first one included)."""
    initial_delay: float = 0.5
    """First backoff delay, seconds."""
    max_delay: float = 20.0
    """Largest backoff delay, seconds."""
    max_retry_after: float = 60.0
    """Largest delay a provider may ask for."""
    jitter: float = 0.5
    """Random seconds added to each backoff delay."""


def _is_retryable(error: BaseException) -> bool:
    return isinstance(error, ProviderError) and error.retryable


def _waiter(policy: RetryPolicy) -> Callable[[RetryCallState], float]:
    backoff = wait_exponential_jitter(
        multiplier=policy.initial_delay, max=policy.max_delay, jitter=policy.jitter
    )

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        if isinstance(error, ProviderError) and error.retry_after is not None:
            return min(error.retry_after, policy.max_retry_after)
        return float(backoff(state))

    return wait


def _sleeper(
    signal: SupportsAbort | None, provider: str, deadline: Deadline | None = None
) -> Callable[[float], Awaitable[None]]:
    async def sleep(seconds: float) -> None:
        left = deadline.remaining() if deadline is not None else None
        if left is not None:
            seconds = min(seconds, left)  # the next attempt then fails on the deadline at once
        if signal is None:
            await asyncio.sleep(seconds)
            return
        if signal.aborted:
            raise ProviderError("aborted", "aborted during retry backoff", provider=provider)
        wait = getattr(signal, "wait", None)
        if not callable(wait):
            await asyncio.sleep(seconds)
        else:
            aborter = asyncio.ensure_future(wait())
            try:
                await asyncio.wait({aborter}, timeout=seconds)
            finally:
                aborter.cancel()
        if signal.aborted:
            raise ProviderError("aborted", "aborted during retry backoff", provider=provider)

    return sleep


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    signal: SupportsAbort | None = None,
    provider: str = "provider",
    deadline: Deadline | None = None,
) -> T:
    """Run ``attempt`` until it succeeds, fails for good, or the attempts run out.

    The last error is re-raised as it is. Backoff never sleeps past ``deadline``. The first
    attempt runs directly; the retry machinery is built only once it fails retryably (and
    then sees that failure as its own first attempt, so logging and backoff are the same).
    """
    try:
        return await attempt()
    except Exception as error:
        if policy.max_attempts <= 1 or not _is_retryable(error):
            raise
        failed: list[Exception] = [error]

    async def again() -> T:
        if failed:
            raise failed.pop()
        return await attempt()

    def log_retry(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        delay = state.next_action.sleep if state.next_action is not None else 0.0
        logger.warning(
            "agentfsm: %s attempt %d failed (%s); retrying in %.2f s",
            provider,
            state.attempt_number,
            error,
            delay,
        )
        span_event(
            RETRY_EVENT,
            {
                "agentfsm.provider": provider,
                "agentfsm.retry.attempt": state.attempt_number,
                "agentfsm.retry.delay_s": float(delay),
                ERROR_TYPE: error.kind if isinstance(error, ProviderError) else "unknown",
            },
        )

    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_attempts),
        retry=retry_if_exception(_is_retryable),
        wait=_waiter(policy),
        sleep=_sleeper(signal, provider, deadline),
        before_sleep=log_retry,
        reraise=True,
    )
    result: T = await retrying(again)
    return result
