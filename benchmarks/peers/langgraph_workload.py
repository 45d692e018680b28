# mypy: ignore-errors
# (runs in its own virtualenv: the project's type checker cannot see the peer's package)
"""LangGraph: ``create_react_agent`` with a scripted chat model, one async ``echo`` tool.

Run with the interpreter of ``benchmarks/.peers/langgraph`` (benchmarks/peers.py).
LangChain's ``GenericFakeChatModel`` cannot bind tools, so the model is a minimal
``BaseChatModel`` whose ``bind_tools`` returns itself.
"""

from __future__ import annotations

import warnings
from typing import Any

from _harness import Counter, main
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

TURNS = [0]


class ScriptedChatModel(BaseChatModel):
    """Answers at once: an ``echo`` call per turn, then the text "done"."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _reply(self) -> ChatResult:
        Counter.calls += 1
        if Counter.calls > TURNS[0]:
            message = AIMessage(content="done")
        else:
            call = {
                "name": "echo",
                "args": {"text": f"m{Counter.calls}"},
                "id": f"c{Counter.calls}",
            }
            message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        return self._reply()

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        return self._reply()

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@tool
async def echo(text: str) -> str:
    """Return the text."""
    return text


with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    graph = create_react_agent(ScriptedChatModel(), [echo], prompt="You are a benchmark.")


async def run_once(turns: int) -> int:
    TURNS[0] = turns
    state = await graph.ainvoke(
        {"messages": [("user", "go")]}, config={"recursion_limit": 2 * turns + 10}
    )
    assert state["messages"][-1].content == "done"
    assert len(state["messages"]) == 2 * turns + 2
    return Counter.calls


if __name__ == "__main__":
    main(run_once, ("langgraph", "langgraph-prebuilt", "langchain-core"))
