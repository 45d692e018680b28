# mypy: ignore-errors
# (runs in its own virtualenv: the project's type checker cannot see the peer's package)
"""OpenAI Agents SDK: ``Runner.run`` with a custom ``Model``, one async ``echo`` tool.

Run with the interpreter of ``benchmarks/.peers/openai_agents`` (benchmarks/peers.py).
Tracing is off (``RunConfig(tracing_disabled=True)``), so nothing leaves the process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from _harness import Counter, main
from agents import Agent, FunctionTool, Model, ModelResponse, RunConfig, Runner, function_tool
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

TURNS = [0]


class ScriptedModel(Model):
    """Answers at once: an ``echo`` call per turn, then the text "done"."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        Counter.calls += 1
        item: Any
        if Counter.calls > TURNS[0]:
            item = ResponseOutputMessage(
                id="msg",
                content=[ResponseOutputText(text="done", type="output_text", annotations=[])],
                role="assistant",
                status="completed",
                type="message",
            )
        else:
            item = ResponseFunctionToolCall(
                arguments=f'{{"text":"m{Counter.calls}"}}',
                call_id=f"c{Counter.calls}",
                name="echo",
                type="function_call",
            )
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


@function_tool
async def echo(text: str) -> str:
    """Return the text."""
    return text


assert isinstance(echo, FunctionTool)
agent = Agent(
    name="bench", instructions="You are a benchmark.", model=ScriptedModel(), tools=[echo]
)
CONFIG = RunConfig(tracing_disabled=True)


async def run_once(turns: int) -> int:
    TURNS[0] = turns
    result = await Runner.run(agent, "go", max_turns=turns + 5, run_config=CONFIG)
    assert result.final_output == "done", result.final_output
    return Counter.calls


if __name__ == "__main__":
    main(run_once, ("openai-agents", "openai", "pydantic"))
