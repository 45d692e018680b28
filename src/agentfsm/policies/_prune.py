"""``prune_tool_results``: keep tool output within a character budget without breaking caches.

Before each send, the largest *fresh* tool results are replaced with a short marker until
the model-visible total of tool results is under budget. Every result is recorded as one of:

- **replaced** (must re-apply): its marker is re-sent byte for byte on every later turn;
- **frozen**: it was sent whole once, so it sits in the provider's cached prefix and is
  never shrunk afterwards (that would cost more than it saves);
- **fresh**: never sent; eligible, largest first.

Results answering the latest assistant message are protected (the model has not read them
yet) but recorded as seen, so they freeze. The record lives in
``RunContext.policy_state["prune_tool_results"]``, which ``Agent`` persists with the
session, so a resumed run keeps re-sending the same markers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from attrs import define

from agentfsm.engine import AssistantMessage, Message, RunContext, ToolMessage, utf8_bytes

__all__ = ["TOOL_RESULT_BUDGET_CHARS", "prune_marker", "prune_tool_results"]

TOOL_RESULT_BUDGET_CHARS = 200_000
"""Default budget for the model-visible total of tool results."""


def prune_marker(content: str) -> str:
    """The marker that replaces a pruned result (a function of its content only)."""
    return (
        f"[tool result pruned: {len(content)} characters removed to keep the context small; "
        "run the tool again if you still need it]"
    )


def _key(message: ToolMessage) -> str:
    digest = hashlib.blake2b(utf8_bytes(message.content), digest_size=8).hexdigest()
    return f"{message.tool_call_id}:{digest}"


@define
class _Scan:
    """Per-run cache, so each request only looks at the messages added since the last one."""

    compressions: int
    state: dict[str, str | None]
    """The durable record (``key: marker or None``) the scan was made with."""
    scanned: int = 0
    total: int = 0
    visible: list[Message] | None = None


class prune_tool_results:
    """Replace the largest fresh tool results with markers while over ``budget_chars``."""

    name = "prune_tool_results"

    def __init__(self, budget_chars: int = TOOL_RESULT_BUDGET_CHARS) -> None:
        if budget_chars < 1:
            raise ValueError("budget_chars must be positive")
        self.budget_chars = budget_chars

    def shape_request(self, ctx: RunContext, messages: Sequence[Message]) -> Sequence[Message]:
        incremental = messages is ctx.history
        scans: list[_Scan] = ctx.state(self, list)
        scan = scans[0] if incremental and scans else None
        if scan is None or scan.compressions != ctx.compressions or scan.scanned > len(messages):
            # The durable record, kept by the scan: it stays the same dict for the whole run.
            state: dict[str, str | None] = ctx.durable_state(self, dict)
            scan = _Scan(ctx.compressions, state)
            if incremental:
                scans[:] = [scan]
        state = scan.state
        start = scan.scanned
        budget = self.budget_chars
        total = scan.total
        fresh: list[tuple[int, str, ToolMessage]] = []
        replaced_any = False
        for index in range(start, len(messages)):
            message = messages[index]
            if not isinstance(message, ToolMessage):
                continue
            key = _key(message)
            if key not in state:
                fresh.append((index, key, message))
                total += len(message.content)
                continue
            marker = state[key]
            if marker is None:
                total += len(message.content)
            else:
                total += len(marker)
                replaced_any = True

        if total > budget and fresh:
            latest = len(messages) - 1
            while latest >= 0 and not isinstance(messages[latest], AssistantMessage):
                latest -= 1
            eligible = [f for f in fresh if f[0] < latest]
            for _, key, message in sorted(eligible, key=lambda f: -len(f[2].content)):
                if total <= budget:
                    break
                marker = prune_marker(message.content)
                state[key] = marker
                total += len(marker) - len(message.content)
                replaced_any = True
        scan.total = total
        for _, key, _message in fresh:
            state.setdefault(key, None)  # sent whole now: frozen from here on

        if replaced_any and scan.visible is None:
            scan.visible = list(messages[:start])
        if scan.visible is not None:
            for index in range(start, len(messages)):
                message = messages[index]
                if isinstance(message, ToolMessage):
                    marker = state.get(_key(message))
                    if marker is not None:
                        message = ToolMessage(message.tool_call_id, marker, message.is_error)
                scan.visible.append(message)
        scan.scanned = len(messages)
        return scan.visible if scan.visible is not None else messages

    def __repr__(self) -> str:
        return f"prune_tool_results({self.budget_chars})"
