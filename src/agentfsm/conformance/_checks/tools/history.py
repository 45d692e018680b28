"""Tool checks in live mode that send a history back: foreign ids (T14) and the two-turn
agent loop (T15)."""

from __future__ import annotations

from collections.abc import Sequence

from attrs import evolve

from agentfsm.adapters.providers import OpenAIQuirks, ProviderError
from agentfsm.engine import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from ..._context import TOOL_WEATHER, LiveContext
from ..._model import CheckFailed, ModelBehaviour, Normalized
from ..causes import (
    TOOLS_ONLY_WITH_CHOICE,
    expect_answer,
    is_empty,
    measure_tool_prompt,
    no_call,
    other_wire_figures,
    results_reach_prompt,
    sends_tool_choice,
    tool_turn_needs_text,
)
from .fixtures import (
    FOREIGN_CALLS,
    GET_WEATHER,
    LONG_CALL_ID,
    PARIS_JSON,
    SYSTEM_PROMPT,
    WEATHER_IN_PARIS,
    openai_call,
)
from .live import ask_or_fail, auto_choice_body, probe

__all__ = ["agent_loop_live", "foreign_ids_live"]

SHORT_CALLS = (("call_1", "Paris"), ("call_2", "Tokyo"), ("call_3", "Lima"))
"""The foreign-ids history's cities with plain short ids: tells ids from the rest."""


def _history(calls: Sequence[tuple[str, str]]) -> list[Message]:
    history: list[Message] = [UserMessage("What is the weather in Paris, Tokyo and Lima?")]
    for call_id, city in calls:
        call = ToolCall(call_id, GET_WEATHER, {"city": city})
        answer = ToolMessage(call_id, f"{city}: sunny.")
        history += [AssistantMessage("", tool_calls=[call]), answer]
    return history


async def _refused(
    ctx: LiveContext, history: list[Message], quirks: OpenAIQuirks | None = None
) -> ProviderError | None:
    """The error the history gets, or ``None`` when it is answered (and the answer says
    something: text or a call)."""
    try:
        result = await ctx.ask(
            stream=False, quirks=quirks, messages=history, tools=[TOOL_WEATHER], max_tokens=32
        )
    except ProviderError as error:
        return error
    if is_empty(result):  # is it the results the server left out?
        await results_reach_prompt(ctx, TOOL_WEATHER)
    expect_answer(result, "an answer to the history")
    return None


async def foreign_ids_live(ctx: LiveContext) -> Normalized | None:
    history = _history(FOREIGN_CALLS)
    quirks = ctx.target.quirks
    shape: Normalized | None = None
    error = await _refused(ctx, history)
    if error is not None and ctx.wire == "openai-chat":
        # The same history with the other assistant-content shape: tells ids from content.
        other = evolve(quirks, null_assistant_content=not quirks.null_assistant_content)
        if await _refused(ctx, history, other) is None:
            sent = "null" if other.null_assistant_content else "''"
            shape = Normalized(("Q23",), f"the ids are accepted once assistant content is {sent}")
            quirks, error = other, None
    if error is not None:
        got = str(error)[:200]
        again = await _refused(ctx, _history(SHORT_CALLS), quirks)
        if again is None:
            got += "; the same history with the ids call_1, call_2, call_3 is accepted"
            raise CheckFailed("a history with foreign ids accepted", got, quirks=("Q6",))
        why = f"{str(again)[:120]}: the ids are not the cause (see A4)"
        turn = await tool_turn_needs_text(ctx, TOOL_WEATHER) if ctx.wire == "anthropic" else None
        if turn is not None:  # the turn's shape is refused, as A4 shows
            got = f"{got}; with short ids too: {why}; {turn}"
            raise CheckFailed("a tool-call history accepted", got, quirks=("Q23",))
        raise CheckFailed("a tool-call history accepted", f"{got}; with short ids too: {why}")
    if ctx.wire != "openai-chat":  # the long-id probe below is a Chat Completions body
        return shape
    content = None if quirks.null_assistant_content else ""
    messages = [
        {"role": "user", "content": WEATHER_IN_PARIS},
        {
            "role": "assistant",
            "content": content,
            "tool_calls": [openai_call(LONG_CALL_ID, GET_WEATHER, PARIS_JSON)],
        },
        {"role": "tool", "tool_call_id": LONG_CALL_ID, "content": "Sunny."},
    ]
    raw = await ctx.raw({"messages": messages, "max_tokens": 16}, name="T14-long-id")
    if raw.status in (400, 422):
        return Normalized(("Q6",), "a 60-character id is rejected; the adapter shortens ids to 40")
    return shape


async def _choice_gets_a_call(ctx: LiveContext, prompt: str) -> None:
    """The adapter sends no ``tool_choice`` and got no call: when the same request with
    ``tool_choice: auto`` gets one, fail naming it, with the prompt tokens both ways."""
    body = auto_choice_body(ctx, prompt)
    try:
        _, again = await probe(ctx, body, "T15-tool-choice-auto")
    except CheckFailed:
        return  # the variation could not be made: nothing proven
    if not again.message.tool_calls:
        return
    here = await measure_tool_prompt(ctx, prompt, TOOL_WEATHER, system=SYSTEM_PROMPT)
    if here.measured and not here.only_with_choice:
        return  # the tools do reach the prompt without tool_choice: the model chose
    figures = here.summary() if here.measured else "prompt tokens not reported"
    there = await other_wire_figures(ctx, prompt, TOOL_WEATHER, system=SYSTEM_PROMPT)
    profile = "OpenAIQuirks" if ctx.wire == "openai-chat" else "AnthropicQuirks"
    fix = f"{profile}(explicit_tool_choice=True)"
    raise CheckFailed(
        "a tool call for the request the adapter sends (no tool_choice)",
        f"no call; the same request with tool_choice 'auto' gets one: {TOOLS_ONLY_WITH_CHOICE} "
        f"({figures}{there}); set {fix}",
        quirks=("Q39",),
    )


async def agent_loop_live(ctx: LiveContext) -> Normalized | None:
    prompt = "What is the weather in Paris? Use the get_weather tool."
    history: list[Message] = [SystemMessage(SYSTEM_PROMPT), UserMessage(prompt)]
    first = await ask_or_fail(ctx, "a first answer", messages=history, tools=[TOOL_WEATHER])
    if not first.message.tool_calls:
        expect_answer(first, "the first answer")
        if not await sends_tool_choice(ctx):
            await _choice_gets_a_call(ctx, prompt)
        what = "the weather in Paris"
        await no_call(ctx, first, what, prompt, TOOL_WEATHER, system=SYSTEM_PROMPT)
    history.append(first.message)
    history += [ToolMessage(c.id, "Paris: sunny, 21 °C.") for c in first.message.tool_calls]
    second = await ask_or_fail(
        ctx, "an answer to the tool result", messages=history, tools=[TOOL_WEATHER]
    )
    expect_answer(second, "the answer to the tool result")
    await results_reach_prompt(ctx, TOOL_WEATHER)
    if second.message.tool_calls:
        raise ModelBehaviour("called a tool again instead of answering")
    if second.finish_reason not in ("stop", "length"):
        raise CheckFailed("a final answer with finish_reason 'stop'", repr(second.finish_reason))
    return None
