"""Run the conformance kit against the embedded model's server and write its report.

`make conformance-local` runs this and refreshes docs/conformance/llama-cpp-python.md (and
the JSON next to it). The server is llama-cpp-python's OpenAI-compatible server with
SmolLM2-135M-Instruct; it is checked with OpenAI's default profile, so that every way it
differs from OpenAI shows in the report.
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import version
from pathlib import Path

from agentfsm.adapters.providers.local import LOCAL_CONTEXT_TOKENS, LOCAL_MODEL_NAME, LocalModel
from agentfsm.conformance import Capabilities, EndpointTarget, Report, report_markdown, run_checks

CAPABILITIES = Capabilities(
    streaming=True,
    tools=True,
    tool_choice=True,
    usage=True,
    stream_usage=True,
    max_tokens=True,
    context_window=LOCAL_CONTEXT_TOKENS,
)


async def check_local(progress: bool = True) -> Report:
    """The report of the running embedded model."""
    async with LocalModel(on_progress=lambda line: print(line, file=sys.stderr)) as model:
        target = EndpointTarget(
            model.base_url,
            LOCAL_MODEL_NAME,
            capabilities=CAPABILITIES,
            name=f"llama-cpp-python {version('llama-cpp-python')} + SmolLM2-135M-Instruct",
        )

        def show(result: object) -> None:
            if progress:
                print(f"  {result.check:<4} {result.name:<34} {result.outcome}", file=sys.stderr)  # type: ignore[attr-defined]

        return await run_checks(target, progress=show)


def main() -> int:
    report = asyncio.run(check_local())
    folder = Path(__file__).resolve().parents[1] / "docs" / "conformance"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "llama-cpp-python.md").write_text(report_markdown(report), "utf-8")
    (folder / "llama-cpp-python.json").write_text(
        json.dumps(report.as_dict(), indent=2) + "\n", "utf-8"
    )
    print(report.counts())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
