"""Hostile model text in a run's HTML picture, opened in headless Chromium: markup and
script the model wrote, in every field a session records, must show as text and run
nothing. Each payload in each field is one attempt; it got through if it ran (set its
``window.__pwned_N``), made an element, failed to show verbatim, or the page erred."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentfsm import Agent, AssistantMessage, ChatResult, ToolCall, Usage, render_run
from agentfsm.testing import ScriptedChat, ScriptedTools

from ..chromium import Chromium
from ..conftest import require_program
from ..run_sessions import hostile_payloads
from .tally import AttackTally

pytestmark = pytest.mark.requires_program("chromium", "chromium")

FIELDS = ("prompt", "answer", "reasoning", "tool name", "tool arguments", "tool result")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Chromium]:
    chromium = Chromium(require_program("chromium", "chromium"), tmp_path / "profile")
    try:
        yield chromium
    finally:
        chromium.close()


async def hostile_session(folder: Path, payloads: list[str]) -> Path:
    """One run whose every recorded field holds all the payloads (one turn per payload)."""
    replies: list[ChatResult | str] = []
    for n, payload in enumerate(payloads):
        call = ToolCall(f"c{n}", payload, {"q": payload})
        replies.append(
            ChatResult(AssistantMessage(payload, (call,), reasoning=payload), Usage(1, 1))
        )
        # the tool the model named does not exist; a real one echoes the payload back
        call = ToolCall(f"e{n}", "echo", {"text": payload})
        replies.append(ChatResult(AssistantMessage("", (call,)), Usage(1, 1)))
    replies.append("\n".join(payloads))
    tools = ScriptedTools({"echo": lambda text: text})
    agent = Agent(ScriptedChat(replies), tools, session_dir=folder, max_turns=len(replies))
    outcome = await agent.run("\n".join(payloads))
    assert outcome.stopped_reason == "final"
    return Path(str(outcome.session_path))


def test_hostile_model_text_shows_as_text_and_runs_nothing(
    tmp_path: Path, browser: Chromium, attacks: AttackTally
) -> None:
    payloads = hostile_payloads()
    session = asyncio.run(hostile_session(tmp_path / "sessions", payloads))
    page = tmp_path / "run.html"
    render_run(session, page)
    browser.open(page)
    assert browser.evaluate("document.body.dataset.ready") == "1"
    # every turn and the run's input opened in turn; the text each showed, per turn
    shown = browser.evaluate(
        "(() => { const out = []; for (let i = 0; i < agentfsmRun.turns; i++) {"
        " agentfsmRun.show(i, null); out.push(document.getElementById('detail').textContent); }"
        " document.querySelector('#turns li.run').click();"
        " out.push(document.getElementById('detail').textContent); return out; })()"
    )
    prompt_text = shown[-1]
    ran = browser.evaluate(
        "Object.keys(window).filter(k => k.startsWith('__pwned')).concat("
        "document.querySelectorAll('img, iframe, svg svg, a[href], style:not(head style), "
        "b, object, embed').length ? ['element'] : [])"
    )
    for n, payload in enumerate(payloads):
        first, echo = shown[2 * n], shown[2 * n + 1]
        where = {
            "prompt": prompt_text,
            "answer": shown[-2],
            "reasoning": first,
            "tool name": first,
            "tool arguments": first,
            "tool result": echo,
        }
        for field in FIELDS:
            fired = f"__pwned_{n}" in ran
            visible = payload in where[field]
            attacks.record(
                "run picture: model markup",
                fired or not visible,
                f"{field}: {payload!r} ran={fired} shown={visible}",
            )
    attacks.record("run picture: model markup", "element" in ran, f"elements made: {ran}")
    assert browser.errors == []
