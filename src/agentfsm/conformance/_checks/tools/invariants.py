"""The tool checks' invariants on a recorded corpus: the calls the recorded bytes carry, as
the adapter returns them."""

from __future__ import annotations

from typing import Any

from agentfsm.engine import ToolCall

from ..._exchange import RecordedCall, RecordedExchange, Verdict, on_success, verdict
from ..causes import EMPTY_ANSWER

__all__ = [
    "args_shapes_corpus",
    "no_args_corpus",
    "no_index_corpus",
    "none_corpus",
    "parallel_corpus",
    "single_forced_corpus",
    "stop_reason_inferred_corpus",
    "stream_auto_corpus",
    "trailing_empty_delta_corpus",
]


def _calls(exchange: RecordedExchange) -> tuple[list[RecordedCall], list[ToolCall], object]:
    """The recorded calls, the adapter's calls, and what to report as got: (id, name) pairs,
    or the outcome when there is no result."""
    result = exchange.result
    calls = list(result.message.tool_calls) if result else []
    pairs = [(c.id, c.name) for c in calls] if result else exchange.outcome
    return list(exchange.reply.calls.values()), calls, pairs


def _arguments(exchange: RecordedExchange) -> tuple[list[dict[str, Any] | None], list[Any]]:
    """The recorded arguments (``None`` where they do not parse) and the adapter's."""
    wanted, calls, _ = _calls(exchange)
    args = [c.arguments if c.raw_arguments is None else c.raw_arguments for c in calls]
    return [w.arguments() for w in wanted], args


@on_success
def single_forced_corpus(exchange: RecordedExchange) -> Verdict | None:
    """One recorded call: one call, its name, its id (or a generated one)."""
    wanted, calls, pairs = _calls(exchange)
    if len(wanted) != 1:
        return None
    holds = len(calls) == 1 and calls[0].name == wanted[0].name and bool(calls[0].id)
    holds = holds and calls[0].id == (wanted[0].id or calls[0].id)
    return verdict(holds, f"one call {wanted[0].name!r} id {wanted[0].id!r}", pairs)


@on_success
def stop_reason_inferred_corpus(exchange: RecordedExchange) -> Verdict | None:
    """Tool calls end with the finish ``tool_calls``, whatever the recorded reason."""
    if not exchange.reply.calls:
        return None
    result = exchange.result
    finish = result.finish_reason if result else exchange.outcome
    expected = f"finish 'tool_calls' (recorded {exchange.reply.finish})"
    return verdict(finish == "tool_calls", expected, finish)


@on_success
def no_index_corpus(exchange: RecordedExchange) -> Verdict | None:
    """Call fragments without ``index`` reassemble into as many calls as were sent."""
    wanted, calls, pairs = _calls(exchange)
    if not wanted or not exchange.reply.no_index:
        return None
    return verdict(len(calls) == len(wanted), f"{len(wanted)} calls", pairs)


@on_success
def args_shapes_corpus(exchange: RecordedExchange) -> Verdict | None:
    """Recorded arguments that parse come out as the same objects."""
    if not exchange.reply.calls:
        return None
    parsed, args = _arguments(exchange)
    if not all(p is not None for p in parsed):
        return None
    got = args if exchange.result else exchange.outcome
    return verdict(args == parsed, f"arguments {parsed}", got)


@on_success
def no_args_corpus(exchange: RecordedExchange) -> Verdict | None:
    """A call recorded without arguments comes out with ``{}``."""
    if not exchange.reply.calls:
        return None
    parsed, args = _arguments(exchange)
    if {} not in parsed:
        return None
    empty = [a for a, p in zip(args, parsed, strict=False) if p == {}]
    holds = len(args) == len(parsed) and all(a == {} for a in empty)
    got = args if exchange.result else exchange.outcome
    return verdict(holds, "arguments {} where none were sent", got)


@on_success
def parallel_corpus(exchange: RecordedExchange) -> Verdict | None:
    """Several recorded calls: the same names, in order, with distinct ids."""
    wanted, calls, pairs = _calls(exchange)
    if len(wanted) < 2:
        return None
    ids = [c.id for c in calls]
    holds = [c.name for c in calls] == [w.name for w in wanted]
    holds = holds and all(ids) and len(set(ids)) == len(ids)
    return verdict(holds, f"{[w.name for w in wanted]} with distinct ids", pairs)


@on_success
def none_corpus(exchange: RecordedExchange) -> Verdict | None:
    """An answer recorded without tool calls comes out without any."""
    if exchange.reply.calls:
        return None
    result = exchange.result
    summary = result if result is not None else exchange.outcome
    return verdict(bool(result and not result.message.tool_calls), "no tool calls", summary)


@on_success
def trailing_empty_delta_corpus(exchange: RecordedExchange) -> Verdict | None:
    """A later fragment with an empty id or name adds no phantom call."""
    wanted, calls, pairs = _calls(exchange)
    if not any(w.blank for w in wanted):
        return None
    return verdict(len(calls) == len(wanted), f"{len(wanted)} calls, no phantom", pairs)


_ANSWER_FINISHES = frozenset({"stop", "end_turn", "tool_calls", "tool_use", "completed"})


@on_success
def stream_auto_corpus(exchange: RecordedExchange) -> Verdict | None:
    """A finished answer says something: text or a tool call. A recorded answer that ends
    cleanly with neither (LiteLLM's rendering of llama.cpp's empty stream) is
    ``empty_answer``, whatever the adapter makes of it."""
    reply = exchange.reply
    if not _ANSWER_FINISHES & set(reply.finish):
        return None
    empty = not reply.calls and not reply.text.strip()
    got = f"{EMPTY_ANSWER}: finish {reply.finish}, no text, no tool call" if empty else "an answer"
    return verdict(not empty, "text or a tool call", got)
