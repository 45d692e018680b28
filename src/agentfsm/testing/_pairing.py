"""The tool-call pairing rules that OpenAI and Anthropic enforce on a request's messages.

Both APIs answer HTTP 400 to a history with a tool call that no result answers, or a result
that answers no call. ``FakeProviderServer(strict=True)`` applies these checks, so a test
sees the same rejection a real provider would give.

OpenAI Chat Completions (``/chat/completions``): every ``tool_calls`` id of an assistant
message is answered by a ``tool`` message among the ones that directly follow it (before
the next assistant, user or system message); a ``tool`` message answers a call of that
assistant message, once.

Anthropic Messages (``/messages``): roles alternate ``user`` / ``assistant``, starting with
``user``; the ``tool_use`` blocks of an assistant message are answered by ``tool_result``
blocks in the very next (user) message, which comes first in its content; a
``tool_result`` answers a ``tool_use`` of the message just before, once.

OpenAI Responses (``/responses``): every ``function_call`` item's ``call_id`` is answered by
a ``function_call_output`` item later in ``input``, and every ``function_call_output``
answers a ``function_call`` before it (the API's own wording is used in the message).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "anthropic_pairing_problem",
    "openai_pairing_problem",
    "pairing_problem",
    "responses_pairing_problem",
]


def _calls_ids(message: dict[str, Any]) -> list[str]:
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        return []
    return [str(c.get("id")) for c in calls if isinstance(c, dict)]


def openai_pairing_problem(body: Any) -> str | None:
    """What breaks the OpenAI pairing rules in a Chat Completions body (``None``: valid)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return "messages: expected an array"
    open_ids: list[str] = []
    opened_at = -1
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"messages[{index}]: expected an object"
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_ids:
                return (
                    f"messages[{index}]: a 'tool' message must answer a 'tool_calls' id of "
                    f"the assistant message before it; {call_id!r} answers none"
                )
            open_ids.remove(str(call_id))
            continue
        if open_ids:
            return (
                f"messages[{opened_at}]: an assistant message with 'tool_calls' must be "
                f"followed by tool messages answering each tool_call_id; not answered: "
                f"{', '.join(open_ids)}"
            )
        if role == "assistant":
            open_ids = _calls_ids(message)
            opened_at = index
    if open_ids:
        return f"messages[{opened_at}]: tool_call_ids without a tool message: {', '.join(open_ids)}"
    return None


def _blocks(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def anthropic_pairing_problem(body: Any) -> str | None:
    """What breaks the Anthropic pairing and alternation rules in a Messages body."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return "messages: expected an array"
    expected = "user"
    open_ids: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"messages.{index}: expected an object"
        role = message.get("role")
        if role != expected:
            return f"messages.{index}: roles must alternate between 'user' and 'assistant'"
        results = _blocks(message, "tool_result")
        for block in results:
            call_id = block.get("tool_use_id")
            if call_id not in open_ids:
                return (
                    f"messages.{index}: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {call_id}. Each `tool_result` block must have a corresponding "
                    "`tool_use` block in the previous message."
                )
            open_ids.remove(str(call_id))
        if open_ids:
            return (
                f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(open_ids)}"
            )
        content = message.get("content")
        if results and isinstance(content, list) and content[: len(results)] != results:
            return f"messages.{index}: `tool_result` blocks must come first in the content"
        open_ids = [str(b.get("id")) for b in _blocks(message, "tool_use")]
        expected = "assistant" if role == "user" else "user"
    if open_ids:
        return (
            f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` "
            f"blocks immediately after: {', '.join(open_ids)}"
        )
    return None


def responses_pairing_problem(body: Any) -> str | None:
    """What breaks the pairing rules in a Responses body's ``input`` items."""
    items = body.get("input") if isinstance(body, dict) else None
    if isinstance(items, str):
        return None
    if not isinstance(items, list):
        return "input: expected a string or an array"
    calls: list[str] = []
    answered: set[str] = set()
    for item in items:
        if not isinstance(item, dict):
            return "input: every item must be an object"
        if item.get("type") == "function_call":
            calls.append(str(item.get("call_id")))
        elif item.get("type") == "function_call_output":
            call_id = str(item.get("call_id"))
            if call_id not in calls:
                return f"No tool call found for function call output with call_id {call_id}."
            answered.add(call_id)
    for call_id in calls:
        if call_id not in answered:
            return f"No tool output found for function call {call_id}."
    return None


def pairing_problem(path: str, body: Any) -> str | None:
    """The pairing problem of a request to ``path`` (``…/chat/completions`` is checked as
    OpenAI, ``…/messages`` as Anthropic, ``…/responses`` as OpenAI Responses, anything
    else passes)."""
    route = path.split("?", 1)[0].rstrip("/")
    if route.endswith("/chat/completions"):
        return openai_pairing_problem(body)
    if route.endswith("/messages"):
        return anthropic_pairing_problem(body)
    if route.endswith("/responses"):
        return responses_pairing_problem(body)
    return None
