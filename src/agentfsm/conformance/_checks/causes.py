"""Causes a check can prove by varying a request, instead of blaming the model.

A live check that gets no tool call, or an answer that rambles, first asks whether a request
variation explains it: the prompt tokens of the same request without tools, with tools, and
with tools and ``tool_choice``; of the same text as a string and as content blocks; and the
same measurement on the other wire of the same server. A difference the server should not
make is a failure that names the cause with its figures; ``model behaviour`` is left for
what no variation explains, and its message says what was measured.
"""

from __future__ import annotations

from typing import Any

import httpx
from attrs import evolve, frozen

from agentfsm.adapters.providers import ProviderError
from agentfsm.engine import ChatResult, ToolSpec

from .._context import LiveContext, Wire
from .._model import CheckFailed, ModelBehaviour
from .._raw_bodies import usage_prompt_keys

__all__ = [
    "BLOCKS_AS_TEXT",
    "EMPTY_ANSWER",
    "RESULTS_UNSEEN",
    "TOOLS_NEVER",
    "TOOLS_ONLY_WITH_CHOICE",
    "ToolPrompt",
    "adapter_profile",
    "blocks_as_text",
    "expect_answer",
    "is_empty",
    "measure_tool_prompt",
    "no_call",
    "other_wire_figures",
    "prompt_tokens",
    "refusal",
    "results_reach_prompt",
    "sends_tool_choice",
    "streams_tools",
    "string_vs_blocks",
    "tool_turn_needs_text",
]

EMPTY_ANSWER = "empty_answer"
"""The cause named when a request gets neither text nor a tool call."""
TOOLS_ONLY_WITH_CHOICE = "tools reach the prompt only with tool_choice"
TOOLS_NEVER = "the tools never reach the prompt"
RESULTS_UNSEEN = "tool results never reach the prompt"
BLOCKS_AS_TEXT = "text blocks reach the prompt as more than their text"
MARGIN = 8
"""Prompt tokens a variation must add before it counts (a tool's schema adds dozens)."""


def is_empty(result: ChatResult) -> bool:
    """Neither text nor a tool call (reasoning alone does not answer anybody)."""
    return not result.message.tool_calls and not result.message.content.strip()


def _describe(result: ChatResult) -> str:
    usage = result.usage
    counts = f", usage {usage.input_tokens}/{usage.output_tokens}" if usage else ", no usage"
    return f"finish {result.finish_reason!r}, no text, no tool call{counts}"


def expect_answer(result: ChatResult, what: str) -> None:
    """``result`` answers (text or a call); otherwise a failure naming ``empty_answer``,
    unless the usage shows the model itself ended its turn at once (one output token, the
    end of turn, after a prompt it was given): that is the model's."""
    if is_empty(result):
        usage = result.usage
        if usage is not None and usage.output_tokens == 1 and usage.input_tokens > 0:
            raise ModelBehaviour(
                f"{what}: the model ended its turn at once (no text, no tool call, one "
                f"output token after {usage.input_tokens} prompt tokens)"
            )
        raise CheckFailed(
            f"{what}: text or a tool call", f"{EMPTY_ANSWER}: {_describe(result)}", quirks=("Q37",)
        )


def refusal(error: ProviderError) -> bool:
    """The server answered and refused the request itself: a 4xx, or a 5xx that quotes a
    validation error. A plain 5xx, a timeout or a connection failure says nothing about the
    request's shape, so no quirk is blamed for it."""
    status = error.status or 0
    if 400 <= status < 500 and status not in (401, 403, 408, 429):
        return True
    text = str(error).lower()
    return status >= 500 and any(w in text for w in ("validation", "input should", "invalid"))


# -- prompt tokens -------------------------------------------------------------------------


def _other(wire: Wire) -> Wire:
    return "anthropic" if wire == "openai-chat" else "openai-chat"


def _messages(wire: Wire, prompt: str, system: str | None, blocks: bool) -> dict[str, Any]:
    content: Any = [{"type": "text", "text": prompt}] if blocks else prompt
    messages: list[dict[str, Any]] = [{"role": "user", "content": content}]
    if system is None:
        return {"messages": messages}
    if wire == "anthropic":
        return {"messages": messages, "system": system}
    return {"messages": [{"role": "system", "content": system}, *messages]}


def _tools(wire: Wire, spec: ToolSpec, choice: bool) -> dict[str, Any]:
    fields = {"name": spec.name, "description": spec.description}
    if wire == "anthropic":
        body: dict[str, Any] = {"tools": [{**fields, "input_schema": spec.parameters}]}
        return {**body, "tool_choice": {"type": "auto"}} if choice else body
    body = {"tools": [{"type": "function", "function": {**fields, "parameters": spec.parameters}}]}
    return {**body, "tool_choice": "auto"} if choice else body


async def prompt_tokens(ctx: LiveContext, body: dict[str, Any], *, name: str) -> int | None:
    """The prompt tokens the server counts for ``body`` (unstreamed, a few output tokens), or
    ``None`` when the answer carries no count."""
    try:
        raw = await ctx.raw({**body, "max_tokens": 8, "temperature": 0}, name=name)
    except httpx.HTTPError:  # a measurement that cannot be made is no verdict
        return None
    try:
        data = raw.json() if raw.status == 200 else None
    except ValueError:
        return None
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return None
    counts = [usage.get(k) for k in usage_prompt_keys(ctx.wire)]
    total = sum(c for c in counts if isinstance(c, int) and not isinstance(c, bool))
    return total if total > 0 else None


def _on(ctx: LiveContext, wire: Wire) -> LiveContext:
    """The same target on ``wire`` (the recordings shared)."""
    return evolve(ctx, target=evolve(ctx.target, wire=wire))


@frozen
class ToolPrompt:
    """The prompt tokens of one request on one wire: without tools, with tools, and with
    tools and ``tool_choice: auto``."""

    wire: Wire
    bare: int | None
    tools: int | None
    chosen: int | None

    @property
    def measured(self) -> bool:
        return None not in (self.bare, self.tools, self.chosen)

    @property
    def only_with_choice(self) -> bool:
        """The tools change the prompt only when ``tool_choice`` is sent."""
        if self.bare is None or self.tools is None or self.chosen is None:
            return False
        return self.tools - self.bare < MARGIN <= self.chosen - self.bare

    @property
    def never(self) -> bool:
        """The tools change the prompt in no form."""
        if self.bare is None or self.tools is None or self.chosen is None:
            return False
        return max(self.tools, self.chosen) - self.bare < MARGIN

    def summary(self) -> str:
        def show(n: int | None) -> str:
            return "?" if n is None else str(n)

        return (
            f"prompt tokens on the {self.wire} wire: {show(self.bare)} without tools, "
            f"{show(self.tools)} with tools, {show(self.chosen)} with tools and tool_choice"
        )


async def measure_tool_prompt(
    ctx: LiveContext, prompt: str, spec: ToolSpec, *, system: str | None = None
) -> ToolPrompt:
    """Three unstreamed requests that differ only in their tools and ``tool_choice``."""
    base = _messages(ctx.wire, prompt, system, blocks=False)
    name = f"cause-tool-prompt-{ctx.wire}"
    bare = await prompt_tokens(ctx, base, name=f"{name}-bare")
    tools = await prompt_tokens(ctx, {**base, **_tools(ctx.wire, spec, False)}, name=name)
    chosen = await prompt_tokens(
        ctx, {**base, **_tools(ctx.wire, spec, True)}, name=f"{name}-choice"
    )
    return ToolPrompt(ctx.wire, bare, tools, chosen)


async def other_wire_figures(
    ctx: LiveContext, prompt: str, spec: ToolSpec, *, system: str | None = None
) -> str:
    """The same measurement on the server's other wire, as ``"; …"``, or ``""`` when that
    wire does not answer with counts."""
    other = await measure_tool_prompt(_on(ctx, _other(ctx.wire)), prompt, spec, system=system)
    return f"; {other.summary()}" if other.measured else ""


async def adapter_profile(ctx: LiveContext) -> Any:
    """The quirk profile of the adapter the target builds (``None`` if it has none)."""
    chat = ctx.chat(stream=False)
    try:
        return getattr(chat, "quirks", None)
    finally:
        close = getattr(chat, "aclose", None)
        if callable(close):
            await close()


async def sends_tool_choice(ctx: LiveContext) -> bool:
    """Whether the adapter the target builds sends ``tool_choice`` with tools (its quirk
    profile's ``explicit_tool_choice``)."""
    return bool(getattr(await adapter_profile(ctx), "explicit_tool_choice", False))


async def streams_tools(ctx: LiveContext) -> bool:
    """Whether the adapter the target builds streams a request that offers tools."""
    return bool(getattr(await adapter_profile(ctx), "stream_with_tools", True))


async def no_call(
    ctx: LiveContext,
    result: ChatResult,
    what: str,
    prompt: str,
    spec: ToolSpec,
    *,
    system: str | None = None,
) -> None:
    """``result`` holds no tool call: fail on an empty answer or on a cause the prompt tokens
    prove; otherwise skip as model behaviour, saying what was measured."""
    if result.message.tool_calls:
        return
    expect_answer(result, what)
    here = await measure_tool_prompt(ctx, prompt, spec, system=system)
    answered = f"answered {result.message.content[:60]!r}"
    if here.never or (here.only_with_choice and not await sends_tool_choice(ctx)):
        there = await other_wire_figures(ctx, prompt, spec, system=system)
        cause = TOOLS_NEVER if here.never else TOOLS_ONLY_WITH_CHOICE
        raise CheckFailed(
            f"{what}: the tools in the prompt of the request the adapter sends",
            f"no tool call ({answered}): {cause} ({here.summary()}{there})",
            quirks=("Q52",) if here.never else ("Q39",),
        )
    figures = here.summary() if here.measured else "prompt tokens could not be measured"
    raise ModelBehaviour(f"no tool call for {what} ({answered}; {figures})")


async def string_vs_blocks(ctx: LiveContext, prompt: str) -> tuple[int, int] | None:
    """Prompt tokens of ``prompt`` as a string and as one text block; ``None`` when either
    cannot be measured."""
    name = f"cause-content-{ctx.wire}"
    string = await prompt_tokens(
        ctx, _messages(ctx.wire, prompt, None, blocks=False), name=f"{name}-string"
    )
    blocks = await prompt_tokens(
        ctx, _messages(ctx.wire, prompt, None, blocks=True), name=f"{name}-blocks"
    )
    return None if string is None or blocks is None else (string, blocks)


def _inflated(counts: tuple[int, int] | None) -> bool:
    """Text blocks counted as clearly more than the same text as a string."""
    if counts is None:
        return False
    string, blocks = counts
    return blocks - string >= max(MARGIN, string // 2)


async def blocks_as_text(ctx: LiveContext, prompt: str) -> tuple[int, int] | None:
    """The prompt tokens of ``prompt`` as a string and as a text block (``None`` when not
    reported); a failure naming both counts (and the other wire's) when the block costs
    clearly more than its text."""
    counts = await string_vs_blocks(ctx, prompt)
    if counts is None or not _inflated(counts):
        return counts
    string, blocks = counts
    other = _other(ctx.wire)
    there = await string_vs_blocks(_on(ctx, other), prompt)
    also = (
        f"; on the {other} wire: {there[1]} as a text part, {there[0]} as a string" if there else ""
    )
    got = (
        f"{BLOCKS_AS_TEXT}: {blocks} prompt tokens as a text block, {string} as a string{also} "
        f"(the {ctx.wire} adapter sends blocks; the server renders the list, not its text)"
    )
    expected = "the same prompt tokens for a text block as for the string"
    raise CheckFailed(expected, got, quirks=("Q38",))


_RESULT = "Paris: sunny, 21 °C."
_LONGER = _RESULT + " The sky stays clear and the wind light all afternoon." * 8


def _result_history(ctx: LiveContext, spec: ToolSpec, result: str) -> dict[str, Any]:
    """A call of ``spec`` and its ``result``, in the wire's own shape (the assistant turn
    carries a little text, which every server accepts)."""
    question = {"role": "user", "content": "What is the weather in Paris?"}
    if ctx.wire == "anthropic":
        use = {"type": "tool_use", "id": "toolu_r1", "name": spec.name, "input": {"city": "Paris"}}
        answer = {"type": "tool_result", "tool_use_id": "toolu_r1", "content": result}
        turns = [
            question,
            {"role": "assistant", "content": [{"type": "text", "text": "Let me check."}, use]},
            {"role": "user", "content": [answer]},
        ]
    else:
        call = {"name": spec.name, "arguments": '{"city": "Paris"}'}
        turns = [
            question,
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [{"id": "call_r1", "type": "function", "function": call}],
            },
            {"role": "tool", "tool_call_id": "call_r1", "content": result},
        ]
    return {"messages": turns, **_tools(ctx.wire, spec, False)}


async def results_reach_prompt(ctx: LiveContext, spec: ToolSpec) -> None:
    """Fail when a tool result of about 80 more words costs no more prompt tokens than a
    short one: the server drops tool results, and the model answers without them."""
    name = f"cause-tool-result-{ctx.wire}"
    short = await prompt_tokens(ctx, _result_history(ctx, spec, _RESULT), name=f"{name}-short")
    long = await prompt_tokens(ctx, _result_history(ctx, spec, _LONGER), name=f"{name}-long")
    if short is None or long is None or long - short >= MARGIN:
        return
    words = len(_LONGER.split()) - len(_RESULT.split())
    raise CheckFailed(
        "a tool result in the prompt",
        f"{RESULTS_UNSEEN}: {short} prompt tokens with a short tool result, {long} with one "
        f"{words} words longer (the model answers without the results)",
        quirks=("Q42",),
    )


async def tool_turn_needs_text(ctx: LiveContext, spec: ToolSpec) -> str | None:
    """Messages wire: when an assistant turn of ``tool_use`` blocks alone is refused and the
    same turn with a text block beside them is accepted, say so (``None`` otherwise)."""

    async def status(with_text: bool) -> tuple[int, str]:
        blocks = [{"type": "text", "text": "Let me check."}] if with_text else []
        use = {"type": "tool_use", "id": "toolu_a4", "name": spec.name, "input": {}}
        result = {"type": "tool_result", "tool_use_id": "toolu_a4", "content": _RESULT}
        body = {
            "messages": [
                {"role": "user", "content": "What is the weather in Paris?"},
                {"role": "assistant", "content": [*blocks, use]},
                {"role": "user", "content": [result]},
            ],
            **_tools(ctx.wire, spec, False),
            "max_tokens": 16,
        }
        name = f"cause-tool-turn-{'text' if with_text else 'bare'}"
        try:
            raw = await ctx.raw(body, name=name)
        except httpx.HTTPError as error:
            return 0, type(error).__name__
        return raw.status, raw.text[:160]

    bare, why = await status(False)
    if bare == 200 or bare == 0:
        return None
    with_text, _ = await status(True)
    if with_text != 200:
        return None
    return (
        f"an assistant turn of tool_use blocks alone gets {bare} ({why}); the same turn with a "
        "text block beside them is accepted"
    )
