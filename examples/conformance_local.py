"""Run the conformance kit against the embedded model's server and write its reports.

`make conformance-local` runs this and refreshes docs/conformance/. The server is
llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct. It is checked
twice: with OpenAI's default profile, so that every way it differs from OpenAI shows
(`llama-cpp-python.md`), and with the profile the CLI uses for it (`LOCAL_QUIRKS`,
`llama-cpp-python-local-profile.md`); `matrix.md` puts the two side by side.
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import version
from pathlib import Path

from agentfsm.adapters.providers import OpenAIQuirks
from agentfsm.adapters.providers.local import (
    LOCAL_CONTEXT_TOKENS,
    LOCAL_MODEL_NAME,
    LOCAL_QUIRKS,
    LocalModel,
)
from agentfsm.conformance import (
    Capabilities,
    CheckResult,
    LiveTarget,
    Report,
    matrix_markdown,
    report_markdown,
    run_checks,
)

CAPABILITIES = Capabilities(
    streaming=True,
    tools=True,
    tool_choice=True,
    usage=True,
    stream_usage=True,
    max_tokens=True,
    context_window=LOCAL_CONTEXT_TOKENS,
)
SERVER = f"llama-cpp-python {version('llama-cpp-python')} + SmolLM2-135M-Instruct"
PROFILES = {
    "llama-cpp-python": ("default profile", OpenAIQuirks()),
    "llama-cpp-python-local-profile": ("LOCAL_QUIRKS", LOCAL_QUIRKS),
}


def show(result: CheckResult) -> None:
    print(f"  {result.check:<4} {result.name:<34} {result.outcome}", file=sys.stderr)


async def check_local(profile: OpenAIQuirks | None = None, label: str = "") -> Report:
    """The report of the embedded model's server, read with the given quirk profile."""
    async with LocalModel(on_progress=lambda line: print(line, file=sys.stderr)) as model:
        target = LiveTarget(
            model.base_url,
            LOCAL_MODEL_NAME,
            capabilities=CAPABILITIES,
            quirks=profile or OpenAIQuirks(),
            name=f"{SERVER} ({label})" if label else SERVER,
        )
        return await run_checks(target, progress=show)


def main() -> int:
    folder = Path(__file__).resolve().parents[1] / "docs" / "conformance"
    folder.mkdir(parents=True, exist_ok=True)
    reports = []
    for stem, (label, profile) in PROFILES.items():
        report = asyncio.run(check_local(profile, label))
        (folder / f"{stem}.md").write_text(report_markdown(report), "utf-8")
        (folder / f"{stem}.json").write_text(json.dumps(report.as_dict(), indent=2) + "\n", "utf-8")
        print(stem, report.counts())
        reports.append(report)
    (folder / "matrix.md").write_text(
        "# llama-cpp-python, default profile vs LOCAL_QUIRKS\n\n" + matrix_markdown(reports),
        "utf-8",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
