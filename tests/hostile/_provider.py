"""What the provider cases of the hostile suite share: adapters on a fake server, one
measured call, and the bounds every case asserts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from agentfsm import UserMessage
from agentfsm.adapters.providers import (
    AnthropicChat,
    Limits,
    OpenAIChat,
    OpenAIResponses,
    ProviderError,
    RetryPolicy,
    Timeouts,
)
from agentfsm.engine._messages import ChatResult
from agentfsm.testing import FakeProviderServer

from .table import CaseRow, measure

Wire = Literal["openai-chat", "anthropic"]

TOTAL = 2.0
"""The total deadline the cases configure (seconds)."""
FAST = Timeouts(connect=2, first_byte=10, idle=10, terminal_grace=0.3, total=TOTAL)
ONCE = RetryPolicy(max_attempts=1)
HANG_GUARD = 30.0
MAX_SECONDS = TOTAL + 3.0
"""A case ends within its deadline plus this slack."""
MAX_GROWTH_MB = 200.0


def adapter(
    url: str,
    wire: Wire = "openai-chat",
    *,
    stream: bool = True,
    timeouts: Timeouts = FAST,
    limits: Limits | None = None,
    retry: RetryPolicy = ONCE,
    **options: Any,
) -> OpenAIChat | AnthropicChat:
    """An adapter for ``url`` (a server's root) speaking ``wire``."""
    if wire == "anthropic":
        return AnthropicChat(
            "claude", base_url=url, stream=stream, timeouts=timeouts, limits=limits, retry=retry,
            **options,
        )  # fmt: skip
    return OpenAIChat(
        "m", base_url=f"{url}/v1", stream=stream, timeouts=timeouts, limits=limits, retry=retry,
        **options,
    )  # fmt: skip


def describe(error: BaseException) -> str:
    """A row's outcome for an exception."""
    if isinstance(error, ProviderError):
        extra = error.limit or error.phase or error.provider_code or ""
        return f"ProviderError({error.kind}{', ' + extra if extra else ''})"
    return f"{type(error).__name__}: {str(error)[:60]}"


async def measured(
    name: str, call: Callable[[], Awaitable[Any]], group: str = "providers"
) -> tuple[CaseRow, Any]:
    """Run ``call`` under the hang guard as one row of the table; returns the row and the
    result or the exception."""
    with measure(group, name) as row:
        outcome: Any
        try:
            outcome = await asyncio.wait_for(call(), HANG_GUARD)
        except Exception as error:  # every outcome is recorded, then asserted by the case
            outcome = error
            row.outcome = describe(error)
        else:
            row.outcome = "ok"
    return row, outcome


async def ask(chat: OpenAIChat | AnthropicChat | OpenAIResponses, **options: Any) -> ChatResult:
    """One call, then the adapter closed."""
    try:
        return await chat([UserMessage("hi")], [], **options)
    finally:
        await chat.aclose()


async def chat_case(
    server: FakeProviderServer,
    name: str,
    wire: Wire = "openai-chat",
    **options: Any,
) -> tuple[CaseRow, Any]:
    """One measured call of an adapter on ``server``."""
    chat = adapter(server.base_url, wire, **options)
    return await measured(name, lambda: ask(chat))


def assert_bounded(row: CaseRow, seconds: float = MAX_SECONDS) -> None:
    assert row.seconds < seconds, f"{row.name}: {row.seconds:.1f} s"
    assert row.growth_mb < MAX_GROWTH_MB, f"{row.name}: grew {row.growth_mb:.0f} MiB"


def assert_kind(
    row: CaseRow, outcome: Any, kind: str, *, limit: str | None = None, phase: str | None = None
) -> ProviderError:
    assert isinstance(outcome, ProviderError), f"{row.name}: {row.outcome}"
    assert outcome.kind == kind, f"{row.name}: {row.outcome}"
    if limit is not None:
        assert outcome.limit == limit, f"{row.name}: {row.outcome}"
    if phase is not None:
        assert outcome.phase == phase, f"{row.name}: {row.outcome}"
    assert_bounded(row)
    return outcome
