# mypy: ignore-errors
# (runs in its own virtualenv: the project's type checker cannot see the peer's package)
"""pydantic-ai: ``Agent`` + ``FunctionModel``, one async ``echo`` tool (benchmarks/peers.py).

Run with the interpreter of ``benchmarks/.peers/pydantic_ai`` (pydantic-ai is never in the
project's environment).
"""

from __future__ import annotations

from typing import Any

from _harness import Counter, main
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

TURNS = [0]


async def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
    Counter.calls += 1
    if Counter.calls > TURNS[0]:
        return ModelResponse(parts=[TextPart("done")])
    args = {"text": f"m{Counter.calls}"}
    return ModelResponse(parts=[ToolCallPart("echo", args, tool_call_id=f"c{Counter.calls}")])


agent = Agent(FunctionModel(model), system_prompt="You are a benchmark.")


@agent.tool_plain
async def echo(text: str) -> str:
    """Return the text."""
    return text


LIMITS = UsageLimits(request_limit=None)


async def run_once(turns: int) -> int:
    TURNS[0] = turns
    result = await agent.run("go", usage_limits=LIMITS)
    assert result.output == "done"
    return Counter.calls


if __name__ == "__main__":
    main(run_once, ("pydantic-ai-slim", "pydantic"))
